"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs.

A view is created like any topic, with configs `camus.source` and `camus.filter`; the
catalog checks the filter against the source's schema before anything exists, so a bad
filter fails this call with the parser's line/column in error_message (INVALID_CONFIG).
Replication factors other than 1 (or -1, "the default") are refused: there is one broker;
manual replica assignments are accepted when each names that broker alone. A view is answered
once its entries are on the switch and it holds its source's records, within the request's
timeout: a view whose filter does not compile, or not in time, is deleted again and its
answer says why (POLICY_VIOLATION, REQUEST_TIMED_OUT).
"""

from __future__ import annotations

import asyncio

from shim.protocol import ErrorCode
from shim.protocol.admin import BROKER_RESOURCE, TOPIC_RESOURCE
from shim.limits import MAX_PARTITIONS_PER_REQUEST
from shim.security import acl, authorize
from shim.topics import BROKER_DEFAULTS, DEFAULTS, SOURCE, TopicError

DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT_CONFIG = 1, 4, 5  # DescribeConfigs config_source values
# DescribeConfigs v3+ config_type values, and the types of the configs described here, as
# Kafka's ConfigDef declares them (kafka-python's suite checks retention.bytes is LONG).
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7
# How long CreateTopics waits for a view's entries when the request sets no timeout: less
# than librdkafka's and Java's default request timeouts (60 s, 30 s).
VIEW_WAIT = 25.0
CONFIG_TYPES = {"cleanup.policy": LIST, "retention.ms": LONG, "retention.bytes": LONG,
                "segment.bytes": INT, "max.message.bytes": INT, "broker.id": INT, "node.id": INT,
                "num.partitions": INT, "auto.create.topics.enable": BOOLEAN,
                "listeners": LIST, "advertised.listeners": LIST}


def _code(exc: TopicError) -> ErrorCode:
    return ErrorCode[exc.code_name]


def _config(name: str, value: str, source: int, read_only: bool) -> dict:
    return {"name": name, "value": value, "read_only": read_only, "config_source": source,
            "is_sensitive": False, "synonyms": [], "config_type": CONFIG_TYPES.get(name, STRING)}


def topic_configs(topic, keys: set[str] | None = None) -> list[dict]:
    """A topic's configs as DescribeConfigs and CreateTopics (v5+) describe them."""
    return [_config(k, topic.config(k), DYNAMIC_TOPIC if k in topic.configs else DEFAULT_CONFIG,
                    False)
            for k in sorted(set(topic.defaults) | set(topic.configs)) if keys is None or k in keys]


def broker_configs(c, keys: set[str] | None = None) -> list[dict]:
    """The broker's configs: what `camus serve` was started with is static, the rest default."""
    listener = ",".join(map(str, c.security.listeners)) or f"PLAINTEXT://{c.host}:{c.port}"
    static = {"broker.id": str(c.node_id), "node.id": str(c.node_id), "listeners": listener,
              "advertised.listeners": listener, "log.dirs": str(c.data_dir or "")}
    default = {"num.partitions": str(c.default_partitions),
               "auto.create.topics.enable": str(c.auto_create).lower()}
    static.update(c.limits.describe())
    for name, topic_name in BROKER_DEFAULTS.items():
        (static if topic_name in c.topic_defaults else default)[name] = c.topic_defaults.get(
            topic_name, DEFAULTS[topic_name])
    return [_config(k, v, source, True)
            for source, values in ((STATIC_BROKER, static), (DEFAULT_CONFIG, default))
            for k, v in values.items() if keys is None or k in keys]


def _check_create(ctx, name: str, configs: dict[str, str]) -> None:
    """CREATE on the cluster or the topic, as Kafka; a view also needs READ on its source,
    or creating one would read a topic its creator may not."""
    if not authorize.may_create_topic(ctx, name):
        raise TopicError("topic authorization failed", "topic_authorization_failed")
    source = configs.get(SOURCE)
    if source is not None and not authorize.topic(ctx, acl.READ, source):
        raise TopicError(f"a view of {source!r} needs READ on it", "topic_authorization_failed")


