"""Retention (bytes and time) seen through ListOffsets and Fetch, across a restart; the
`--config` file declaring topics and views; the admin views of groups and the cluster."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402


def watermarks(bootstrap, topic, partition=0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("w")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def produce_batches(bootstrap, topic, count, size=100):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        p.produce(topic, str(i).encode().ljust(size, b"."), partition=0)
        p.flush(10)  # one batch per record, so retention has segments to drop


def test_retention_bytes_bounds_the_log_and_survives_restart(camus_server, tmp_path):
    s = camus_server(tmp_path / "d")
    topic = unique("rb")
    create(s.bootstrap, NewTopic(topic, 1, 1, config={"retention.bytes": "2000",
                                                      "segment.bytes": "500"}))
    produce_batches(s.bootstrap, topic, 60)
    lo, hi = watermarks(s.bootstrap, topic)
    assert hi == 60 and 0 < lo < 60
    got = consume(s.bootstrap, topic, hi - lo)
    assert [m.offset() for m in got] == list(range(lo, hi))
    s.stop()
    s2 = camus_server(tmp_path / "d")
    assert watermarks(s2.bootstrap, topic) == (lo, hi)


def test_retention_ms_expires_everything_but_keeps_the_end(broker):
    topic = unique("rt")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={"retention.ms": "500"}))
    produce_batches(broker.bootstrap, topic, 5)
    assert wait_until(lambda: watermarks(broker.bootstrap, topic) == (5, 5), 10)


def test_config_file_declares_topics_and_views(camus_server, tmp_path):
    cfg = tmp_path / "camus.json"
    cfg.write_text(json.dumps({"partitions": 2, "topics": [
        {"name": "trades", "partitions": 3, "configs": {"camus.schema": "qty:u32=$.qty"}},
        {"name": "big-trades", "configs": {"camus.source": "trades", "camus.filter": "qty >= 1000"}},
    ]}))
    s = camus_server(extra=["--config", str(cfg)])
    md = AdminClient({"bootstrap.servers": s.bootstrap}).list_topics(timeout=10)
    assert len(md.topics["trades"].partitions) == 3 and len(md.topics["big-trades"].partitions) == 3
    p = Producer({"bootstrap.servers": s.bootstrap})
    for q in (10, 5000, 999, 1000):
        p.produce("trades", json.dumps({"qty": q}).encode(), partition=1)
    p.flush(10)
    got = consume(s.bootstrap, "big-trades", 2)
    assert [(m.partition(), m.offset()) for m in got] == [(1, 1), (1, 3)]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"topics": [{"name": "v", "configs": {
        "camus.source": "nope", "camus.filter": "x > 1"}}]}))
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "camus.cli", "serve", "--listen", "127.0.0.1:0",
                          "--config", str(bad)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "camus.source='nope': no such topic" in out.stderr


def test_admin_lists_and_describes_groups_and_cluster(broker):
    kafka = pytest.importorskip("kafka")
    topic, group = unique("adm-g"), unique("adm-group")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "session.timeout.ms": 6000, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    assert wait_until(lambda: (c.poll(0.1), c.assignment())[1], 15)
    a = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        listed = a.list_groups()
        assert group in [g["group_id"] if isinstance(g, dict) else g[0] for g in listed], listed
        desc = a.describe_groups([group])[group]
        assert desc["group_state"] == "Stable" and len(desc["members"]) == 1, desc
        cluster = a.describe_cluster()
        assert cluster["brokers"][0]["port"] == broker.port
    finally:
        a.close()
        c.close()
    time.sleep(0.2)
