"""Incremental fetch sessions (KIP-227, issue 17) over real sockets: the wire rules with
raw Fetch requests, and real clients (kafka-python, the Java consumer) using them.
Before, every Fetch was answered with session_id 0, which kept clients on full fetches."""

from __future__ import annotations

import time

import pytest

from shim.protocol import ErrorCode

from .conftest import unique, wait_until
from .test_wire_semantics import call, connect, create_topic
from shim.protocol.records import Record, encode_batch


def _fetch(s, session_id, epoch, topic, partitions, forgotten=(), max_wait=0):
    return call(s, 1, 12, replica_id=-1, max_wait=max_wait, min_bytes=1, max_bytes=1 << 20,
                isolation_level=0, session_id=session_id, session_epoch=epoch,
                topics=[{"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": o,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20} for p, o in partitions]}] if partitions else [],
                forgotten_topics_data=[{"topic": topic, "partitions": list(forgotten)}]
                if forgotten else [], rack_id="")


def _answered(resp) -> dict[int, int]:
    return {p.partition_index: p.high_watermark for t in resp.responses for p in t.partitions}


def _batch(value: bytes) -> bytes:
    return encode_batch([Record(0, int(time.time() * 1000), None, value)], base_offset=0)


def test_session_answers_only_what_changed(broker):
    s = connect(broker)
    topic = unique("sess")
    assert create_topic(s, topic, partitions=3).error_code == 0
    full = _fetch(s, 0, 0, topic, [(0, 0), (1, 0), (2, 0)])
    assert full.error_code == ErrorCode.none and full.session_id != 0
    assert _answered(full) == {0: 0, 1: 0, 2: 0}
    sid = full.session_id
    # Nothing changed: the incremental answer (no partitions asked for) names none.
    assert _answered(_fetch(s, sid, 1, topic, [], max_wait=50)) == {}
    produce_to(s, topic, 1)
    assert _answered(_fetch(s, sid, 2, topic, [])) == {1: 1}
    # The client moved partition 1's offset: still in the session; forget partition 2.
    step = _fetch(s, sid, 3, topic, [(1, 1)], forgotten=[2], max_wait=50)
    assert _answered(step) == {}
    produce_to(s, topic, 2)
    assert _answered(_fetch(s, sid, 4, topic, [], max_wait=50)) == {}  # forgotten
    # Wrong epoch, unknown session, and closing it (epoch -1: a sessionless full fetch).
    assert _fetch(s, sid, 9, topic, []).error_code == ErrorCode.invalid_fetch_session_epoch
    assert _fetch(s, 12345, 1, topic, []).error_code in (ErrorCode.fetch_session_id_not_found,
                                                         ErrorCode.invalid_fetch_session_epoch)
    closed = _fetch(s, sid, -1, topic, [(0, 0)])
    assert closed.session_id == 0 and _answered(closed) == {0: 0}
    assert _fetch(s, sid, 5, topic, []).error_code == ErrorCode.fetch_session_id_not_found


def produce_to(s, topic, partition):
    resp = call(s, 0, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": partition, "records": _batch(b"v")}]}])
    assert resp.responses[0].partition_responses[0].error_code == 0


def test_kafka_python_consumer_fetches_incrementally(inprocess):
    """kafka-python 3's consumer of 8 partitions opens a session and keeps it: its later
    Fetches are incremental (the session's epoch climbs), and it reads every record."""
    from kafka import KafkaConsumer, KafkaProducer

    topic = unique("kpsess")
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=inprocess.bootstrap)
    admin.create_topics([NewTopic(topic, 8, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=inprocess.bootstrap)
    for i in range(80):
        p.send(topic, f"v{i}".encode(), partition=i % 8)
    p.flush()
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=inprocess.bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=50, consumer_timeout_ms=10000)
    got = []
    for m in c:
        got.append(m)
        if len(got) == 80:
            break
    for _ in range(10):  # idle polls: incremental fetches that name no partition
        c.poll(100)
    sessions = inprocess.broker.fetch_sessions.sessions
    assert wait_until(lambda: any(len(ss.partitions) == 8 and ss.epoch > 3
                                  for ss in list(sessions.values())), 10), [
        (len(ss.partitions), ss.epoch) for ss in sessions.values()]
    c.close()
    assert sorted((m.partition, m.offset) for m in got) == sorted(
        (i % 8, i // 8) for i in range(80))


@pytest.mark.java
def test_java_consumer_fetches_incrementally(inprocess):
    """The Java consumer (ConsoleConsumer) of 6 partitions reads everything through an
    incremental session."""
    from .test_conformance import _java
    from .test_kcat_and_java import kafka_libs
    from .test_confluent_kafka import create
    from .test_groups_and_restart import produce as produce_many
    from confluent_kafka.admin import NewTopic

    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    topic = unique("jsess")
    sessions, plans = inprocess.broker.fetch_sessions, []
    real_open = sessions.open

    def recording_open(*args):
        plan = real_open(*args)
        plans.append((plan.incremental, len(plan.items)))
        return plan

    sessions.open = recording_open  # the consumer closes its session as it exits
    create(inprocess.bootstrap, NewTopic(topic, 6, 1))
    produce_many(inprocess.bootstrap, topic, [f"v{i}".encode() for i in range(60)], partitions=6)
    rc, out = _java(libs, "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                    inprocess.bootstrap, "--topic", topic, "--from-beginning",
                    "--max-messages", "60", "--timeout-ms", "20000")
    assert rc == 0 and len([line for line in out.splitlines() if line.startswith("v")]) == 60, out
    assert (True, 6) in plans, plans  # incremental Fetches reading the session's 6 partitions


def test_sessions_are_bounded_least_recently_used_first():
    from shim.fetch_sessions import FetchSessions

    class P:
        def __init__(self, n):
            self.partition, self.fetch_offset, self.partition_max_bytes = n, 0, 1

    cache = FetchSessions(max_sessions=2)
    ref = {"name": "t", "topic_id": None}
    ids = [cache.open(0, 0, False, [(ref, P(0))], []).session_id for _ in range(3)]
    assert list(cache.sessions) == ids[1:]
    assert cache.open(ids[0], 1, False, [], []).error == ErrorCode.fetch_session_id_not_found
    assert cache.open(ids[1], 1, True, [], []).error == ErrorCode.fetch_session_topic_id_error
