"""Topic administration and cluster description: CreateTopics (19) 2-7, DeleteTopics
(20) 1-6, CreatePartitions (37) 0-3, DescribeConfigs (32) 1-4, DescribeCluster (60) 0-2.

CreateTopics: v2 is Kafka 4's floor; v3-4 same layout (librdkafka asks up to 4);
v5 flexible, and the response echoes num_partitions, replication_factor and
configs (a view's configs are how `camus.source`/`camus.filter` arrive); v6 same
layout (quota violations answer THROTTLING_QUOTA_EXCEEDED); v7 topic_id in the
response. A bad `camus.filter` fails the topic with
INVALID_CONFIG and the parser's message in error_message.
DeleteTopics: v1 throttle_time_ms; v4 flexible; v5 error_message; v6 topics as
(name, topic_id) pairs instead of names.
CreatePartitions: v2 flexible; v3 same layout.
DescribeConfigs: v1 floor with synonyms; v3 config_type and documentation; v4
flexible. resource_type 2 = topic, 4 = broker.
DescribeCluster: v1 endpoint_type; v2 include_fenced_brokers / is_fenced.
"""

from __future__ import annotations

from typing import Any

from .errors import ErrorCode
from .registry import REGISTRY, Api

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


def _create_topics_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "topics": [
            {"name": t.name, "error_code": code, "error_message": message, "num_partitions": -1,
             "replication_factor": -1}
            for t in body.topics
        ]
    }


def _delete_topics_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    if version >= 6:
        items = [{"name": t.name, "topic_id": t.topic_id} for t in body.topics]
    else:
        items = [{"name": name} for name in body.topic_names]
    return {"responses": [{**item, "error_code": code, "error_message": message} for item in items]}


def _create_partitions_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"results": [{"name": t.name, "error_code": code, "error_message": message} for t in body.topics]}


def _describe_configs_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "results": [
            {"error_code": code, "error_message": message, "resource_type": r.resource_type,
             "resource_name": r.resource_name, "configs": []}
            for r in body.resources
        ]
    }


def _describe_cluster_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "controller_id": -1,
            "endpoint_type": getattr(body, "endpoint_type", 1)}


CREATE_TOPICS = REGISTRY.register(Api(19, "CreateTopics", 2, 7, _create_topics_error))
DELETE_TOPICS = REGISTRY.register(Api(20, "DeleteTopics", 1, 6, _delete_topics_error))
DESCRIBE_CONFIGS = REGISTRY.register(Api(32, "DescribeConfigs", 1, 4, _describe_configs_error))
CREATE_PARTITIONS = REGISTRY.register(Api(37, "CreatePartitions", 0, 3, _create_partitions_error))
DESCRIBE_CLUSTER = REGISTRY.register(Api(60, "DescribeCluster", 0, 2, _describe_cluster_error))
