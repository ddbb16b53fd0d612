"""DeleteRecords, AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs, AlterReplicaLogDirs,
ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments, DescribeQuorum,
ListConfigResources, DescribeTopicPartitions.

One broker is the whole cluster: every partition has one replica, on this broker, in its one
log dir (the data dir, or memory), led by it; the broker is the KRaft quorum's only voter
and its leader. Where that makes an operation trivial the answer is the one Kafka gives such
a cluster: electing a leader is ELECTION_NOT_NEEDED, reassigning a partition to this broker
completes at once, no reassignment is ever in progress. Configs change in place: a topic's
retention applies to its logs at once, a view's new filter rebuilds the view from its source
(`Broker.alter_topic`), and both are checked exactly as CreateTopics checks them.
"""

from __future__ import annotations

import shutil
import time

from shim.handlers.cluster import authorized_operations, topic_entry
from shim.protocol import ErrorCode
from shim.protocol.cluster_admin import (APPEND, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, DELETE,
                                         GROUP_RESOURCE, METADATA_TOPIC, PREFERRED_ELECTION, SET,
                                         SUBTRACT, TOPIC_RESOURCE, UNCLEAN_ELECTION)
from shim.security import acl, authorize
from shim.topics import FILTER, SOURCE, TopicError

BROKER_LOGGER_RESOURCE = 8
LIST_CONFIGS = {"cleanup.policy"}  # topic configs of Kafka's LIST type (APPEND / SUBTRACT)
MAX_PARTITIONS_PER_PAGE = 2000  # Kafka's max.request.partition.size.limit default


def log_dir(broker) -> str:
    """The one log dir's name: the data dir, or where an in-memory broker keeps its logs."""
    return str(broker.config.data_dir.resolve()) if broker.config.data_dir else "memory"


# --- DeleteRecords ---------------------------------------------------------------------

def handle_delete_records(ctx, request):
    broker, topics = ctx.broker, []
    for t in request.body.topics:
        topic = broker.catalog.get(t.name)
        parts = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1,
                     "error_code": ErrorCode.none}
            lg = broker.log_for(topic, p.partition_index) if topic else None
            if not authorize.topic(ctx, acl.DELETE, t.name):  # before existence, as Kafka
                entry["error_code"] = ErrorCode.topic_authorization_failed
            elif lg is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif topic.is_view:
                # A view's records are its source's: its start follows the source's.
                entry["error_code"] = ErrorCode.policy_violation
            else:
                offset = lg.next_offset if p.offset == -1 else p.offset
                if not 0 <= offset <= lg.next_offset:
                    entry["error_code"] = ErrorCode.offset_out_of_range
                else:
                    entry["low_watermark"] = broker.delete_records(topic, p.partition_index, offset)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return request.response(topics=topics)


# --- AlterConfigs, IncrementalAlterConfigs -----------------------------------------------

def _incremental(topic, ops) -> dict[str, str]:
    """A topic's dynamic configs after IncrementalAlterConfigs' operations (TopicError)."""
    configs = dict(topic.configs)
    for op in ops:
        name, value = op.name, op.value
        if op.config_operation == SET:
            if value is None:
                raise TopicError(f"{name}: SET needs a value", "invalid_request")
            configs[name] = value
        elif op.config_operation == DELETE:
            configs.pop(name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if name not in LIST_CONFIGS:
                raise TopicError(f"{name} is not a list config: APPEND and SUBTRACT apply to "
                                 f"{', '.join(sorted(LIST_CONFIGS))}", "invalid_config")
            items = [v for v in topic.config(name).split(",") if v]
            change = [v for v in (value or "").split(",") if v]
            if op.config_operation == APPEND:
                items += [v for v in change if v not in items]
            else:
                items = [v for v in items if v not in change]
            configs[name] = ",".join(items)
        else:
            raise TopicError(f"unknown config operation {op.config_operation}", "invalid_request")
    return configs


def _may_alter_configs(ctx, resource_type: int, name: str) -> TopicError | None:
    """Kafka: ALTER_CONFIGS on the topic (or group); on the cluster for broker, broker
    logger and client-metrics resources. The refusal, or None."""
    if resource_type == TOPIC_RESOURCE:
        if not authorize.topic(ctx, acl.ALTER_CONFIGS, name):
            return TopicError(f"no ALTER_CONFIGS on topic {name!r}", "topic_authorization_failed")
    elif resource_type == GROUP_RESOURCE:
        if not authorize.group(ctx, acl.ALTER_CONFIGS, name):
            return TopicError(f"no ALTER_CONFIGS on group {name!r}", "group_authorization_failed")
    elif resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE):
        if not authorize.cluster(ctx, acl.ALTER_CONFIGS):
            return TopicError("no ALTER_CONFIGS on the cluster", "cluster_authorization_failed")
    return None


