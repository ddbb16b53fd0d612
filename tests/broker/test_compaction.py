"""Log compaction against `camus serve`, with confluent-kafka over real sockets: keys
required, the newest record per key kept at its offset, tombstones kept for
delete.retention.ms then removed, min.cleanable.dirty.ratio, views over a compacted topic
compacted with it, and all of it across a restart on the same data dir."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from .conftest import Server, unique  # noqa: E402
from .test_confluent_kafka import create  # noqa: E402
from .test_transactions import free_port  # noqa: E402

SMALL = {"cleanup.policy": "compact", "segment.bytes": "300"}  # segments roll every few records


def produce_each(bootstrap: str, topic: str, pairs) -> list:
    """Produce (key, value) pairs one request each (so batches and segments are small);
    the delivery errors, in order."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    for k, v in pairs:
        p.produce(topic, key=k, value=v, on_delivery=lambda err, msg: errors.append(err))
        p.flush(10)
    return errors


def read(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while True:
            m = c.poll(10)
            assert m is not None, f"no EOF; got {got}"
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return got
            got.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()


def settle(bootstrap: str, topic: str, predicate, timeout: float = 15.0):
    """The topic's records once `predicate` holds for them (the cleaner runs on the tick)."""
    deadline = time.monotonic() + timeout
    while True:
        got = read(bootstrap, topic)
        if predicate(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_a_compacted_topic_refuses_records_without_a_key(broker):
    topic = unique("ck")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"}))
    errors = produce_each(broker.bootstrap, topic, [(b"k", b"v"), (None, b"no key")])
    assert errors[0] is None
    assert errors[1] is not None and errors[1].code() == KafkaError.INVALID_RECORD
    assert [(k, v) for _, k, v in read(broker.bootstrap, topic)] == [(b"k", b"v")]



def test_keyless_records_in_a_batch_are_named_and_the_rest_fail_with_it(broker):
    """KIP-467: 10 keyless records among 100 in one batch. The response names the 10
    (record_errors, Produce v8+); librdkafka fails them with INVALID_RECORD and the other 90
    with its local _INVALID_DIFFERENT_RECORD (as librdkafka's 0011_produce_batch expects), and
    nothing of the batch is stored."""
    topic = unique("ck-batch")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"}))
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 500,
                  "batch.num.messages": 1000})
    errors: dict[int, object] = {}
    for i in range(100):
        key = None if i % 10 == 3 else f"k{i}".encode()
        p.produce(topic, key=key, value=f"v{i}".encode(), partition=0,
                  on_delivery=lambda err, msg, i=i: errors.__setitem__(i, err))
    assert p.flush(15) == 0
    codes = {i: e.code() for i, e in errors.items()}
    assert sorted(i for i, c in codes.items() if c == KafkaError.INVALID_RECORD) == \
        list(range(3, 100, 10))
    assert sorted(i for i, c in codes.items() if c == KafkaError._INVALID_DIFFERENT_RECORD) == \
        [i for i in range(100) if i % 10 != 3]
    assert read(broker.bootstrap, topic) == []

    # The same batch as a raw Produce v9: the indices, a message for each, the whole batch
    # refused with INVALID_RECORD and a message saying why; v7 has no record_errors at all.
    from shim.protocol.records import Record, encode_batch
    from .test_bad_input import connect
    from .test_wire_semantics import call
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, None if i % 10 == 3 else f"k{i}".encode(), b"v")
                          for i in range(100)], base_offset=0)
    s = connect(broker)
    for version in (9, 7):
        resp = call(s, 0, version, transactional_id=None, acks=-1, timeout=5000, topic_data=[
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}])
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == KafkaError.INVALID_RECORD and part.base_offset == -1
        if version >= 8:
            assert [e.batch_index for e in part.record_errors] == list(range(3, 100, 10))
            assert all("has no key" in e.batch_index_error_message for e in part.record_errors)
            assert part.error_message and "10 of the batch's 100 records" in part.error_message
    s.close()
    assert read(broker.bootstrap, topic) == []

