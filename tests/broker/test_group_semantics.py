"""Group semantics clients test (issue 17): commits that must fail as Kafka fails them,
the closing consumer's commit of librdkafka's commit-during-rebalance test, and
cooperative-sticky rebalances. Real clients and raw requests over real sockets."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from shim.protocol import ErrorCode  # noqa: E402

from .conftest import unique  # noqa: E402
from .test_confluent_kafka import create  # noqa: E402
from .test_groups_and_restart import produce  # noqa: E402
from .test_wire_semantics import call, connect  # noqa: E402


def _commit(s, group: str, generation: int, member: str, topic: str) -> ErrorCode:
    resp = call(s, 8, 9, group_id=group, generation_id_or_member_epoch=generation,
                member_id=member, group_instance_id=None, topics=[
                    {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                    "committed_leader_epoch": -1,
                                                    "committed_metadata": ""}]}])
    return resp.topics[0].partitions[0].error_code


def test_commit_as_a_member_of_a_group_that_does_not_exist(broker):
    """Kafka 4.3.1 answers a commit naming a generation of a group it has never seen with
    GROUP_ID_NOT_FOUND (camus said UNKNOWN_MEMBER_ID); without a generation it is a simple
    commit and is kept, on both."""
    topic = unique("nogroup")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    s = connect(broker)
    assert _commit(s, unique("g"), 5, "x", topic) == ErrorCode.group_id_not_found
    assert _commit(s, unique("g"), -1, "", topic) == ErrorCode.none
    assert _commit(s, unique("g"), -1, "x", topic) == ErrorCode.none


def test_closing_consumers_commit_after_its_revocation_fails(broker):
    """librdkafka's 0118-commit_rebalance: a consumer closing gives up its partitions,
    waits, then commits: that commit must fail, and the remaining consumer, having no
    committed offsets, then receives every record."""
    topic, group = unique("t0118"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 4, 1))
    produce(broker.bootstrap, topic, [b"x"] * 200, partitions=4)
    results: dict = {}

    def consumer(name):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})

        def on_revoke(c2, parts):
            positions = c2.position(parts)
            c2.unassign()
            if name == "c1":
                return
            time.sleep(3)  # let the closing consumer leave, so that the commit fails
            try:
                results[name] = c2.commit(offsets=positions, asynchronous=False)
            except confluent_kafka.KafkaException as exc:
                results[name] = exc

        c.subscribe([topic], on_assign=lambda c2, parts: c2.assign(parts), on_revoke=on_revoke)
        return c

    c1, c2 = consumer("c1"), consumer("c2")
    got = {"c1": 0, "c2": 0}
    deadline = time.monotonic() + 30
    while min(got.values()) < 10 and time.monotonic() < deadline:
        for name, c in (("c1", c1), ("c2", c2)):
            m = c.poll(0.1)
            got[name] += m is not None and not m.error()
    assert min(got.values()) >= 10, got
    c2.close()
    assert isinstance(results.get("c2"), confluent_kafka.KafkaException), results
    seen, deadline = 0, time.monotonic() + 30
    while seen < 200 and time.monotonic() < deadline:
        m = c1.poll(0.2)
        seen += m is not None and not m.error()
    c1.close()
    assert seen >= 200 - got["c1"]


def test_cooperative_sticky_rebalance_keeps_partitions_and_loses_nothing(broker):
    """Two consumers with cooperative-sticky: the second joining takes partitions from the
    first incrementally (the first never loses all of its partitions at once), and the
    records are consumed exactly once between them."""
    topic, group = unique("coop"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 4, 1))
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(40)], partitions=4)
    events: list = []

    def consumer(name):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "auto.commit.interval.ms": 100,
                      "partition.assignment.strategy": "cooperative-sticky",
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        c.subscribe([topic],
                    on_assign=lambda c2, ps: events.append((name, "assign", len(ps))),
                    on_revoke=lambda c2, ps: events.append((name, "revoke", len(ps))))
        return c

    a = consumer("a")
    seen: list = []
    deadline = time.monotonic() + 20
    while len(seen) < 20 and time.monotonic() < deadline:
        m = a.poll(0.1)
        if m is not None and not m.error():
            seen.append((m.partition(), m.offset()))
    b = consumer("b")
    deadline = time.monotonic() + 40
    while len(seen) < 40 and time.monotonic() < deadline:
        for c in (a, b):
            m = c.poll(0.1)
            if m is not None and not m.error():
                seen.append((m.partition(), m.offset()))
    a.close()
    b.close()
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 40, seen
    assert ("a", "assign", 4) in events
    revokes = [n for who, kind, n in events if who == "a" and kind == "revoke"]
    assert revokes and revokes[0] < 4, events  # incremental: some partitions stay with "a"
