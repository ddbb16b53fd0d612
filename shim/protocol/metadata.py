"""Metadata (key 3), versions 0-13: brokers, topics, partitions and leaders.

- v0: an empty topic list means "all topics"; v1+ uses null for all and [] for none.
- v1: controller_id, is_internal, rack. v2: cluster_id. v3: throttle_time_ms.
- v4: allow_auto_topic_creation (clients' test suites rely on auto-creation).
- v5: offline_replicas. v7: leader_epoch. v8-10: authorized operations fields.
- v9: flexible (request header v2, response header v1).
- v10+: topic_id in requests and responses. Fetch >= 13 and Produce 13 name
  topics only by id, so every topic needs a non-zero UUID here.
- v11: drops include_cluster_authorized_operations. v13: top-level error_code.

Advertise 127.0.0.1 rather than localhost (librdkafka may resolve it to ::1).
"""

from __future__ import annotations

import uuid
from typing import Any

from .connection import Request
from .entities import topic_ref
from .errors import ErrorCode
from .registry import REGISTRY, Api

MIN_VERSION, MAX_VERSION = 0, 13


def requested_topics(request: Request) -> list[tuple[str | None, uuid.UUID | None]] | None:
    """(name, topic_id) pairs asked for, or None for "every topic"."""
    topics = request.body.topics
    if topics is None or (request.api_version == 0 and not topics):
        return None
    return [(t.name, getattr(t, "topic_id", None)) for t in topics]


def allows_auto_creation(request: Request) -> bool:
    # Before v4 there was no flag and brokers auto-created by configuration.
    return getattr(request.body, "allow_auto_topic_creation", True)


def _error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    topics = [{**topic_ref(t), "error_code": code} for t in body.topics or ()]
    return {"error_code": code, "topics": topics, "controller_id": -1}


API = REGISTRY.register(Api(3, "Metadata", MIN_VERSION, MAX_VERSION, _error))
