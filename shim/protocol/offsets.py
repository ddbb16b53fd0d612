"""ListOffsets (key 2) 1-11, OffsetCommit (key 8) 2-10, OffsetFetch (key 9) 1-10.

ListOffsets:
- v1 is Kafka 4's floor (single offset per partition, no old_style_offsets).
- v2: isolation_level. v4: current_leader_epoch. v6: flexible.
- timestamp -1 = latest, -2 = earliest, -3 = max timestamp (v7+), -4 = earliest
  local (v8+), -5 = latest tiered (v9+); `LATEST`/`EARLIEST` below.
- v10: timeout_ms. v11: earliest-pending-upload (-6); same layout as v10.

OffsetCommit:
- v2 is the floor (retention_time_ms as in Kafka 4). v3: throttle_time_ms.
- v5: drops retention_time_ms. v6: committed_leader_epoch. v7:
  group_instance_id. v8: flexible. v9: KIP-848 member epoch (same layout).
- v10: topics named by topic_id.

OffsetFetch:
- v1 floor. v2: null topics = all committed offsets, top-level error_code.
- v5: committed_leader_epoch. v6: flexible. v7: require_stable.
- v8+: a batch of groups (`groups` array) instead of one group_id.
- v9: member_id/member_epoch. v10: topics named by topic_id.
Clients such as sarama need `metadata` and committed_leader_epoch non-null: answer
"" and -1 for partitions without a commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .connection import Request
from .entities import topic_ref
from .errors import ErrorCode
from .registry import REGISTRY, Api

LIST_OFFSETS_MIN, LIST_OFFSETS_MAX = 1, 11
OFFSET_COMMIT_MIN, OFFSET_COMMIT_MAX = 2, 10
OFFSET_FETCH_MIN, OFFSET_FETCH_MAX = 1, 10

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6


def _list_offsets_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "topics": [
            {
                **topic_ref(t),
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": code, "timestamp": -1, "offset": -1}
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ]
    }


def _offset_commit_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "topics": [
            {
                **topic_ref(t),
                "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
            }
            for t in body.topics
        ]
    }


def fetch_groups(request: Request) -> list[tuple[str, list[tuple[dict[str, Any], tuple[int, ...]]] | None]]:
    """OffsetFetch as (group_id, [(topic ref, partitions)] or None for "all") per group.

    Hides the v8 change from one group_id to a `groups` array.
    """
    body = request.body
    if request.api_version >= 8:
        groups = [(g.group_id, g.topics) for g in body.groups]
    else:
        groups = [(body.group_id, body.topics)]
    return [
        (gid, None if topics is None else [(topic_ref(t), tuple(t.partition_indexes)) for t in topics])
        for gid, topics in groups
    ]


def _offset_fetch_topics(topics: Any, code: ErrorCode) -> list[dict[str, Any]]:
    return [
        {
            **topic_ref(t),
            "partitions": [
                {
                    "partition_index": i,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": code,
                }
                for i in t.partition_indexes
            ],
        }
        for t in topics or ()
    ]


def _offset_fetch_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    if version >= 8:
        return {
            "groups": [
                {"group_id": g.group_id, "error_code": code, "topics": _offset_fetch_topics(g.topics, code)}
                for g in body.groups
            ]
        }
    return {"error_code": code, "topics": _offset_fetch_topics(body.topics, code)}


LIST_OFFSETS = REGISTRY.register(Api(2, "ListOffsets", LIST_OFFSETS_MIN, LIST_OFFSETS_MAX, _list_offsets_error))
OFFSET_COMMIT = REGISTRY.register(
    Api(8, "OffsetCommit", OFFSET_COMMIT_MIN, OFFSET_COMMIT_MAX, _offset_commit_error)
)
OFFSET_FETCH = REGISTRY.register(Api(9, "OffsetFetch", OFFSET_FETCH_MIN, OFFSET_FETCH_MAX, _offset_fetch_error))


def list_offsets_partitions(request: Request) -> Iterator[tuple[dict[str, Any], Any]]:
    """(topic ref, partition entry with .partition_index and .timestamp) per partition."""
    for t in request.body.topics:
        ref = topic_ref(t)
        for p in t.partitions:
            yield ref, p