def _check_assignments(assignments: list[list[int]], node_id: int) -> None:
    """Manual replica assignments are fine when every partition names this broker alone."""
    for i, brokers in enumerate(assignments):
        if list(brokers) != [node_id]:
            raise TopicError(f"partition {i}: replicas {list(brokers)}; this cluster is the one "
                             f"broker {node_id}, so each assignment must be [{node_id}]",
                             "invalid_replica_assignment")


def _too_many_partitions(counts) -> str | None:
    """Why a request asking for these partition counts is refused, as Kafka's controller
    refuses more than MAX_PARTITIONS_PER_REQUEST in one request, or None."""
    total = sum(max(n, 0) for n in counts)
    if total > MAX_PARTITIONS_PER_REQUEST:
        return (f"this request asks for {total} partitions; at most "
                f"{MAX_PARTITIONS_PER_REQUEST} can be made in one request")
    return None


async def handle_create_topics(ctx, request):
    broker, results = ctx.broker, []
    too_many = _too_many_partitions(
        t.num_partitions if t.num_partitions != -1 else (len(t.assignments) or
                                                         broker.config.default_partitions)
        for t in request.body.topics)
    if too_many:
        return request.response(topics=[
            {"name": t.name, "num_partitions": -1, "replication_factor": -1,
             "error_code": ErrorCode.policy_violation, "error_message": too_many}
            for t in request.body.topics])
    # The request's timeout bounds the wait for views, less a tenth (at most a second) for
    # the answer to reach a client whose own timeout is the same (`camus topic create`);
    # with none (0: "do not wait", which a view cannot honour), VIEW_WAIT.
    loop = asyncio.get_running_loop()
    wait = request.body.timeout.total_seconds()
    deadline = loop.time() + (wait - min(1.0, wait / 10) if wait > 0 else VIEW_WAIT)
    for t in request.body.topics:
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        entry = {"name": t.name, "num_partitions": -1, "replication_factor": -1}
        try:
            _check_create(ctx, t.name, configs)
            parts = t.num_partitions if t.num_partitions != -1 else broker.config.default_partitions
            if t.assignments:
                # As Kafka: assignments replace num_partitions and replication_factor.
                if t.num_partitions != -1 or t.replication_factor != -1:
                    raise TopicError("both num_partitions or replication_factor and manual "
                                     "assignments were set", "invalid_request")
                ordered = sorted(t.assignments, key=lambda a: a.partition_index)
                if [a.partition_index for a in ordered] != list(range(len(ordered))):
                    raise TopicError("assigned partitions must be 0..n-1",
                                     "invalid_replica_assignment")
                _check_assignments([a.broker_ids for a in ordered], broker.config.node_id)
                parts = len(ordered)
            elif t.replication_factor not in (-1, 1):
                raise TopicError(f"replication factor {t.replication_factor}: there is one "
                                 "broker", "invalid_replication_factor")
            topic = broker.create_topic(t.name, parts, configs,
                                        validate_only=request.body.validate_only,
                                        partitions_given=t.num_partitions != -1 or bool(t.assignments))
            if topic.is_view and not request.body.validate_only:
                # Answered once the view holds its source's records: its entries compile
                # on a worker meanwhile, and every other request goes on being served. If
                # they fail to, or take longer than the request may wait, the view goes
                # and the answer says why: a client never waits on a view it cannot see
                # answered, nor finds one it was told failed.
                try:
                    await broker.view_ready(topic.name, max(0.0, deadline - loop.time()))
                except TopicError as exc:
                    broker.delete_topic(topic)
                    raise TopicError(f"{exc}; the view was not created", exc.code_name) from None
            entry.update(topic_id=topic.topic_id, num_partitions=topic.partitions,
                         replication_factor=1, error_code=ErrorCode.none,
                         configs=topic_configs(topic))
            if not authorize.topic(ctx, acl.DESCRIBE_CONFIGS, t.name):  # as Kafka: no configs
                entry.update(configs=[], topic_config_error_code=ErrorCode.topic_authorization_failed)
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
        if not authorize.topic_ref(ctx, acl.DELETE, topic, {"name": name}):
            entry["error_code"] = ErrorCode.topic_authorization_failed
        elif topic is None:
            entry["error_code"] = (ErrorCode.unknown_topic_or_partition if name
                                   else ErrorCode.unknown_topic_id)
        else:
            entry.update(name=topic.name, topic_id=topic.topic_id)
            try:
                broker.delete_topic(topic)
            except TopicError as exc:
                entry.update(error_code=_code(exc), error_message=str(exc))
                if not all(authorize.topic(ctx, acl.DESCRIBE, v.name)
                           for v in broker.catalog.views_of(topic.name)):
                    entry["error_message"] = "the topic is the source of views; delete them first"

        out.append(entry)
    return request.response(responses=out)


