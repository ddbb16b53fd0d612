"""confluent-kafka (librdkafka) against `camus serve` over real sockets on 127.0.0.1."""

from __future__ import annotations

import json
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic  # noqa: E402

from .conftest import unique  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, fut in admin.create_topics(list(topics), operation_timeout=10).items():
        fut.result(10)


def consume(bootstrap: str, topic: str, count: int, timeout: float = 15.0, **conf) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": conf.pop("group", unique("g")),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(m.error())
            got.append(m)
    finally:
        c.close()
    return got


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_acks_then_consume(broker, acks):
    topic = unique("acks")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 5})
    offsets = []

    def done(err, msg):
        assert err is None, err
        offsets.append(msg.offset())

    for i in range(20):
        p.produce(topic, f"v{i}".encode(), key=f"k{i}".encode(), on_delivery=done)
    assert p.flush(10) == 0
    if acks != "0":  # with acks=0 the broker answers nothing, so the client knows no offsets
        assert sorted(offsets) == list(range(20))
    got = consume(broker.bootstrap, topic, 20)
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(20)]
    assert [m.offset() for m in got] == list(range(20))
    assert got[3].key() == b"k3"


@pytest.mark.parametrize("codec", CODECS)
def test_every_compression_codec(broker, codec):
    topic = unique(f"codec-{codec}")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 20})
    values = [json.dumps({"i": i, "pad": "x" * 50}).encode() for i in range(200)]
    for v in values:
        p.produce(topic, v)
    assert p.flush(10) == 0
    got = consume(broker.bootstrap, topic, len(values))
    assert [m.value() for m in got] == values


def test_idempotent_producer(broker):
    topic = unique("idem")
    create(broker.bootstrap, NewTopic(topic, 2, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                  "linger.ms": 2})
    for i in range(100):
        p.produce(topic, str(i).encode(), partition=i % 2)
    assert p.flush(10) == 0
    got = consume(broker.bootstrap, topic, 100)
    assert sorted(int(m.value()) for m in got) == list(range(100))


def test_view_receives_exactly_matching_records_with_source_offsets(broker):
    src, view = unique("orders"), unique("expensive")
    create(broker.bootstrap, NewTopic(src, 1, 1, config={
        "camus.schema": "stock:str8=$.stock,price:u32=$.price,side:str1=header:side"}))
    create(broker.bootstrap, NewTopic(view, config={
        "camus.source": src, "camus.filter": 'price > 100 and side == "B"'}))
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    records = [({"stock": "GOOGL", "price": 50 + 10 * i}, "B" if i % 3 else "S") for i in range(30)]
    for value, side in records:
        p.produce(src, json.dumps(value).encode(), headers=[("side", side.encode())])
    assert p.flush(10) == 0
    want = [i for i, (v, s) in enumerate(records) if v["price"] > 100 and s == "B"]
    got = consume(broker.bootstrap, view, len(want))
    assert [m.offset() for m in got] == want  # the source's offsets, with gaps
    assert [json.loads(m.value()) for m in got] == [records[i][0] for i in want]
    assert all(dict(m.headers())["side"] == b"B" for m in got)
    time.sleep(0.5)
    assert len(consume(broker.bootstrap, view, len(want) + 1, timeout=2)) == len(want)


def test_view_created_after_records_sees_history_and_new_records(broker):
    src, view = unique("hist"), unique("hist-view")
    create(broker.bootstrap, NewTopic(src, 2, 1, config={"camus.schema": "n:u16=$.n"}))
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for n in range(10):
        p.produce(src, json.dumps({"n": n}).encode(), partition=n % 2)
    p.flush(10)
    create(broker.bootstrap, NewTopic(view, config={"camus.source": src,
                                                    "camus.filter": "n >= 5"}))
    for n in range(10, 14):
        p.produce(src, json.dumps({"n": n}).encode(), partition=n % 2)
    p.flush(10)
    got = consume(broker.bootstrap, view, 9)
    assert sorted(json.loads(m.value())["n"] for m in got) == list(range(5, 14))


