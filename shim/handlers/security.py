"""SASL authentication, ACL administration and SCRAM users (CreateAcls, DescribeAcls,
DeleteAcls, Describe/AlterUserScramCredentials), as Kafka's KafkaApis answers them.

The connection's authentication state is `ctx.session` (shim.security.session); the
server closes the connection after a failed SaslAuthenticate. ACL and user administration
need ALTER (DESCRIBE to read) on the cluster; the ACL APIs answer SECURITY_DISABLED when
`camus serve` runs without an authorizer, as Kafka does without authorizer.class.name.
"""

from __future__ import annotations

import logging

from shim.protocol import ErrorCode
from shim.security import acl, authorize
from shim.security.quotas import QuotaStore
from shim.security.users import HASHES, MAX_ITERATIONS, MECHANISM_CODES, MIN_ITERATIONS, salted_credential

log = logging.getLogger("camus.security")
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


def handle_sasl_handshake(ctx, request):
    session = ctx.session
    code = session.handshake(request.body.mechanism, request.api_version)
    return request.response(error_code=code, mechanisms=list(session.security.mechanisms))


def handle_sasl_authenticate(ctx, request):
    answer, failure, lifetime = ctx.session.step(request.body.auth_bytes)
    if failure is not None:
        log.info("client %s: SASL authentication failed: %s", ctx.client_host, failure)
        return request.response(error_code=ErrorCode.sasl_authentication_failed,
                                error_message=failure, auth_bytes=b"")
    return request.response(error_code=ErrorCode.none, auth_bytes=answer, session_lifetime=lifetime)


def _acl_refusal(ctx, operation: int) -> tuple[ErrorCode, str] | None:
    if ctx.broker.authorizer is None:
        return ErrorCode.security_disabled, "no authorizer is configured on this broker (--authorizer)"
    if not authorize.cluster(ctx, operation):
        return ErrorCode.cluster_authorization_failed, "cluster authorization failed"
    return None


def _filter(f) -> acl.Filter:
    return acl.Filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                      f.principal_filter, f.host_filter, f.operation, f.permission_type)


def _binding_fields(b: acl.Binding) -> dict:
    return {"principal": b.principal, "host": b.host, "operation": b.operation,
            "permission_type": b.permission}


def handle_describe_acls(ctx, request):
    refused = _acl_refusal(ctx, acl.DESCRIBE)
    if refused:
        return request.response(error_code=refused[0], error_message=refused[1], resources=[])
    resources: dict = {}
    for b in ctx.broker.acls.find(_filter(request.body)):
        key = (b.resource_type, b.resource_name, b.pattern_type)
        resources.setdefault(key, []).append(_binding_fields(b))
    return request.response(error_code=ErrorCode.none, resources=[
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in resources.items()])


def handle_create_acls(ctx, request):
    refused = _acl_refusal(ctx, acl.ALTER)
    if refused:
        return request.error_response(*refused)
    results, good = [], []
    for c in request.body.creations:
        b = acl.Binding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                        c.host, c.operation, c.permission_type)
        try:
            b.check()
        except acl.AclError as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
            continue
        good.append(b)
        results.append({"error_code": ErrorCode.none})
    ctx.broker.acls.add(good)
    log.info("%s created ACLs %s", authorize.principal(ctx), good)
    return request.response(results=results)


def handle_delete_acls(ctx, request):
    refused = _acl_refusal(ctx, acl.ALTER)
    if refused:
        return request.error_response(*refused)
    out = []
    for f in request.body.filters:
        gone = ctx.broker.acls.delete(_filter(f))
        out.append({"error_code": ErrorCode.none, "matching_acls": [
            {"error_code": ErrorCode.none, "resource_type": b.resource_type,
             "resource_name": b.resource_name, "pattern_type": b.pattern_type,
             **_binding_fields(b)} for b in gone]})
    return request.response(filter_results=out)


def handle_describe_scram(ctx, request):
    if not authorize.cluster(ctx, acl.DESCRIBE):
        return request.error_response(ErrorCode.cluster_authorization_failed,
                                      "cluster authorization failed")
    users = ctx.broker.users.users()
    asked = None if request.body.users is None else [u.name for u in request.body.users]
    results = []
    for name in (sorted(users) if asked is None else dict.fromkeys(asked)):
        entry = {"user": name, "error_code": ErrorCode.none, "credential_infos": []}
        if asked is not None and asked.count(name) > 1:
            entry.update(error_code=ErrorCode.duplicate_resource,
                         error_message=f"user {name!r} asked for more than once")
        elif name not in users:
            entry.update(error_code=ErrorCode.resource_not_found,
                         error_message=f"attempt to describe a user credential that does not exist: {name}")
        else:
            entry["credential_infos"] = [
                {"mechanism": MECHANISM_CODES[m], "iterations": c["iterations"]}
                for m, c in sorted(users[name].items())]
        results.append(entry)
    return request.response(error_code=ErrorCode.none, results=results)


