"""Cluster administration beyond topics, at Kafka 4.3.1's versions:
DeleteRecords (21) 0-2, AlterConfigs (33) 0-2, AlterReplicaLogDirs (34) 1-2,
DescribeLogDirs (35) 1-5, ElectLeaders (43) 0-2, IncrementalAlterConfigs (44) 0-1,
AlterPartitionReassignments (45) 0-1, ListPartitionReassignments (46) 0,
DescribeQuorum (55) 0-2, ListConfigResources (74) 0-1, DescribeTopicPartitions (75) 0.

DeleteRecords: v1 same layout; v2 flexible. offset -1 means the high watermark.
AlterConfigs: v1 same layout; v2 flexible. Replaces a resource's whole set of dynamic
configs. IncrementalAlterConfigs: v1 flexible; per config an operation: 0 SET,
1 DELETE, 2 APPEND, 3 SUBTRACT (list configs).
AlterReplicaLogDirs: v1 floor (Kafka 4); v2 flexible.
DescribeLogDirs: v1 floor; v2 flexible; v3 top-level error_code; v4 total_bytes and
usable_bytes; v5 is_cordoned (KIP-1066). kafka-python infers Kafka 4.3 from v5.
ElectLeaders: v1 top-level error_code; v2 flexible. election_type 0 preferred, 1 unclean.
AlterPartitionReassignments: v0 flexible; v1 allow_replication_factor_change (KIP-860).
ListPartitionReassignments: v0 flexible.
DescribeQuorum: v0 flexible; v1 voter timestamps; v2 directory ids, nodes and messages.
ListConfigResources: v0 (ListClientMetricsResources) only client metrics; v1
resource_types filter (KIP-1142).
DescribeTopicPartitions: v0 flexible, with paging (response_partition_limit, cursor).

Every error answer echoes each item asked about: kafka-python sends some of these
without checking ApiVersions and fails on an empty result list.
"""

from __future__ import annotations

from typing import Any

from .errors import ErrorCode
from .registry import REGISTRY, Api

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs config_operation
PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1
METADATA_TOPIC = "__cluster_metadata"  # the KRaft log DescribeQuorum describes
# ListConfigResources resource types (ConfigResource.Type): topic, broker, client metrics, group.
TOPIC_RESOURCE, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 16, 32


def _delete_records_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"topics": [{"name": t.name,
                        "partitions": [{"partition_index": p.partition_index, "low_watermark": -1,
                                        "error_code": code} for p in t.partitions]}
                       for t in body.topics]}


def _alter_configs_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"responses": [{"error_code": code, "error_message": message,
                           "resource_type": r.resource_type, "resource_name": r.resource_name}
                          for r in body.resources]}


def _alter_replica_log_dirs_error(body: Any, version: int, code: ErrorCode,
                                  message: str | None) -> dict[str, Any]:
    return {"results": [{"topic_name": t.name,
                         "partitions": [{"partition_index": p, "error_code": code}
                                        for p in t.partitions]}
                        for d in body.dirs for t in d.topics]}


def _top_level_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message}


def _describe_log_dirs_error(body: Any, version: int, code: ErrorCode,
                             message: str | None) -> dict[str, Any]:
    # Before v3 only each log dir has an error code.
    return {"error_code": code, "results": [{"error_code": code, "log_dir": "", "topics": []}]}


def _elect_leaders_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "replica_election_results": [
        {"topic": t.topic, "partition_result": [
            {"partition_id": p, "error_code": code, "error_message": message} for p in t.partitions]}
        for t in body.topic_partitions or ()]}


def _alter_reassignments_error(body: Any, version: int, code: ErrorCode,
                               message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "responses": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code, "error_message": message}
            for p in t.partitions]}
        for t in body.topics]}


def _describe_quorum_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "topics": []}


def _describe_topic_partitions_error(body: Any, version: int, code: ErrorCode,
                                     message: str | None) -> dict[str, Any]:
    return {"topics": [{"error_code": code, "name": t.name, "partitions": []}
                       for t in body.topics], "next_cursor": None}


DELETE_RECORDS = REGISTRY.register(Api(21, "DeleteRecords", 0, 2, _delete_records_error))
ALTER_CONFIGS = REGISTRY.register(Api(33, "AlterConfigs", 0, 2, _alter_configs_error))
ALTER_REPLICA_LOG_DIRS = REGISTRY.register(Api(34, "AlterReplicaLogDirs", 1, 2, _alter_replica_log_dirs_error))
DESCRIBE_LOG_DIRS = REGISTRY.register(Api(35, "DescribeLogDirs", 1, 5, _describe_log_dirs_error))
ELECT_LEADERS = REGISTRY.register(Api(43, "ElectLeaders", 0, 2, _elect_leaders_error))
INCREMENTAL_ALTER_CONFIGS = REGISTRY.register(Api(44, "IncrementalAlterConfigs", 0, 1, _alter_configs_error))
ALTER_PARTITION_REASSIGNMENTS = REGISTRY.register(
    Api(45, "AlterPartitionReassignments", 0, 1, _alter_reassignments_error))
LIST_PARTITION_REASSIGNMENTS = REGISTRY.register(Api(46, "ListPartitionReassignments", 0, 0, _top_level_error))
DESCRIBE_QUORUM = REGISTRY.register(Api(55, "DescribeQuorum", 0, 2, _describe_quorum_error))
LIST_CONFIG_RESOURCES = REGISTRY.register(Api(74, "ListConfigResources", 0, 1, _top_level_error))
DESCRIBE_TOPIC_PARTITIONS = REGISTRY.register(
    Api(75, "DescribeTopicPartitions", 0, 0, _describe_topic_partitions_error))