def test_compaction_keeps_the_newest_per_key_at_its_offset_and_views_follow(camus_server, tmp_path):
    s = camus_server(tmp_path)
    topic, view = unique("cmp"), unique("cmpv")
    create(s.bootstrap, NewTopic(topic, 1, 1, config={
        **SMALL, "camus.schema": "n:u32=$.n", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "4000"}))
    create(s.bootstrap, NewTopic(view, 1, 1, config={"camus.source": topic,
                                                      "camus.filter": "n >= 20"}))
    pairs = [(f"k{i % 4}".encode(), f'{{"n": {i}}}'.encode()) for i in range(40)]
    pairs.append((b"k0", None))  # a tombstone for k0 (offset 40)
    pairs += [(b"pad", f'{{"n": {100 + i}}}'.encode()) for i in range(12)]  # roll it out
    assert produce_each(s.bootstrap, topic, pairs) == [None] * len(pairs)

    def compacted(got):
        return [k for _, k, _ in got].count(b"k1") == 1

    got = settle(s.bootstrap, topic, compacted)
    newest = {b"k1": 37, b"k2": 38, b"k3": 39}
    for key, offset in newest.items():  # the newest value of each key, at its own offset
        assert [(o, v) for o, k, v in got if k == key] == [(offset, f'{{"n": {offset}}}'.encode())]
    assert (40, b"k0", None) in got  # the tombstone stays for delete.retention.ms
    assert all(k != b"k0" or v is None for _, k, v in got)
    # The view is its filter over the compacted source, offsets included.
    view_got = read(s.bootstrap, view)
    assert [(o, k) for o, k, _ in view_got] == [(o, k) for o, k, v in got
                                                if v is not None and k != b"k0"]
    # After delete.retention.ms the tombstone goes too, at the next pass (more dirt).
    time.sleep(4.5)
    produce_each(s.bootstrap, topic, [(b"pad", f'{{"n": {200 + i}}}'.encode()) for i in range(12)])
    got = settle(s.bootstrap, topic, lambda g: all(k != b"k0" for _, k, _ in g))
    assert all(k != b"k0" for _, k, _ in got)
    while True:  # until no pass is left to run (older "pad" values go as segments roll)
        time.sleep(1)
        again = read(s.bootstrap, topic)
        if again == got:
            break
        got = again
    # A restart on the same data dir keeps the compacted log; the view, replayed, agrees.
    s.stop()
    s2 = camus_server(tmp_path)
    again = read(s2.bootstrap, topic)
    assert again == got, (again, got)
    assert [o for o, _, _ in read(s2.bootstrap, view)] == [
        o for o, _, v in got if v is not None and int(v[6:-1]) >= 20]


def test_min_cleanable_dirty_ratio_holds_the_cleaner_back(broker):
    topic = unique("ratio")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={**SMALL,
                                                            "min.cleanable.dirty.ratio": "0.9"}))
    first = [(f"k{i % 2}".encode(), f"a{i}".encode()) for i in range(30)]
    produce_each(broker.bootstrap, topic, first)
    # All of it is dirty (ratio 1.0 >= 0.9): a pass runs and leaves one or two per key.
    got = settle(broker.bootstrap, topic, lambda g: len(g) < 10)
    assert len(got) < 10
    # A little more dirt (a small share of the cleanable bytes) stays as it is.
    produce_each(broker.bootstrap, topic, [(b"k0", b"b0"), (b"k0", b"b1"), (b"k0", b"b2")])
    before = read(broker.bootstrap, topic)
    time.sleep(2)
    assert read(broker.bootstrap, topic) == before
    assert [v for _, k, v in before].count(b"b0") == 1