def _may_refilter(ctx, topic, configs: dict[str, str]) -> None:
    """A view's filter or source changed needs READ on its source (and on a new one named),
    as creating the view does: else ALTER_CONFIGS on one's own view would widen it to
    records one may not read."""
    changed = [k for k in (FILTER, SOURCE) if configs.get(k) != topic.configs.get(k)]
    if not changed or not (topic.is_view or SOURCE in configs):
        return
    for source in dict.fromkeys(s for s in (topic.source, configs.get(SOURCE)) if s):
        if not authorize.topic(ctx, acl.READ, source):
            raise TopicError(f"changing {' and '.join(changed)} of {topic.name!r} needs READ on "
                             f"its source {source!r}", "topic_authorization_failed")


async def _alter(ctx, request, incremental: bool):
    broker, out, rebuilt = ctx.broker, [], []
    named = [(r.resource_type, r.resource_name) for r in request.body.resources]
    for r in request.body.resources:
        entry = {"resource_type": r.resource_type, "resource_name": r.resource_name,
                 "error_code": ErrorCode.none, "error_message": None}
        out.append(entry)
        try:
            if named.count((r.resource_type, r.resource_name)) > 1:  # as Kafka: all refused
                raise TopicError(f"resource {r.resource_name!r} is named twice in one request",
                                 "invalid_request")
            if (refusal := _may_alter_configs(ctx, r.resource_type, r.resource_name)) is not None:
                raise refusal
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise TopicError("a config is named twice", "invalid_request")
            if r.resource_type == BROKER_RESOURCE:
                raise TopicError("camus's broker configs are fixed while it runs: set them in "
                                 f"camus serve --config (cannot update {', '.join(names)})",
                                 "invalid_request")
            if r.resource_type != TOPIC_RESOURCE:
                raise TopicError(f"resource type {r.resource_type} has no configs to alter here",
                                 "invalid_request")
            topic = broker.catalog.get(r.resource_name)
            if topic is None:
                raise TopicError(f"no topic {r.resource_name!r}", "unknown_topic_or_partition")
            if incremental:
                configs = _incremental(topic, r.configs)
            else:
                if any(c.value is None for c in r.configs):
                    raise TopicError("AlterConfigs cannot set a config to null", "invalid_request")
                configs = {c.name: c.value for c in r.configs}
            _may_refilter(ctx, topic, configs)
            if broker.alter_topic(topic, configs, validate_only=request.body.validate_only):
                rebuilt.append(topic.name)
        except TopicError as exc:
            entry.update(error_code=ErrorCode[exc.code_name], error_message=str(exc))
    for name in rebuilt:  # answered once each re-filtered view holds its source's records
        try:
            await broker.view_ready(name)
        except TopicError as exc:  # the new filter is kept; its compile is retried later
            for entry in out:
                if entry["resource_name"] == name:
                    entry.update(error_code=ErrorCode[exc.code_name], error_message=str(exc))
    return request.response(responses=out)


async def handle_alter_configs(ctx, request):
    return await _alter(ctx, request, incremental=False)


async def handle_incremental_alter_configs(ctx, request):
    return await _alter(ctx, request, incremental=True)


# --- log dirs ----------------------------------------------------------------------------

def handle_describe_log_dirs(ctx, request):
    broker = ctx.broker
    if not authorize.cluster(ctx, acl.DESCRIBE):  # Kafka: no dirs, and (v3+) the error
        return request.response(error_code=ErrorCode.cluster_authorization_failed, results=[])
    if request.body.topics is None:
        wanted = [(t, range(broker.catalog.partitions_of(t))) for t in broker.catalog]
    else:
        wanted = [(broker.catalog.get(t.topic), t.partitions) for t in request.body.topics]
    topics = []
    for topic, parts in wanted:
        if topic is None:
            continue  # as Kafka: only partitions this broker holds are described
        found = [{"partition_index": p, "partition_size": lg.size, "offset_lag": 0,
                  "is_future_key": False}
                 for p in parts if (lg := broker.log_for(topic, p)) is not None]
        if found:
            topics.append({"name": topic.name, "partitions": found})
    total = usable = -1
    if broker.config.data_dir is not None:
        usage = shutil.disk_usage(broker.config.data_dir)
        total, usable = usage.total, usage.free
    return request.response(error_code=ErrorCode.none, results=[
        {"error_code": ErrorCode.none, "log_dir": log_dir(broker), "topics": topics,
         "total_bytes": total, "usable_bytes": usable, "is_cordoned": False}])


