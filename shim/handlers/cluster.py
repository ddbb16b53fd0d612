"""ApiVersions, Metadata (auto-creating topics), DescribeCluster.

One broker: every partition's leader, every replica set and the controller is this node,
advertised at the address it listens on. Views appear as ordinary topics with their
source's partition count.
"""

from __future__ import annotations

from shim.protocol import ErrorCode, api_versions, metadata
from shim.security import acl, authorize
from shim.topics import legal_topic_name

# Asked for authorized operations (Metadata v8+, DescribeGroups v3+, DescribeCluster), a
# Kafka broker without an authorizer answers every operation the resource type supports
# (AclEntry.supportedOperations) as a bit field of AclOperation codes; not asked, INT32_MIN.
# confluent-kafka's describe_* tests expect a non-empty list.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
OPERATIONS = {
    "topic": (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    "group": (READ, DESCRIBE, DELETE),
    "cluster": (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
                DESCRIBE),
}
NOT_ASKED = -(1 << 31)


def authorized_operations(resource: str, asked, ctx=None, name: str = acl.CLUSTER_NAME) -> int:
    """With an authorizer (and `ctx`), what this connection may do on the named resource."""
    if not asked:
        return NOT_ASKED
    if ctx is not None and ctx.broker.authorizer is not None:
        return authorize.operations(ctx, {"topic": acl.TOPIC, "group": acl.GROUP,
                                          "cluster": acl.CLUSTER}[resource], name)
    return sum(1 << op for op in OPERATIONS[resource])


def broker_entry(ctx) -> dict:
    c = ctx.broker.config
    # The listener the client came in on: a SASL_SSL client is never sent to PLAINTEXT.
    at = ctx.session.listener if ctx.session is not None else c
    return {"node_id": c.node_id, "broker_id": c.node_id, "host": at.host, "port": at.port,
            "rack": None}


def topic_entry(ctx, topic, operations: int = NOT_ASKED) -> dict:
    node = ctx.broker.config.node_id
    n = ctx.broker.catalog.partitions_of(topic)
    return {"name": topic.name, "topic_id": topic.topic_id, "is_internal": False,
            "error_code": ErrorCode.none, "topic_authorized_operations": operations,
            "partitions": [{"partition_index": p, "leader_id": node, "leader_epoch": 0,
                            "replica_nodes": [node], "isr_nodes": [node], "offline_replicas": []}
                           for p in range(n)]}


def handle_metadata(ctx, request):
    catalog, body = ctx.broker.catalog, request.body
    want_ops = getattr(body, "include_topic_authorized_operations", False)

    def ops(t):
        return authorized_operations("topic", want_ops, ctx, t.name)
    asked = metadata.requested_topics(request)
    if asked is None:  # every topic this principal may describe, as Kafka lists them
        topics = [topic_entry(ctx, t, ops(t)) for t in catalog
                  if authorize.topic(ctx, acl.DESCRIBE, t.name)]
    else:
        topics = []
        for name, tid in asked:
            t = catalog.get(name) if name else catalog.by_id(tid)
            if not authorize.topic_ref(ctx, acl.DESCRIBE, t, {"name": name}):
                topics.append({"name": name if t is None else t.name, "topic_id": tid,
                               "error_code": ErrorCode.topic_authorization_failed, "partitions": []})
                continue
            if (t is None and name and metadata.allows_auto_creation(request)
                    and authorize.may_create_topic(ctx, name)):
                t = ctx.broker.auto_create(name)
            if t is None:
                code = ErrorCode.unknown_topic_or_partition if name else ErrorCode.unknown_topic_id
                if (name and metadata.allows_auto_creation(request) and ctx.broker.config.auto_create
                        and not legal_topic_name(name)):
                    code = ErrorCode.invalid_topic_exception  # as Kafka: it cannot be created
                topics.append({"name": name, "topic_id": tid, "error_code": code, "partitions": []})
            else:
                topics.append(topic_entry(ctx, t, ops(t)))
    c = ctx.broker.config
    cluster_ops = authorized_operations(
        "cluster", getattr(body, "include_cluster_authorized_operations", False), ctx)
    return request.response(brokers=[broker_entry(ctx)], cluster_id=c.cluster_id,
                            controller_id=c.node_id, topics=topics,
                            cluster_authorized_operations=cluster_ops)


def handle_api_versions(ctx, request):
    return api_versions.response(request)


def handle_describe_cluster(ctx, request):
    c = ctx.broker.config
    return request.response(cluster_id=c.cluster_id, controller_id=c.node_id,
                            brokers=[broker_entry(ctx)],
                            endpoint_type=getattr(request.body, "endpoint_type", 1),
                            cluster_authorized_operations=authorized_operations(
                                "cluster", request.body.include_cluster_authorized_operations, ctx))


HANDLERS = {"ApiVersions": handle_api_versions, "Metadata": handle_metadata,
            "DescribeCluster": handle_describe_cluster}
