"""Fixtures for `camus serve --kafka`: the front door as a real subprocess (tests.broker's
`Server`), in front of a real Kafka-protocol cluster.

Two clusters serve here. `KAFKA_PEER=HOST:PORT` names a real Apache Kafka (.ci/run starts one
with ../shared/peers/kafka/kafka.sh where java and mvn exist); the tests that need one skip
without it. camus's own embedded broker (`camus serve` without --kafka) is the other: a real
server speaking the same protocol, with SASL and TLS listeners, that a test may stop and
restart, which the shared Kafka peer must not be.
"""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from tests.broker.conftest import Server, unique  # noqa: F401  (re-exported for the tests)

PEER = os.environ.get("KAFKA_PEER")
needs_kafka = pytest.mark.skipif(not PEER, reason="set KAFKA_PEER=HOST:PORT to an Apache Kafka 4.3.1 broker")


def front_door(bootstrap: str, *extra: str) -> Server:
    # --target named so that CAMUS_TEST_TARGET (the broker tests' switch) is not added.
    return Server(extra=["--kafka", bootstrap, "--target", "embedded:native", *extra])


@pytest.fixture(scope="module")
def door():
    """One front door in front of KAFKA_PEER for a module's tests."""
    if not PEER:
        pytest.skip("set KAFKA_PEER=HOST:PORT to an Apache Kafka 4.3.1 broker")
    s = front_door(PEER)
    yield s
    s.stop()


def read_frame(s: socket.socket) -> bytes | None:
    """One framed answer (size prefix included), or None when the peer closed."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = s.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data


QUIET = {"log_level": 0}  # librdkafka's own log lines would bury pytest's output


def consume(conf: dict, topic: str, count: int, timeout: float = 30, group: str | None = None,
            **extra) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of the first `count` records of `topic` a confluent-kafka
    consumer in a group of its own (or in `group`, then committing) gets, sorted."""
    from confluent_kafka import Consumer
    c = Consumer({"group.id": group or unique("g"), "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **QUIET, **conf, **extra})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset(), m.value()))
    if group is not None:
        c.commit(asynchronous=False)
    c.close()
    return sorted(got)


def values(records: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(v for _, _, v in records)
