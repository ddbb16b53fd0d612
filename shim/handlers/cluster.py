"""ApiVersions, Metadata (auto-creating topics), DescribeCluster.

One broker: every partition's leader, every replica set and the controller is this node,
advertised at the address it listens on. Views appear as ordinary topics with their
source's partition count.
"""

from __future__ import annotations

from shim.protocol import ErrorCode, api_versions, metadata


def broker_entry(ctx) -> dict:
    c = ctx.broker.config
    return {"node_id": c.node_id, "broker_id": c.node_id, "host": c.host, "port": c.port,
            "rack": None}


def topic_entry(ctx, topic) -> dict:
    node = ctx.broker.config.node_id
    n = ctx.broker.catalog.partitions_of(topic)
    return {"name": topic.name, "topic_id": topic.topic_id, "is_internal": False,
            "error_code": ErrorCode.none,
            "partitions": [{"partition_index": p, "leader_id": node, "leader_epoch": 0,
                            "replica_nodes": [node], "isr_nodes": [node], "offline_replicas": []}
                           for p in range(n)]}


def handle_metadata(ctx, request):
    catalog = ctx.broker.catalog
    asked = metadata.requested_topics(request)
    if asked is None:
        topics = [topic_entry(ctx, t) for t in catalog]
    else:
        topics = []
        for name, tid in asked:
            t = catalog.get(name) if name else catalog.by_id(tid)
            if t is None and name and metadata.allows_auto_creation(request):
                t = ctx.broker.auto_create(name)
            if t is None:
                code = ErrorCode.unknown_topic_or_partition if name else ErrorCode.unknown_topic_id
                topics.append({"name": name, "topic_id": tid, "error_code": code, "partitions": []})
            else:
                topics.append(topic_entry(ctx, t))
    c = ctx.broker.config
    return request.response(brokers=[broker_entry(ctx)], cluster_id=c.cluster_id,
                            controller_id=c.node_id, topics=topics)


def handle_api_versions(ctx, request):
    return api_versions.response(request)


def handle_describe_cluster(ctx, request):
    c = ctx.broker.config
    return request.response(cluster_id=c.cluster_id, controller_id=c.node_id,
                            brokers=[broker_entry(ctx)],
                            endpoint_type=getattr(request.body, "endpoint_type", 1))


HANDLERS = {"ApiVersions": handle_api_versions, "Metadata": handle_metadata,
            "DescribeCluster": handle_describe_cluster}