def handle_create_partitions(ctx, request):
    broker, out = ctx.broker, []
    too_many = _too_many_partitions(
        t.count - (broker.catalog.get(t.name).partitions if broker.catalog.get(t.name) else 0)
        for t in request.body.topics)
    if too_many:
        return request.response(results=[
            {"name": t.name, "error_code": ErrorCode.invalid_partitions, "error_message": too_many}
            for t in request.body.topics])
    for t in request.body.topics:
        entry = {"name": t.name, "error_code": ErrorCode.none}
        topic = broker.catalog.get(t.name)
        try:
            if not authorize.topic(ctx, acl.ALTER, t.name):
                raise TopicError("topic authorization failed", "topic_authorization_failed")
            if topic is None:
                raise TopicError(f"no topic {t.name!r}", "unknown_topic_or_partition")
            if t.assignments:
                if len(t.assignments) != t.count - topic.partitions:
                    raise TopicError(f"increasing the number of partitions by "
                                     f"{t.count - topic.partitions} but {len(t.assignments)} "
                                     "assignments provided", "invalid_replica_assignment")
                _check_assignments([a.broker_ids for a in t.assignments], broker.config.node_id)
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
            if not authorize.topic(ctx, acl.DESCRIBE_CONFIGS, r.resource_name):  # a view's filter too
                entry.update(error_code=ErrorCode.topic_authorization_failed,
                             error_message="topic authorization failed")
            elif topic is None:
                entry.update(error_code=ErrorCode.unknown_topic_or_partition,
                             error_message=f"no topic {r.resource_name!r}")
            else:
                counters = [_config(f"camus.stats.{k}", str(v), DEFAULT_CONFIG, True)
                            for k, v in sorted(broker.topic_counters(topic).items())]
                # A view with state: its instances, read from the switch's registers.
                counters += [_config(f"camus.state.{k}", v, DEFAULT_CONFIG, True)
                             for k, v in sorted(broker.view_state(topic).items())]
                entry["configs"] = topic_configs(topic, keys) + [
                    c for c in counters if keys is None or c["name"] in keys]
        elif r.resource_type == BROKER_RESOURCE and not authorize.cluster(ctx, acl.DESCRIBE_CONFIGS):
            entry.update(error_code=ErrorCode.cluster_authorization_failed,
                         error_message="cluster authorization failed")
        elif r.resource_type == BROKER_RESOURCE:
            entry["configs"] = broker_configs(broker.config, keys)
        else:
            entry.update(error_code=ErrorCode.invalid_request,
                         error_message=f"resource type {r.resource_type} is not described here")
        out.append(entry)
    return request.response(results=out)


HANDLERS = {"CreateTopics": handle_create_topics, "DeleteTopics": handle_delete_topics,
            "CreatePartitions": handle_create_partitions,
            "DescribeConfigs": handle_describe_configs}