def handle_alter_replica_log_dirs(ctx, request):
    broker, results = ctx.broker, {}
    may_alter = authorize.cluster(ctx, acl.ALTER)  # Kafka: every partition refused without it
    for d in request.body.dirs:
        for t in d.topics:
            topic = broker.catalog.get(t.name)
            entry = results.setdefault(t.name, {"topic_name": t.name, "partitions": []})
            for p in t.partitions:
                if not may_alter:
                    code = ErrorCode.cluster_authorization_failed
                elif d.path != log_dir(broker):
                    code = ErrorCode.log_dir_not_found
                elif topic is None or broker.log_for(topic, p) is None:
                    code = ErrorCode.replica_not_available
                else:
                    code = ErrorCode.none  # already there: the one log dir
                entry["partitions"].append({"partition_index": p, "error_code": code})
    return request.response(results=list(results.values()))


# --- leaders and reassignments -----------------------------------------------------------

def handle_elect_leaders(ctx, request):
    broker, body = ctx.broker, request.body
    if not authorize.cluster(ctx, acl.ALTER):  # Kafka: the error at the top and per partition
        return request.error_response(ErrorCode.cluster_authorization_failed)
    if body.election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
        return request.error_response(ErrorCode.invalid_request,
                                      f"unknown election type {body.election_type}")
    # Every partition's leader is its one, preferred replica: no election is needed,
    # preferred or unclean, for any partition named or (null) for every partition.
    if body.topic_partitions is None:
        asked = [(t.name, range(broker.catalog.partitions_of(t))) for t in broker.catalog]
    else:
        asked = [(t.topic, t.partitions) for t in body.topic_partitions]
    results = []
    for name, parts in asked:
        topic = broker.catalog.get(name)
        count = broker.catalog.partitions_of(topic) if topic else 0
        results.append({"topic": name, "partition_result": [
            {"partition_id": p,
             "error_code": ErrorCode.election_not_needed if 0 <= p < count
             else ErrorCode.unknown_topic_or_partition,
             "error_message": ("Leader election not needed for topic partition."
                               if 0 <= p < count else f"no partition {name}-{p}")}
            for p in parts]})
    return request.response(error_code=ErrorCode.none, replica_election_results=results)


def _reassignment_error(broker, topic, partition: int, replicas) -> tuple[ErrorCode, str | None]:
    node = broker.config.node_id
    if topic is None or not 0 <= partition < broker.catalog.partitions_of(topic):
        return ErrorCode.unknown_topic_or_partition, None
    if replicas is None:
        return ErrorCode.no_reassignment_in_progress, None
    if list(replicas) != [node]:
        return (ErrorCode.invalid_replica_assignment,
                f"replicas {list(replicas)}: the cluster is the one broker {node}, "
                f"so a partition's replicas can only be [{node}]")
    return ErrorCode.none, None  # where it already is: done at once


def handle_alter_partition_reassignments(ctx, request):
    broker, out = ctx.broker, []
    if not authorize.cluster(ctx, acl.ALTER):
        return request.error_response(ErrorCode.cluster_authorization_failed)
    for t in request.body.topics:
        topic = broker.catalog.get(t.name)
        parts = []
        for p in t.partitions:
            code, message = _reassignment_error(broker, topic, p.partition_index, p.replicas)
            parts.append({"partition_index": p.partition_index, "error_code": code,
                          "error_message": message})
        out.append({"name": t.name, "partitions": parts})
    return request.response(error_code=ErrorCode.none, responses=out,
                            allow_replication_factor_change=getattr(
                                request.body, "allow_replication_factor_change", True))


def handle_list_partition_reassignments(ctx, request):
    if not authorize.cluster(ctx, acl.DESCRIBE):
        return request.error_response(ErrorCode.cluster_authorization_failed)
    # A reassignment to the one broker completes when it is asked for: none is ongoing.
    return request.response(error_code=ErrorCode.none, topics=[])


# --- the quorum and config resources -----------------------------------------------------

def handle_describe_quorum(ctx, request):
    if not authorize.cluster(ctx, acl.DESCRIBE):
        return request.error_response(ErrorCode.cluster_authorization_failed)
    c, now = ctx.broker.config, int(time.time() * 1000)
    topics = []
    for t in request.body.topics:
        parts = []
        for p in t.partitions:
            if t.topic_name != METADATA_TOPIC or p.partition_index != 0:
                parts.append({"partition_index": p.partition_index,
                              "error_code": ErrorCode.unknown_topic_or_partition,
                              "error_message": f"the quorum's log is {METADATA_TOPIC}-0",
                              "leader_id": -1, "leader_epoch": -1, "high_watermark": -1})
                continue
            # The broker is the quorum: its only voter, its leader, always caught up.
            voter = {"replica_id": c.node_id, "replica_directory_id": None, "log_end_offset": 0,
                     "last_fetch_timestamp": now, "last_caught_up_timestamp": now}
            parts.append({"partition_index": 0, "error_code": ErrorCode.none, "leader_id": c.node_id,
                          "leader_epoch": 1, "high_watermark": 0, "current_voters": [voter],
                          "observers": []})
        topics.append({"topic_name": t.topic_name, "partitions": parts})
    return request.response(error_code=ErrorCode.none, topics=topics, nodes=[
        {"node_id": c.node_id, "listeners": [{"name": "PLAINTEXT", "host": c.host, "port": c.port}]}])


