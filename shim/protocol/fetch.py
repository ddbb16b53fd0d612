"""Fetch (key 1), versions 4-18: the long-poll read path.

- v4 is the floor Kafka 4 keeps (first version with isolation_level and
  last_stable_offset); librdkafka asks 0-16, kafka-python 3.0 up to 12, Java 4.x 4-18,
  so each picks a version we speak.
- v5: log_start_offset. v7: incremental fetch sessions (KIP-227, `shim.fetch_sessions`).
- v9: current_leader_epoch. v10: zstd allowed (librdkafka needs Fetch >= 10
  advertised before it will use zstd). v11: rack_id, preferred_read_replica
  (answer -1). v12: flexible, diverging_epoch/current_leader tagged fields.
- v13+: topics named by topic_id, not name (needs Metadata v10+ topic ids);
  unknown ids answer UNKNOWN_TOPIC_ID.
- v15: replica_state replaces replica_id. v16: node_endpoints. v17:
  replica_directory_id. v18: high_watermark in the request (KRaft replicas only).

The server must hold a fetch until min_bytes or max_wait (a never-answered fetch
hangs clients), and always return at least one whole batch containing the fetch
offset even when larger than max_bytes; records are the raw batch bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .connection import Request
from .entities import topic_ref
from .errors import ErrorCode
from .registry import REGISTRY, Api

MIN_VERSION, MAX_VERSION = 4, 18


def partitions(request: Request) -> Iterator[tuple[dict[str, Any], Any]]:
    """(topic ref, partition entry) for every partition asked for."""
    for topic in request.body.topics:
        ref = topic_ref(topic)
        for p in topic.partitions:
            yield ref, p


def max_wait_ms(request: Request) -> int:
    return round(request.body.max_wait.total_seconds() * 1000)


def _error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "error_code": code,
        "responses": [
            {
                **topic_ref(t),
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": code,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "preferred_read_replica": -1,
                        # Kafka sends an empty record set, never null, for a partition
                        # in error: librdkafka rejects a null one.
                        "records": b"",
                    }
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ],
    }


API = REGISTRY.register(Api(1, "Fetch", MIN_VERSION, MAX_VERSION, _error))
