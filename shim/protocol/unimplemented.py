"""Error answers for APIs camus deliberately does not implement, echoing what was asked.

These APIs are not advertised (docs/kafka-protocol.md, "Deliberately not implemented"), so
clients that read ApiVersions first never send them; kafka-python's admin sends some
anyway. The generic answer (top-level error_code, everything else empty) leaves a client
whose answer has no top-level error with an empty result list: kafka-python's
delete_groups and delete_records then fail with KeyError, describe_topic_partitions with
IndexError. Echoing every group, partition or resource with UNSUPPORTED_VERSION gives
each item the error, as a broker that knows the API but refuses it would answer.

`UNIMPLEMENTED` maps an API key to an `Api` that supports no version (never advertised,
never dispatched), only for its `error_response`.
"""

from __future__ import annotations

from typing import Any

from .errors import ErrorCode
from .registry import Api


def _delete_records(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"topics": [{"name": t.name,
                        "partitions": [{"partition_index": p.partition_index, "low_watermark": -1,
                                        "error_code": code} for p in t.partitions]}
                       for t in body.topics]}


def _alter_configs(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"responses": [{"error_code": code, "error_message": message,
                           "resource_type": r.resource_type, "resource_name": r.resource_name}
                          for r in body.resources]}


def _delete_groups(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"results": [{"group_id": g, "error_code": code} for g in body.groups_names]}


def _describe_topic_partitions(body: Any, version: int, code: ErrorCode,
                               message: str | None) -> dict[str, Any]:
    return {"topics": [{"error_code": code, "name": t.name, "partitions": []}
                       for t in body.topics], "next_cursor": None}


UNIMPLEMENTED: dict[int, Api] = {
    api.key: api for api in (
        Api(21, "DeleteRecords", 0, -1, _delete_records),
        Api(33, "AlterConfigs", 0, -1, _alter_configs),
        Api(42, "DeleteGroups", 0, -1, _delete_groups),
        Api(44, "IncrementalAlterConfigs", 0, -1, _alter_configs),
        Api(75, "DescribeTopicPartitions", 0, -1, _describe_topic_partitions),
    )
}
