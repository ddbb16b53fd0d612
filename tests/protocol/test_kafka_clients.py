"""Real consumers read record batches that we encoded, with every codec.

The fixtures prove we decode what clients send; this proves the other direction:
batches from `encode_batch` (xerial snappy, Java-style lz4 frames, ...) served in
Fetch responses that `shim.protocol` encoded, over a real socket on 127.0.0.1, are
read back intact by librdkafka and kafka-python.
"""

from __future__ import annotations

import time

import pytest

from shim.protocol.compression import Codec
from shim.protocol.records import Record, encode_batch
from loopback_broker import serve

RECORDS = [
    Record(i, 1_700_000_000_000 + i, b"key-%d" % i if i % 2 else None, b'{"price": %d}' % i * (i + 1),
           (("side", b"B"),) if i % 3 else ())
    for i in range(12)
]
TOPICS = {f"ours-{codec.name.lower()}": codec for codec in Codec}


@pytest.fixture(scope="module")
def bootstrap():
    server, broker = serve()
    for topic, codec in TOPICS.items():
        broker.topics[topic] = 1
        # Two batches, so the consumer also walks from one batch to the next.
        broker.append(topic, 0, encode_batch(RECORDS[:5], compression=codec))
        broker.append(topic, 0, encode_batch(RECORDS[5:], compression=codec, base_offset=5))
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _expected():
    return [(r.key, r.value, list(r.headers), r.timestamp) for r in RECORDS]


def test_librdkafka_reads_our_batches(bootstrap):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "fetch.wait.max.ms": 50,
    })
    consumer.assign([confluent_kafka.TopicPartition(t, 0, 0) for t in TOPICS])
    got = {t: [] for t in TOPICS}
    deadline = time.time() + 20
    while time.time() < deadline and any(len(v) < len(RECORDS) for v in got.values()):
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got[msg.topic()].append((msg.key(), msg.value(), list(msg.headers() or []), msg.timestamp()[1]))
    consumer.close()
    for topic in TOPICS:
        assert got[topic] == _expected(), topic


def test_kafka_python_reads_our_batches(bootstrap):
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                   fetch_max_wait_ms=50)
    partitions = [kafka.TopicPartition(t, 0) for t in TOPICS]
    consumer.assign(partitions)
    for tp in partitions:
        consumer.seek(tp, 0)
    got = {t: [] for t in TOPICS}
    deadline = time.time() + 20
    while time.time() < deadline and any(len(v) < len(RECORDS) for v in got.values()):
        for tp, messages in consumer.poll(200).items():
            got[tp.topic] += [(m.key, m.value, [(k, v) for k, v in m.headers], m.timestamp) for m in messages]
    consumer.close()
    for topic in TOPICS:
        assert got[topic] == _expected(), topic


def _kafka_libs():
    import os
    import pathlib
    import shutil

    libs = pathlib.Path(os.environ.get("KAFKA_LIBS") or pathlib.Path(__file__).resolve().parents[3] / "shared/peers/kafka/libs")
    if not shutil.which("java") or not list(libs.glob("kafka-clients-*.jar")):
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    return libs


@pytest.mark.java
@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE], ids=lambda c: c.name.lower())
def test_java_console_consumer_reads_our_batches(bootstrap, codec):
    import subprocess

    libs = _kafka_libs()
    out = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{libs}/*", "org.apache.kafka.tools.consumer.ConsoleConsumer",
         "--bootstrap-server", bootstrap, "--topic", f"ours-{codec.name.lower()}", "--partition", "0",
         "--offset", "0", "--max-messages", str(len(RECORDS)), "--timeout-ms", "20000"],
        capture_output=True, text=True, timeout=90,
    )
    values = out.stdout.splitlines()
    assert values == [r.value.decode() for r in RECORDS], out.stderr[-2000:]
