"""Regressions found by running real Kafka clients' own tools and suites against `camus serve`.

Each test drives a real client over a real socket; docs/kafka-protocol.md ("Conformance
runs") lists the runs that found them.
"""

from __future__ import annotations

import logging
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from .conftest import unique  # noqa: E402
from .test_confluent_kafka import create  # noqa: E402


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_fetch_partition_error_carries_empty_records_not_null(inprocess, monkeypatch):
    """A Fetch answered with an error (here UNKNOWN_SERVER_ERROR from a failing read) must
    carry an empty record set, as Kafka's does: librdkafka refuses a null one as a parse
    failure and drops the connection instead of retrying the partition."""
    from shim.handlers import fetch as fetch_handlers

    topic = unique("fetcherr")
    create(inprocess.bootstrap, NewTopic(topic, 1, 1))
    p = Producer({"bootstrap.servers": inprocess.bootstrap})
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(10) == 0

    real_read, failures = fetch_handlers._read, []

    def failing_read(ctx, request, budget):
        if len(failures) < 3:
            failures.append(1)
            raise RuntimeError("injected read failure")
        return real_read(ctx, request, budget)

    monkeypatch.setattr(fetch_handlers, "_read", failing_read)
    log = logging.getLogger(unique("rdkafka"))
    lines = _Lines()
    log.addHandler(lines)
    log.setLevel(logging.DEBUG)
    c = Consumer({"bootstrap.servers": inprocess.bootstrap, "group.id": unique("g"),
                  "debug": "protocol,fetch,broker", "logger": log,
                  "fetch.error.backoff.ms": 50, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 20
    try:
        while len(got) < 5 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():  # the injected failure surfaces as a partition error
                assert m.error().code() in (KafkaError.UNKNOWN, KafkaError._PARTITION_EOF), m.error()
                continue
            got.append(m.value())
    finally:
        c.close()
    assert len(failures) == 3
    assert got == [f"v{i}".encode() for i in range(5)]
    # With records=null: "PROTOERR ... Protocol parse failure for Fetch v16(flex)" and
    # "invalid MessageSetSize -1".
    assert [line for line in lines.lines if line.startswith("PROTOERR")] == []
