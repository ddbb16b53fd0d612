"""Produce (key 0), versions 3-13 (advertised 0-13), and InitProducerId (key 22), versions 0-5.

Produce:
- v3 is the floor: it is the first version whose records must be magic v2 record
  batches, and Kafka 4 removed v0-v2; every client we target (librdkafka 2.x,
  kafka-python 2.1+/3.x, Java 3.x/4.x) starts at >= 3. Legacy message sets are
  therefore not decoded: a batch with magic < 2 answers INVALID_RECORD. ApiVersions
  says 0-13 nevertheless, exactly as Kafka 4.3.1 does, which also closes the
  connection on a v0-2 request (checked against it).
- v5: log_start_offset in the response. v7: allows zstd (librdkafka only sends
  zstd when Produce >= 7 and Fetch >= 10 are both advertised).
- v8: record_errors and error_message. v9: flexible.
- v10: current_leader / node_endpoints tagged fields (only set on NOT_LEADER).
- v12: same body as v11 (KIP-890 transactions v2 marker).
- v13: topics named by topic_id instead of name.
- acks=0: the client expects no response at all; `Request.expects_response` says so.

InitProducerId:
- v0-v1: transactional_id (null for idempotent producers) and timeout.
- v2: flexible. v3: producer_id/epoch of an existing producer (epoch bump).
- v4: same layout (PRODUCER_FENCED). v5: same layout (KIP-890 transactions v2).
- v6 (KIP-939 two-phase commit) is not advertised: Kafka 4.3.1 stops at v5.
Idempotent producers need this API (mandatory for the Java client, whose
idempotence is on by default); with a transactional_id it goes to the transaction
coordinator (shim/transactions.py): the id's producer id with its epoch bumped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .connection import Request
from .entities import topic_ref
from .errors import ErrorCode
from .registry import REGISTRY, Api

MIN_VERSION, MAX_VERSION = 3, 13
INIT_PRODUCER_ID_MIN, INIT_PRODUCER_ID_MAX = 0, 5
ADVERTISED_MIN_VERSION = 0  # as Kafka 4.3.1

def partitions(request: Request) -> Iterator[tuple[dict[str, Any], int, bytes | None]]:
    """(topic ref, partition, raw record batches) for every partition in a Produce request."""
    for topic in request.body.topic_data:
        ref = topic_ref(topic)
        for p in topic.partition_data:
            yield ref, p.index, p.records


def _produce_expects_response(body: Any) -> bool:
    return body.acks != 0


def _produce_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "responses": [
            {
                **topic_ref(t),
                "partition_responses": [
                    {"index": p.index, "error_code": code, "base_offset": -1, "error_message": message}
                    for p in t.partition_data
                ],
            }
            for t in body.topic_data
        ]
    }


def _init_producer_id_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}


API = REGISTRY.register(
    Api(0, "Produce", MIN_VERSION, MAX_VERSION, _produce_error, expects_response=_produce_expects_response,
        advertised_min=ADVERTISED_MIN_VERSION)
)
INIT_PRODUCER_ID = REGISTRY.register(
    Api(22, "InitProducerId", INIT_PRODUCER_ID_MIN, INIT_PRODUCER_ID_MAX, _init_producer_id_error)
)
