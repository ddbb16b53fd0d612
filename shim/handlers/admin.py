"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs.

A view is created like any topic, with configs `camus.source` and `camus.filter`; the
catalog checks the filter against the source's schema before anything exists, so a bad
filter fails this call with the parser's line/column in error_message (INVALID_CONFIG).
Replication factors other than 1 (or -1, "the default") are refused: there is one broker.
"""

from __future__ import annotations

from shim.protocol import ErrorCode
from shim.protocol.admin import BROKER_RESOURCE, TOPIC_RESOURCE
from shim.topics import DEFAULTS, TopicError

DYNAMIC_TOPIC, DEFAULT_CONFIG = 1, 5  # DescribeConfigs config_source values


def _code(exc: TopicError) -> ErrorCode:
    return ErrorCode[exc.code_name]


def topic_configs(topic, keys: set[str] | None = None) -> list[dict]:
    """A topic's configs as DescribeConfigs and CreateTopics (v5+) describe them."""
    return [{"name": k, "value": topic.config(k), "read_only": False,
             "config_source": DYNAMIC_TOPIC if k in topic.configs else DEFAULT_CONFIG,
             "is_sensitive": False, "synonyms": []}
            for k in sorted(set(DEFAULTS) | set(topic.configs)) if keys is None or k in keys]


def handle_create_topics(ctx, request):
    broker, results = ctx.broker, []
    for t in request.body.topics:
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        entry = {"name": t.name, "num_partitions": -1, "replication_factor": -1}
        try:
            if t.replication_factor not in (-1, 1) or t.assignments:
                raise TopicError("one broker: replication factor must be 1 and no manual "
                                 "assignments", "invalid_replication_factor")
            parts = t.num_partitions if t.num_partitions != -1 else broker.config.default_partitions
            topic = broker.create_topic(t.name, parts, configs,
                                        validate_only=request.body.validate_only)
            entry.update(topic_id=topic.topic_id, num_partitions=topic.partitions,
                         replication_factor=1, error_code=ErrorCode.none,
                         configs=topic_configs(topic))
        except TopicError as exc:
            entry.update(error_code=_code(exc), error_message=str(exc))
        results.append(entry)
    return request.response(topics=results)


def handle_delete_topics(ctx, request):
    broker, out = ctx.broker, []
    if request.api_version >= 6:
        items = [(t.name, t.topic_id) for t in request.body.topics]
    else:
        items = [(n, None) for n in request.body.topic_names]
    for name, tid in items:
        topic = broker.catalog.get(name) if name else broker.catalog.by_id(tid)
        entry = {"name": name, "topic_id": tid, "error_code": ErrorCode.none}
        if topic is None:
            entry["error_code"] = (ErrorCode.unknown_topic_or_partition if name
                                   else ErrorCode.unknown_topic_id)
        else:
            entry.update(name=topic.name, topic_id=topic.topic_id)
            try:
                broker.delete_topic(topic)
            except TopicError as exc:
                entry.update(error_code=_code(exc), error_message=str(exc))
        out.append(entry)
    return request.response(responses=out)


def handle_create_partitions(ctx, request):
    broker, out = ctx.broker, []
    for t in request.body.topics:
        entry = {"name": t.name, "error_code": ErrorCode.none}
        topic = broker.catalog.get(t.name)
        try:
            if topic is None:
                raise TopicError(f"no topic {t.name!r}", "unknown_topic_or_partition")
            if t.assignments:
                raise TopicError("one broker: no manual assignments", "invalid_replica_assignment")
            if request.body.validate_only:
                if t.count <= topic.partitions:
                    raise TopicError(f"topic has {topic.partitions} partitions", "invalid_partitions")
            else:
                broker.add_partitions(topic, t.count)
        except TopicError as exc:
            entry.update(error_code=_code(exc), error_message=str(exc))
        out.append(entry)
    return request.response(results=out)


def handle_describe_configs(ctx, request):
    broker, out = ctx.broker, []
    for r in request.body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys else None
        entry = {"resource_type": r.resource_type, "resource_name": r.resource_name,
                 "error_code": ErrorCode.none, "configs": []}
        if r.resource_type == TOPIC_RESOURCE:
            topic = broker.catalog.get(r.resource_name)
            if topic is None:
                entry.update(error_code=ErrorCode.unknown_topic_or_partition,
                             error_message=f"no topic {r.resource_name!r}")
            else:
                entry["configs"] = topic_configs(topic, keys)
        elif r.resource_type == BROKER_RESOURCE:
            c = broker.config
            values = {"broker.id": str(c.node_id), "num.partitions": str(c.default_partitions),
                      "auto.create.topics.enable": str(c.auto_create).lower(),
                      "log.dirs": str(c.data_dir or "")}
            entry["configs"] = [{"name": k, "value": v, "read_only": True,
                                 "config_source": DEFAULT_CONFIG, "is_sensitive": False,
                                 "synonyms": []}
                                for k, v in values.items() if keys is None or k in keys]
        else:
            entry.update(error_code=ErrorCode.invalid_request,
                         error_message=f"resource type {r.resource_type} is not described here")
        out.append(entry)
    return request.response(results=out)


HANDLERS = {"CreateTopics": handle_create_topics, "DeleteTopics": handle_delete_topics,
            "CreatePartitions": handle_create_partitions,
            "DescribeConfigs": handle_describe_configs}
