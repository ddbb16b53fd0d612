"""Transactions with kafka-python and the Java client and tools against `camus serve`:
kafka-python's transactional producer and read_committed consumer, the Java client's
(tests/broker/java/TransactionalRoundTrip.java, run as a single-file program), and
`kafka-transactions` (TransactionsCommand) listing and describing transactions and
producers while one is open."""

from __future__ import annotations

import pathlib
import re

import pytest

from .conftest import unique
from .test_kcat_and_java import java_tool, kafka_libs

JAVA_DIR = pathlib.Path(__file__).parent / "java"


def test_kafka_python_transactional_producer_and_read_committed_consumer(broker):
    kafka = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata
    topic, group = unique("kptxn"), unique("kpgroup")
    consumed = kafka.TopicPartition(unique("kpin"), 0)  # offsets of a (notional) input
    kafka.KafkaProducer(bootstrap_servers=broker.bootstrap).send(consumed.topic, b"x").get(10)
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("kptid"))
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send(topic, f"c{i}".encode(), partition=0)
    p.send_offsets_to_transaction({consumed: OffsetAndMetadata(1, "", -1)}, group)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(2):
        p.send(topic, f"a{i}".encode(), partition=0)
    p.send_offsets_to_transaction({consumed: OffsetAndMetadata(7, "", -1)}, group)
    p.flush()
    p.abort_transaction()
    p.close()
    committed = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
    assert committed.committed(consumed) == 1  # the commit's offsets applied, the abort's not
    committed.close()
    got = {}
    for isolation in ("read_committed", "read_uncommitted"):
        c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                enable_auto_commit=False, consumer_timeout_ms=3000)
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got[isolation] = [m.value.decode() for m in c]
        c.close()
    assert got["read_committed"] == ["c0", "c1", "c2"]
    assert got["read_uncommitted"] == ["c0", "c1", "c2", "a0", "a1"]



def test_committed_leader_epochs_survive_txn_offset_commit_and_offset_commit(camus_server,
                                                                             tmp_path):
    """As kafka-python's test_transactional_producer_offsets: OffsetFetch answers the leader
    epoch committed with the offset, through a transaction (TxnOffsetCommit v2+) and a plain
    OffsetCommit alike, and after a restart."""
    kafka = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata
    s = camus_server(tmp_path)
    group, plain = unique("kpeg"), unique("kpeg-plain")
    tp = kafka.TopicPartition(unique("kpein"), 0)
    kafka.KafkaProducer(bootstrap_servers=s.bootstrap).send(tp.topic, b"x").get(10)
    p = kafka.KafkaProducer(bootstrap_servers=s.bootstrap, transactional_id=unique("kpetid"))
    p.init_transactions()
    p.begin_transaction()
    p.send_offsets_to_transaction({tp: OffsetAndMetadata(1, "meta", 3)}, group)
    p.commit_transaction()
    p.close()
    c = kafka.KafkaConsumer(bootstrap_servers=s.bootstrap, group_id=plain,
                            enable_auto_commit=False)
    c.commit({tp: OffsetAndMetadata(1, "plain", 2)})
    c.close()

    def committed(bootstrap, g):
        c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=g)
        try:
            return c.committed(tp, metadata=True)
        finally:
            c.close()

    assert committed(s.bootstrap, group) == OffsetAndMetadata(1, "meta", 3)
    assert committed(s.bootstrap, plain) == OffsetAndMetadata(1, "plain", 2)
    s.stop()
    s2 = camus_server(tmp_path)
    assert committed(s2.bootstrap, group) == OffsetAndMetadata(1, "meta", 3)
    assert committed(s2.bootstrap, plain) == OffsetAndMetadata(1, "plain", 2)

@pytest.mark.java
def test_java_transactional_producer_read_committed_consumer_and_kafka_transactions(broker):
    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, java_tid, open_tid = unique("jtxn"), unique("jtid"), unique("open")
    out = java_tool(libs, str(JAVA_DIR / "TransactionalRoundTrip.java"), broker.bootstrap, topic,
                    java_tid, timeout=120)
    # offsets: j-c0..2 at 0-2, COMMIT marker 3, j-a0..1 at 4-5, ABORT marker 6
    assert "end=7 position=7" in out and "values=j-c0,j-c1,j-c2" in out, out
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                  "transactional.id": open_tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"pending", partition=0)
    p.flush(10)

    def tx(*args: str) -> str:
        return java_tool(libs, "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                         broker.bootstrap, *args)

    listed = tx("list")
    assert re.search(rf"^{java_tid}\s+0\s+\d+\s+CompleteAbort\s*$", listed, re.M), listed
    assert re.search(rf"^{open_tid}\s+0\s+\d+\s+Ongoing\s*$", listed, re.M), listed
    described = tx("describe", "--transactional-id", open_tid)
    assert re.search(rf"\s{open_tid}\s+\d+\s+0\s+Ongoing\s+60000\s+\d+\s+\d+\s+{topic}-0\s*$",
                     described, re.M), described
    producers = tx("describe-producers", "--topic", topic, "--partition", "0")
    rows = [line.split() for line in producers.splitlines()[1:] if line.strip()]
    assert sorted(r[-1] for r in rows) == ["7", "None"], producers  # the open one started at 7
    assert all(int(r[4]) > 0 for r in rows), producers  # LastTimestamp: its newest batch's
    p.abort_transaction(30)
    assert re.search(rf"^{open_tid}\s+0\s+\d+\s+CompleteAbort\s*$", tx("list"), re.M)