def test_admin_topics_views_partitions_configs(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    src, view = unique("adm"), unique("adm-view")
    create(broker.bootstrap, NewTopic(src, 2, 1, config={"camus.schema": "price:u32=$.price",
                                                         "retention.ms": "3600000"}))
    with pytest.raises(KafkaException) as bad:
        create(broker.bootstrap, NewTopic(view, config={"camus.source": src,
                                                        "camus.filter": "price >> 1"}))
    assert bad.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "camus.filter:1:8" in bad.value.args[0].str()
    with pytest.raises(KafkaException) as unknown:
        create(broker.bootstrap, NewTopic(view, config={"camus.source": src,
                                                        "camus.filter": "volume > 1"}))
    assert "unknown field 'volume'" in unknown.value.args[0].str()
    with pytest.raises(KafkaException) as exists:
        create(broker.bootstrap, NewTopic(src, 1, 1))
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    create(broker.bootstrap, NewTopic(view, config={"camus.source": src,
                                                    "camus.filter": "price > 1"}))
    md = admin.list_topics(timeout=10)
    assert len(md.topics[view].partitions) == 2
    res = ConfigResource(ConfigResource.Type.TOPIC, src)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["camus.schema"].value == "price:u32=$.price"
    admin.create_partitions([NewPartitions(src, 4)])[src].result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics[src].partitions) == 4 and len(md.topics[view].partitions) == 4
    with pytest.raises(KafkaException):  # a source with views cannot go first
        admin.delete_topics([src], operation_timeout=10)[src].result(10)
    admin.delete_topics([view], operation_timeout=10)[view].result(10)
    admin.delete_topics([src], operation_timeout=10)[src].result(10)
    md = admin.list_topics(timeout=10)
    assert src not in md.topics and view not in md.topics


def test_list_offsets_earliest_latest(broker):
    topic = unique("lo")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(7):
        p.produce(topic, b"x")
    p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g")})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (lo, hi) == (0, 7)


def test_large_record_crosses_the_switch_in_fragments(broker):
    src, view = unique("large"), unique("large-view")
    create(broker.bootstrap, NewTopic(src, 1, 1, config={"camus.schema": "kind:str4=header:kind"}))
    create(broker.bootstrap, NewTopic(view, config={"camus.source": src,
                                                    "camus.filter": 'kind == "big"'}))
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 2_000_000,
                  "compression.type": "none"})
    big = bytes(range(256)) * 3900  # ~1 MB: about 700 fragments through the switch
    p.produce(src, b"small", headers=[("kind", b"tiny")])
    p.produce(src, big, key=b"k", headers=[("kind", b"big")])
    assert p.flush(10) == 0
    got = consume(broker.bootstrap, view, 1, **{"fetch.max.bytes": 4_000_000,
                                                 "receive.message.max.bytes": 5_000_000})
    assert got[0].offset() == 1 and got[0].value() == big and got[0].key() == b"k"


def test_commit_refuses_unknown_partition_and_oversized_metadata(broker):
    # As Kafka: a commit for a partition the topic does not have answers
    # UNKNOWN_TOPIC_OR_PARTITION, metadata over offset.metadata.max.bytes (4096) answers
    # OFFSET_METADATA_TOO_LARGE, and neither is stored; a normal commit still lands.
    topic = unique("ck-commit")
    create(broker.bootstrap, NewTopic(topic, num_partitions=2, replication_factor=1))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                  "enable.auto.commit": False})
    try:
        for offsets, code in ([TopicPartition(topic, 0, 5, metadata="m" * 5000)],
                              KafkaError.OFFSET_METADATA_TOO_LARGE), \
                             ([TopicPartition(topic, 2, 5)], KafkaError.UNKNOWN_TOPIC_OR_PART):
            with pytest.raises(KafkaException) as failed:
                c.commit(offsets=offsets, asynchronous=False)
            assert failed.value.args[0].code() == code
        # (confluent-kafka sends a metadata string with its terminating NUL, so 4095 characters
        # are 4096 bytes on the wire: the largest Kafka accepts.)
        c.commit(offsets=[TopicPartition(topic, 1, 7, metadata="m" * 4095)], asynchronous=False)
        got = c.committed([TopicPartition(topic, p) for p in (0, 1, 2)], timeout=10)
        assert [(t.partition, t.offset) for t in got] == [(0, -1001), (1, 7), (2, -1001)]
    finally:
        c.close()


def test_view_filter_nested_as_deep_as_the_rule_language_allows(broker):
    # 1,000 levels of parentheses (compiler.rule_syntax.MAX_NESTING): the view is created, compiled
    # into the switch, and selects exactly what the filter says. Before, mapping the filter
    # onto the Kafka slots recursed past Python's default limit and CreateTopics failed.
    src, view = unique("deep"), unique("deep-view")
    create(broker.bootstrap, NewTopic(src, 1, 1, config={"camus.schema": "a:u8=$.a,b:u16=$.b"}))
    text = "".join(f"(a == {i % 7} or " for i in range(1000)) + "b == 2" + ")" * 1000
    create(broker.bootstrap, NewTopic(view, config={"camus.source": src, "camus.filter": text}))
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce(src, json.dumps({"a": i, "b": i % 3}).encode(), partition=0)
    assert p.flush(10) == 0
    want = [i for i in range(20) if i < 7 or i % 3 == 2]
    assert [m.offset() for m in consume(broker.bootstrap, view, len(want))] == want
