"""The one question every handler asks: may this connection do `operation` on a resource?

Handlers call `allowed(ctx, operation, resource_type, name)` (or the `topic`, `group`,
`cluster` shorthands) with the codes of `shim.security.acl`; without an authorizer
(`camus serve` without `--authorizer`) every answer is yes, as on a Kafka broker without
`authorizer.class.name`. `ctx` is a handler context: `ctx.broker.authorizer`,
`ctx.session.principal` and `ctx.client_host`.

What each API checks, and the error it answers, follows Kafka's KafkaApis; the table is
in docs/security.md.
"""

from __future__ import annotations

from shim.protocol import ErrorCode

from . import acl

ANONYMOUS = "User:ANONYMOUS"


def principal(ctx) -> str:
    session = getattr(ctx, "session", None)
    return session.principal if session is not None else ANONYMOUS


def allowed(ctx, operation: int, resource_type: int, name: str) -> bool:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.allows(principal(ctx), ctx.client_host, operation, resource_type, name)


def topic(ctx, operation: int, name: str) -> bool:
    return allowed(ctx, operation, acl.TOPIC, name)


def group(ctx, operation: int, name: str) -> bool:
    return allowed(ctx, operation, acl.GROUP, name)


def cluster(ctx, operation: int) -> bool:
    return allowed(ctx, operation, acl.CLUSTER, acl.CLUSTER_NAME)


def transactional_id(ctx, operation: int, name: str) -> bool:
    return allowed(ctx, operation, acl.TRANSACTIONAL_ID, name)


def may_create_topic(ctx, name: str) -> bool:
    """Kafka: CREATE on the cluster, or on the topic itself."""
    return cluster(ctx, acl.CREATE) or topic(ctx, acl.CREATE, name)


def may_write_idempotently(ctx) -> bool:
    """Kafka 3+: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679)."""
    if cluster(ctx, acl.IDEMPOTENT_WRITE) or ctx.broker.authorizer is None:
        return True
    return any(topic(ctx, acl.WRITE, t.name) for t in ctx.broker.catalog)


def operations(ctx, resource_type: int, name: str) -> int:
    """The bit field of AclOperation codes this connection may perform on the resource
    (Metadata's topic/cluster_authorized_operations, DescribeGroups', DescribeCluster's)."""
    return sum(1 << op for op in acl.SUPPORTED[resource_type]
               if allowed(ctx, op, resource_type, name))


def topic_ref(ctx, operation: int, topic, ref: dict) -> bool:
    """For per-partition checks: the topic by its name, or by the name the client sent when
    it does not exist (Kafka refuses an unauthorized name whether or not it exists). An
    unknown topic id has no name to check; its own error follows."""
    name = topic.name if topic is not None else ref.get("name")
    return not name or allowed(ctx, operation, acl.TOPIC, name)


# Requests that are about one group (or one transactional id) as a whole: refused before
# their handler runs, with the API's own error shape (every item echoed with the error).
# API name -> (resource type, operation, the resource's name in the body or None to skip,
# the error). Other handlers check per item (topics, partitions, groups in a list).
WHOLE_REQUEST = {
    "JoinGroup": (acl.GROUP, acl.READ, lambda r: r.body.group_id, ErrorCode.group_authorization_failed),
    "SyncGroup": (acl.GROUP, acl.READ, lambda r: r.body.group_id, ErrorCode.group_authorization_failed),
    "Heartbeat": (acl.GROUP, acl.READ, lambda r: r.body.group_id, ErrorCode.group_authorization_failed),
    "LeaveGroup": (acl.GROUP, acl.READ, lambda r: r.body.group_id, ErrorCode.group_authorization_failed),
    "OffsetCommit": (acl.GROUP, acl.READ, lambda r: r.body.group_id, ErrorCode.group_authorization_failed),
    "OffsetFetch": (acl.GROUP, acl.DESCRIBE, lambda r: r.body.group_id if r.api_version < 8 else None,
                    ErrorCode.group_authorization_failed),
    "OffsetDelete": (acl.GROUP, acl.DELETE, lambda r: r.body.group_id, ErrorCode.group_authorization_failed),
    "ConsumerGroupHeartbeat": (acl.GROUP, acl.READ, lambda r: r.body.group_id,
                               ErrorCode.group_authorization_failed),
}


def refused(ctx, request) -> tuple[ErrorCode, str] | None:
    """(error, message) when the whole request is refused (WHOLE_REQUEST), else None."""
    rule = WHOLE_REQUEST.get(request.api.name)
    if rule is None or ctx.broker.authorizer is None:
        return None
    resource_type, operation, name_of, error = rule
    name = name_of(request)
    if name is None or allowed(ctx, operation, resource_type, name):
        return None
    return error, f"{acl.RESOURCE_NAMES[resource_type]} authorization failed"