def handle_alter_scram(ctx, request):
    body, store = request.body, ctx.broker.users
    names = [d.name for d in body.deletions] + [u.name for u in body.upsertions]
    if not authorize.cluster(ctx, acl.ALTER):
        return request.error_response(ErrorCode.cluster_authorization_failed,
                                      "cluster authorization failed")
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for n in names:
        if names.count(n) > 1:
            errors[n] = (ErrorCode.duplicate_resource, "a user may be altered once per request")
        elif not n:
            errors[n] = (ErrorCode.unacceptable_credential, "empty user name")
    for d in body.deletions:
        mech = MECHANISM_NAMES.get(d.mechanism)
        if d.name in errors:
            continue
        if mech is None:
            errors[d.name] = (ErrorCode.unsupported_sasl_mechanism, f"unknown mechanism {d.mechanism}")
        elif not store.delete(d.name, mech):
            errors[d.name] = (ErrorCode.resource_not_found,
                              f"attempt to delete a user credential that does not exist: {d.name}")
    for u in body.upsertions:
        mech = MECHANISM_NAMES.get(u.mechanism)
        if u.name in errors:
            continue
        if mech is None or mech not in HASHES:
            errors[u.name] = (ErrorCode.unsupported_sasl_mechanism, f"unknown mechanism {u.mechanism}")
        elif not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            errors[u.name] = (ErrorCode.unacceptable_credential,
                              f"iterations {u.iterations}: expected {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        elif not u.salt or not u.salted_password:
            errors[u.name] = (ErrorCode.unacceptable_credential, "empty salt or salted password")
        else:
            store.set(u.name, mech, salted_credential(mech, u.salted_password, u.salt, u.iterations))
    return request.response(results=[
        {"user": n, "error_code": errors.get(n, (ErrorCode.none, None))[0],
         "error_message": errors.get(n, (None, None))[1]} for n in dict.fromkeys(names)])


def _quota_component_matches(entity: dict, c) -> bool:
    if c.entity_type not in entity:
        return False
    name = entity[c.entity_type]
    return (name == c.match) if c.match_type == 0 else (name is None) if c.match_type == 1 else (
        name is not None)


def handle_describe_quotas(ctx, request):
    if not authorize.cluster(ctx, acl.DESCRIBE_CONFIGS):
        return request.error_response(ErrorCode.cluster_authorization_failed,
                                      "cluster authorization failed")
    body, out = request.body, []
    for e in ctx.broker.quotas.entries():
        entity = e["entity"]
        if not all(_quota_component_matches(entity, c) for c in body.components):
            continue
        if body.strict and set(entity) != {c.entity_type for c in body.components}:
            continue
        out.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in sorted(entity.items())],
                    "values": [{"key": k, "value": v} for k, v in sorted(e["values"].items())]})
    return request.response(error_code=ErrorCode.none, entries=out)


def handle_alter_quotas(ctx, request):
    if not authorize.cluster(ctx, acl.ALTER_CONFIGS):
        return request.error_response(ErrorCode.cluster_authorization_failed,
                                      "cluster authorization failed")
    out = []
    for entry in request.body.entries:
        entity = {e.entity_type: e.entity_name for e in entry.entity}
        result = {"error_code": ErrorCode.none, "entity": [
            {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
        ops = [(op.key, float(op.value), op.remove) for op in entry.ops]
        try:
            if len(entity) != len(entry.entity):
                raise ValueError("an entity type named twice")
            if request.body.validate_only:
                QuotaStore(None).alter(entity, ops)  # the same checks, nothing kept
            else:
                ctx.broker.quotas.alter(entity, ops)
        except ValueError as exc:
            result.update(error_code=ErrorCode.invalid_request, error_message=str(exc))
        out.append(result)
    return request.response(entries=out)


HANDLERS = {"SaslHandshake": handle_sasl_handshake, "SaslAuthenticate": handle_sasl_authenticate,
            "DescribeAcls": handle_describe_acls, "CreateAcls": handle_create_acls,
            "DeleteAcls": handle_delete_acls, "DescribeUserScramCredentials": handle_describe_scram,
            "AlterUserScramCredentials": handle_alter_scram,
            "DescribeClientQuotas": handle_describe_quotas,
            "AlterClientQuotas": handle_alter_quotas}
