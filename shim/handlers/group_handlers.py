"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups.

Thin translations onto `shim.group_coordinator.Coordinator`; this broker coordinates every group.
JoinGroup and SyncGroup are coroutines that stay parked until the rebalance completes.
"""

from __future__ import annotations

from shim.group_coordinator import GroupError
from shim.handlers.cluster import authorized_operations, broker_entry
from shim.protocol import ErrorCode, group_apis
from shim.security import acl, authorize


def handle_find_coordinator(ctx, request):
    # Groups and transactional ids alike: this broker coordinates them all.
    key_type, keys = group_apis.coordinator_keys(request)
    c = ctx.broker.config
    at = broker_entry(ctx)  # the listener this client came in on
    answers = [{"key": k, "node_id": c.node_id, "host": at["host"], "port": at["port"],
                "error_code": ErrorCode.none} for k in keys]
    for a in answers:
        if not (authorize.group(ctx, acl.DESCRIBE, a["key"]) if key_type != group_apis.TRANSACTION_KEY
                else authorize.transactional_id(ctx, acl.DESCRIBE, a["key"])):
            a.update(node_id=-1, host="", port=-1, error_message=None, error_code=(
                ErrorCode.group_authorization_failed if key_type != group_apis.TRANSACTION_KEY
                else ErrorCode.transactional_id_authorization_failed))
    return group_apis.coordinator_response(request, answers)


async def handle_join_group(ctx, request):
    b = request.body
    consumer = ctx.broker.consumer_groups.groups.get(b.group_id)
    if consumer is not None and consumer.members:  # members of the KIP-848 protocol
        return request.response(error_code=ErrorCode.inconsistent_group_protocol, generation_id=-1,
                                member_id=b.member_id, leader="", protocol_name="")
    rebalance_ms = int(getattr(b, "rebalance_timeout", b.session_timeout).total_seconds() * 1000)
    session_ms = int(b.session_timeout.total_seconds() * 1000)
    try:
        answer = await ctx.broker.coordinator.join(
            b.group_id, b.member_id, getattr(b, "group_instance_id", None), b.protocol_type,
            [(p.name, p.metadata) for p in b.protocols], session_ms,
            rebalance_ms if rebalance_ms > 0 else session_ms, request.client_id or "",
            ctx.client_host, require_id=request.api_version >= 4,
            owner=(authorize.principal(ctx), ctx.connection))
    except GroupError as exc:
        return request.response(error_code=ErrorCode[exc.code_name], generation_id=-1,
                                member_id=b.member_id, leader="", protocol_name="")
    if "error" in answer:
        return request.response(error_code=ErrorCode[answer["error"]], generation_id=-1,
                                member_id=answer["member_id"], leader="", protocol_name="")
    return request.response(error_code=ErrorCode.none, **answer)


async def handle_sync_group(ctx, request):
    b = request.body
    try:
        answer = await ctx.broker.coordinator.sync(
            b.group_id, b.member_id, b.generation_id,
            {a.member_id: a.assignment for a in b.assignments},
            getattr(b, "group_instance_id", None))
    except GroupError as exc:
        return request.response(error_code=ErrorCode[exc.code_name], assignment=b"")
    return request.response(error_code=ErrorCode.none, **answer)


def handle_heartbeat(ctx, request):
    b = request.body
    try:
        ctx.broker.coordinator.heartbeat(b.group_id, b.member_id, b.generation_id,
                                         getattr(b, "group_instance_id", None))
    except GroupError as exc:
        return request.response(error_code=ErrorCode[exc.code_name])
    return request.response(error_code=ErrorCode.none)


def handle_leave_group(ctx, request):
    results, top = [], ErrorCode.none
    for member_id, instance_id in group_apis.leaving_members(request):
        code = ErrorCode.none
        try:
            ctx.broker.coordinator.leave(request.body.group_id, member_id, instance_id)
        except GroupError as exc:
            code = ErrorCode[exc.code_name]
        if request.api_version < 3:
            top = code
        results.append({"member_id": member_id, "group_instance_id": instance_id,
                        "error_code": code})
    return request.response(error_code=top, members=results)


def handle_describe_groups(ctx, request):
    out = []
    ops = authorized_operations("group", getattr(request.body, "include_authorized_operations",
                                                 False))
    for gid in request.body.groups:
        g = ctx.broker.coordinator.groups.get(gid)
        if not authorize.group(ctx, acl.DESCRIBE, gid):
            out.append({"group_id": gid, "error_code": ErrorCode.group_authorization_failed,
                        "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                        "authorized_operations": ops})
            continue
        if g is None and gid in ctx.broker.consumer_groups.groups:
            # As Kafka: a KIP-848 group is described by ConsumerGroupDescribe.
            out.append({"group_id": gid, "group_state": "Dead", "protocol_type": "",
                        "protocol_data": "", "members": [], "authorized_operations": ops,
                        "error_code": (ErrorCode.group_id_not_found if request.api_version >= 6
                                       else ErrorCode.none),
                        "error_message": f"Group {gid} is not a classic group."})
            continue
        if g is None:
            # A group known only by its committed offsets (after a restart, or committed by
            # the admin client) is Empty, as Kafka loads it; kafka-consumer-groups
            # --describe says "does not exist" for a Dead one and shows no offsets.
            # An unknown group is Dead; from v6 (KIP-1043) also GROUP_ID_NOT_FOUND, as Kafka.
            state = "Empty" if gid in ctx.broker.offsets else "Dead"
            missing = state == "Dead" and request.api_version >= 6
            out.append({"group_id": gid, "group_state": state,
                        "error_code": ErrorCode.group_id_not_found if missing else ErrorCode.none,
                        "error_message": f"Group {gid} not found." if missing else None,
                        "protocol_type": "consumer" if state == "Empty" else "",
                        "protocol_data": "", "members": [], "authorized_operations": ops})
            continue
        out.append({"group_id": gid, "error_code": ErrorCode.none, "group_state": g.state,
                    "protocol_type": g.protocol_type, "protocol_data": g.protocol,
                    "authorized_operations": ops,
                    "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                                 "client_id": m.client_id, "client_host": m.client_host,
                                 "member_metadata": m.metadata(g.protocol),
                                 "member_assignment": m.assignment}
                                for m in g.members.values()]})
    return request.response(groups=out)


def handle_list_groups(ctx, request):
    states = set(getattr(request.body, "states_filter", ()) or ())
    types = {t.lower() for t in (getattr(request.body, "types_filter", ()) or ())}
    out = [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
            "group_type": "classic"}
           for g in ctx.broker.coordinator.groups.values()
           if (not states or g.state in states) and (not types or "classic" in types)]
    out += [{"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state,
             "group_type": "consumer"}
            for g in ctx.broker.consumer_groups.groups.values()
            if (not states or g.state in states) and (not types or "consumer" in types)]
    # Groups known only from committed offsets are listed too, as Kafka does.
    known = {g["group_id"] for g in out}
    for gid in ctx.broker.offsets:
        if gid not in known and (not states or "Empty" in states):
            out.append({"group_id": gid, "protocol_type": "consumer", "group_state": "Empty",
                        "group_type": "classic"})
    if not authorize.cluster(ctx, acl.DESCRIBE):  # as Kafka: only the groups it may describe
        out = [g for g in out if authorize.group(ctx, acl.DESCRIBE, g["group_id"])]
    return request.response(error_code=ErrorCode.none, groups=out)


def handle_delete_groups(ctx, request):
    """As Kafka: a group with members is NON_EMPTY_GROUP; one known neither by members nor
    by committed offsets GROUP_ID_NOT_FOUND; otherwise it and its offsets are gone."""
    broker, out = ctx.broker, []
    for gid in request.body.groups_names:
        code = ErrorCode.none
        if not authorize.group(ctx, acl.DELETE, gid):  # as Kafka: before anything else
            code = ErrorCode.group_authorization_failed
        elif not gid:
            code = ErrorCode.invalid_group_id
        elif (gid not in broker.coordinator.groups and gid not in broker.offsets
              and gid not in broker.consumer_groups.groups):
            code = ErrorCode.group_id_not_found
        else:
            try:
                broker.coordinator.delete(gid)
                broker.consumer_groups.delete(gid)
                broker.offsets.pop(gid, None)
            except GroupError as exc:
                code = ErrorCode[exc.code_name]
        out.append({"group_id": gid, "error_code": code})
    broker.save_offsets()
    return request.response(results=out)


HANDLERS = {"DeleteGroups": handle_delete_groups, "FindCoordinator": handle_find_coordinator, "JoinGroup": handle_join_group,
            "SyncGroup": handle_sync_group, "Heartbeat": handle_heartbeat,
            "LeaveGroup": handle_leave_group, "DescribeGroups": handle_describe_groups,
            "ListGroups": handle_list_groups}
