"""Kafka's own Java client and tools through `camus serve --kafka` in front of KAFKA_PEER: a
transactional producer and read_committed consumer (tests/broker/java/TransactionalRoundTrip
.java), and kafka-transactions listing and describing what the cluster's coordinators and
leaders hold (ListTransactions asks every broker, DescribeProducers the partition's leader)."""

from __future__ import annotations

import re

import pytest

from tests.broker.test_kcat_and_java import java_tool, kafka_libs
from tests.broker.test_transactions_clients import JAVA_DIR

from .conftest import PEER, QUIET, unique

pytestmark = [pytest.mark.java, pytest.mark.skipif(
    not PEER, reason="set KAFKA_PEER=HOST:PORT to an Apache Kafka 4.3.1 broker")]


def test_java_transactions_and_kafka_transactions_through_the_front_door(door):
    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    from confluent_kafka import Producer
    topic, java_tid, open_tid = unique("jtxn"), unique("jtid"), unique("open")
    out = java_tool(libs, str(JAVA_DIR / "TransactionalRoundTrip.java"), door.bootstrap, topic,
                    java_tid, timeout=120)
    # offsets: j-c0..2 at 0-2, COMMIT marker 3, j-a0..1 at 4-5, ABORT marker 6
    assert "end=7 position=7" in out and "values=j-c0,j-c1,j-c2" in out, out
    p = Producer({"bootstrap.servers": door.bootstrap, "transactional.id": open_tid, **QUIET})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"pending", partition=0)
    p.flush(10)

    def tx(*args: str) -> str:
        return java_tool(libs, "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                         door.bootstrap, *args)
    try:
        listed = tx("list")
        assert re.search(rf"^{java_tid}\s+0\s+\d+\s+CompleteAbort\s*$", listed, re.M), listed
        assert re.search(rf"^{open_tid}\s+0\s+\d+\s+Ongoing\s*$", listed, re.M), listed
        described = tx("describe", "--transactional-id", open_tid)
        assert re.search(rf"\s{open_tid}\s+\d+\s+\d+\s+Ongoing\s+\d+\s+\d+\s+\d+\s+{topic}-0\s*$",
                         described, re.M), described
        producers = tx("describe-producers", "--topic", topic, "--partition", "0")
        rows = [line.split() for line in producers.splitlines()[1:] if line.strip()]
        assert sorted(r[-1] for r in rows) == ["7", "None"], producers  # the open one began at 7
    finally:
        p.abort_transaction(30)
