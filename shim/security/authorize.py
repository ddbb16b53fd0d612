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