def handle_list_config_resources(ctx, request):
    broker = ctx.broker
    if not authorize.cluster(ctx, acl.DESCRIBE_CONFIGS):  # as Kafka: the cluster, not each one
        return request.response(error_code=ErrorCode.cluster_authorization_failed,
                                config_resources=[])
    types = set(getattr(request.body, "resource_types", ()) or ())
    if request.api_version == 0:
        types = {CLIENT_METRICS_RESOURCE}  # v0 was ListClientMetricsResources
    known = {TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE,
             GROUP_RESOURCE}
    if types - known:
        return request.response(error_code=ErrorCode.invalid_request, config_resources=[])
    wanted = types or known
    out = []
    if TOPIC_RESOURCE in wanted:
        out += [{"resource_name": t.name, "resource_type": TOPIC_RESOURCE} for t in broker.catalog]
    for kind in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
        if kind in wanted:
            out.append({"resource_name": str(broker.config.node_id), "resource_type": kind})
    if GROUP_RESOURCE in wanted:
        groups = set(broker.coordinator.groups) | set(broker.consumer_groups.groups) | set(broker.offsets)
        out += [{"resource_name": g, "resource_type": GROUP_RESOURCE} for g in sorted(groups)]
    return request.response(error_code=ErrorCode.none, config_resources=out)


# --- DescribeTopicPartitions -------------------------------------------------------------

def handle_describe_topic_partitions(ctx, request):
    """Topics by name, their partitions paged: at most `response_partition_limit` (capped
    as Kafka caps it) per answer, `next_cursor` naming where the next page starts."""
    broker, body = ctx.broker, request.body
    limit = max(1, min(body.response_partition_limit, MAX_PARTITIONS_PER_PAGE))
    # As Kafka: listing every topic shows only those this principal may describe; a topic
    # named and not describable answers TOPIC_AUTHORIZATION_FAILED, whether it exists or not.
    names = sorted({t.name for t in body.topics} if body.topics else
                   {t.name for t in broker.catalog if authorize.topic(ctx, acl.DESCRIBE, t.name)})
    cursor = body.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    out, next_cursor = [], None
    for name in names:
        topic = broker.catalog.get(name)
        if not authorize.topic(ctx, acl.DESCRIBE, name):
            out.append({"name": name, "error_code": ErrorCode.topic_authorization_failed,
                        "partitions": [], "is_internal": False,
                        "topic_authorized_operations": authorized_operations("topic", False)})
            continue
        if topic is None:
            out.append({"name": name, "error_code": ErrorCode.unknown_topic_or_partition,
                        "partitions": [], "is_internal": False,
                        "topic_authorized_operations": authorized_operations("topic", True)})
            continue
        entry = topic_entry(ctx, topic, authorized_operations("topic", True, ctx, name))
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts = entry["partitions"][first:]
        if limit <= 0:
            next_cursor = {"topic_name": name, "partition_index": first}
            break
        if len(parts) > limit:
            next_cursor = {"topic_name": name, "partition_index": first + limit}
        parts = parts[:limit]
        limit -= len(parts)
        for p in parts:
            # Empty, not null, as Kafka 4.3.1 answers (the Java admin fails on null).
            p.update(error_code=ErrorCode.none, eligible_leader_replicas=[], last_known_elr=[])
        out.append({**entry, "partitions": parts})
        if next_cursor is not None:
            break
    return request.response(topics=out, next_cursor=next_cursor)


HANDLERS = {"DeleteRecords": handle_delete_records, "AlterConfigs": handle_alter_configs,
            "IncrementalAlterConfigs": handle_incremental_alter_configs,
            "DescribeLogDirs": handle_describe_log_dirs,
            "AlterReplicaLogDirs": handle_alter_replica_log_dirs,
            "ElectLeaders": handle_elect_leaders,
            "AlterPartitionReassignments": handle_alter_partition_reassignments,
            "ListPartitionReassignments": handle_list_partition_reassignments,
            "DescribeQuorum": handle_describe_quorum,
            "ListConfigResources": handle_list_config_resources,
            "DescribeTopicPartitions": handle_describe_topic_partitions}