def test_compaction_drops_aborted_records_and_keeps_markers(broker):
    topic = unique("ctx")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={**SMALL,
                                                            "min.cleanable.dirty.ratio": "0.01"}))
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tid"),
                  "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, key=b"a", value=b"committed")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, key=b"b", value=b"aborted")
    p.produce(topic, key=b"a", value=b"aborted too")  # must not make "committed" go
    p.flush(10)
    p.abort_transaction(30)
    produce_each(broker.bootstrap, topic, [(f"pad{i}".encode(), b"x" * 40) for i in range(12)])

    def uncommitted(got):
        return [(k, v) for _, k, v in got if k in (b"a", b"b")]

    c = {"isolation.level": "read_uncommitted"}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # until the cleaner has removed the aborted record
        got = read_isolated(broker.bootstrap, topic, c)
        if uncommitted(got) == [(b"a", b"committed")]:
            break
        time.sleep(0.3)
    assert uncommitted(got) == [(b"a", b"committed")]
    assert uncommitted(read_isolated(broker.bootstrap, topic, {"isolation.level": "read_committed"})) \
        == [(b"a", b"committed")]


def read_isolated(bootstrap: str, topic: str, conf: dict) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                  "enable.partition.eof": True, **conf})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while True:
            m = c.poll(10)
            if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
                return got
            if not m.error():
                got.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()


def test_compact_delete_also_applies_retention(broker):
    topic = unique("cdel")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={
        **SMALL, "cleanup.policy": "compact,delete", "retention.bytes": "400",
        "min.cleanable.dirty.ratio": "1.0"}))
    produce_each(broker.bootstrap, topic, [(f"k{i}".encode(), b"y" * 40) for i in range(30)])
    got = read(broker.bootstrap, topic)
    assert got and got[0][0] > 0  # distinct keys: compaction keeps all, retention drops old ones
    compact_only = unique("conly")
    create(broker.bootstrap, NewTopic(compact_only, 1, 1, config={
        **SMALL, "retention.bytes": "400", "min.cleanable.dirty.ratio": "1.0"}))
    produce_each(broker.bootstrap, compact_only, [(f"k{i}".encode(), b"y" * 40) for i in range(30)])
    assert [o for o, _, _ in read(broker.bootstrap, compact_only)] == list(range(30))


def test_an_idempotent_producer_goes_on_after_compaction_emptied_its_last_batch(tmp_path):
    """Compaction keeps the header of an idempotent producer's newest batch even when it
    removed all its records, so after a restart the broker still knows the producer's
    sequence and its next batch is accepted (not OUT_OF_ORDER_SEQUENCE_NUMBER)."""
    port = free_port()
    listen = ["--listen", f"127.0.0.1:{port}"]
    s = Server(tmp_path, listen)
    try:
        topic = unique("cidem")
        create(s.bootstrap, NewTopic(topic, 1, 1, config={**SMALL,
                                                          "min.cleanable.dirty.ratio": "0.01"}))
        a = Producer({"bootstrap.servers": s.bootstrap, "enable.idempotence": True,
                      "linger.ms": 0, "metadata.recovery.strategy": "none"})
        for key, value in ((b"a", b"a1"), (b"x", b"x1")):  # two batches, sequences 0 and 1
            a.produce(topic, key=key, value=value)
            a.flush(10)
        produce_each(s.bootstrap, topic, [(b"x", b"x2")] + [(f"p{i}".encode(), b"z" * 40)
                                                            for i in range(12)])
        settle(s.bootstrap, topic, lambda g: (b"x", b"x1") not in [(k, v) for _, k, v in g])
        s.proc.kill()
        s.proc.wait(10)
        s.stop()
        s = Server(tmp_path, listen)
        errors = []
        a.produce(topic, key=b"a", value=b"a2", on_delivery=lambda err, msg: errors.append(err))
        a.flush(30)
        assert errors == [None]
        assert (b"a", b"a2") in [(k, v) for _, k, v in read(s.bootstrap, topic)]
    finally:
        s.stop()

