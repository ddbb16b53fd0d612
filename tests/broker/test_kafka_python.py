"""kafka-python (3.x) against `camus serve`: produce with every codec, consume, admin, groups."""

from __future__ import annotations

import json
import time

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.errors import InvalidConfigurationError, TopicAlreadyExistsError  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402


def admin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)


def drain(consumer, count, timeout=15.0):
    """Up to `count` records within `timeout` seconds.

    Each poll may wait for all the time left: poll() returns as soon as it has records, and
    its timeout must not expire in the middle of a group rebalance. kafka-python 3.0.12
    loses a rebalance that its leader starts because topic metadata changed: if poll() gives
    up while that JoinGroup and SyncGroup are in flight, the completed join is never applied,
    so the consumer keeps its old assignment, stops heartbeating and is expired by the
    broker. Every new consumer here goes through such a rebalance, against Apache Kafka
    too: its first join completes before its first metadata for the topic arrives, so it
    assigns itself nothing, then rejoins. With 200 ms polls this test failed on a loaded
    machine (no records, then UNKNOWN_MEMBER_ID on LeaveGroup)."""
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and (left := deadline - time.monotonic()) > 0:
        for records in consumer.poll(timeout_ms=int(left * 1000)).values():
            got.extend(records)
    return got


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_every_codec_and_consume(broker, codec):
    topic = unique(f"kp-{codec}")
    a = admin(broker)
    a.create_topics([NewTopic(topic, 1, 1)])
    a.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=10,
                      acks="all")
    futures = [p.send(topic, key=b"k", value=f"v{i}".encode()) for i in range(50)]
    p.flush(10)
    assert [f.get(10).offset for f in futures] == list(range(50))
    p.close(5)
    c = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      group_id=None, consumer_timeout_ms=10000)
    got = drain(c, 50)
    c.close()
    assert [r.value for r in got] == [f"v{i}".encode() for i in range(50)]


def test_admin_creates_view_and_rejects_bad_filter(broker):
    src, view = unique("kp-src"), unique("kp-view")
    a = admin(broker)
    a.create_topics([NewTopic(src, 2, 1, topic_configs={"camus.schema": "sym:str4=$.sym"})])
    with pytest.raises(TopicAlreadyExistsError):
        a.create_topics([NewTopic(src, 2, 1)])
    with pytest.raises(InvalidConfigurationError) as bad:
        a.create_topics([NewTopic(view, 1, 1, topic_configs={
            "camus.source": src, "camus.filter": 'sym == "TOOLONG"'})])
    assert "camus.filter:1:" in str(bad.value)
    a.create_topics([NewTopic(view, 1, 1, topic_configs={"camus.source": src,
                                                         "camus.filter": 'sym == "ABC"'})])
    a.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    syms = ["ABC", "XYZ", "ABC", "AB", "ABC"]
    for i, s in enumerate(syms):
        p.send(src, json.dumps({"sym": s}).encode(), partition=0)
    p.flush(10)
    p.close(5)
    c = KafkaConsumer(view, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      group_id=None)
    got = drain(c, 3)
    c.close()
    assert [r.offset for r in got] == [0, 2, 4]


def test_group_commit_and_resume(broker):
    topic, group = unique("kp-grp"), unique("kp-g")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all")
    for i in range(12):
        p.send(topic, str(i).encode(), partition=0)
    p.flush(10)
    p.close(5)
    c = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=500)
    got = drain(c, 12)
    assert sorted(r.offset for r in got if r.partition == 0) == list(range(12))
    c.commit({TopicPartition(topic, 0): kafka.OffsetAndMetadata(8, "", -1)})
    c.close()
    c = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=500)
    rest = drain(c, 4)
    c.close()
    assert [r.offset for r in rest if r.partition == 0] == [8, 9, 10, 11]
