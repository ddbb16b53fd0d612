"""Consumer groups (two members, a rebalance), committed offsets, and a broker restart.

confluent-kafka clients against `camus serve`; the restart test runs the broker twice on
one --data-dir and checks that topics, views, logs and committed offsets all survive.
"""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402

GROUP_CONF = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
              "auto.offset.reset": "earliest", "enable.auto.commit": False}


def produce(bootstrap, topic, values, partitions=None):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i, v in enumerate(values):
        if partitions:
            p.produce(topic, v, partition=i % partitions)
        else:
            p.produce(topic, v)
    assert p.flush(10) == 0


class Member:
    def __init__(self, bootstrap, group, topic):
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **GROUP_CONF})
        self.assigned: set[int] = set()
        self.c.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)
        self.got: list = []

    def _assign(self, c, parts):
        self.assigned = {p.partition for p in parts}

    def _revoke(self, c, parts):
        self.assigned = set()

    def poll(self, seconds=0.2):
        m = self.c.poll(seconds)
        if m is not None and not m.error():
            self.got.append((m.partition(), m.offset()))


def test_two_members_rebalance_and_split_partitions(broker):
    topic, group = unique("grp"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 4, 1))
    a = Member(broker.bootstrap, group, topic)
    assert wait_until(lambda: (a.poll(0.1), a.assigned == {0, 1, 2, 3})[1], 15)
    b = Member(broker.bootstrap, group, topic)

    def balanced():
        a.poll(0.05)
        b.poll(0.05)
        return len(a.assigned) == 2 and len(b.assigned) == 2 and not a.assigned & b.assigned

    assert wait_until(balanced, 20)
    produce(broker.bootstrap, topic, [str(i).encode() for i in range(40)], partitions=4)
    assert wait_until(lambda: (a.poll(0.05), b.poll(0.05), len(a.got) + len(b.got) == 40)[2], 15)
    assert {p for p, _ in a.got} == a.assigned and {p for p, _ in b.got} == b.assigned
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(10)
    assert len(desc.members) == 2
    b.c.close()  # LeaveGroup: a takes every partition back
    assert wait_until(lambda: (a.poll(0.1), a.assigned == {0, 1, 2, 3})[1], 20)
    a.c.close()


def test_commit_and_resume_after_consumer_restart(broker):
    topic, group = unique("resume"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    produce(broker.bootstrap, topic, [f"a{i}".encode() for i in range(10)])
    first = consume(broker.bootstrap, topic, 6, group=group)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, first[5].offset() + 1)], asynchronous=False)
    c.close()
    rest = consume(broker.bootstrap, topic, 4, group=group)
    assert [m.offset() for m in rest] == [6, 7, 8, 9]


def test_broker_restart_keeps_topics_views_logs_and_offsets(camus_server, tmp_path):
    s = camus_server(tmp_path / "data")
    src, view, group = unique("dur"), unique("dur-view"), unique("g")
    create(s.bootstrap, NewTopic(src, 2, 1, config={"camus.schema": "n:u32=$.n"}))
    create(s.bootstrap, NewTopic(view, config={"camus.source": src, "camus.filter": "n >= 10"}))
    produce(s.bootstrap, src, [json.dumps({"n": n}).encode() for n in range(20)], partitions=2)
    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(src, 0, 4), TopicPartition(src, 1, 3)], asynchronous=False)
    c.close()
    s.stop()

    s2 = camus_server(tmp_path / "data")
    admin = AdminClient({"bootstrap.servers": s2.bootstrap})
    md = admin.list_topics(timeout=10)
    assert src in md.topics and view in md.topics
    c = Consumer({"bootstrap.servers": s2.bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(src, 0), TopicPartition(src, 1)], timeout=10)
    assert [tp.offset for tp in committed] == [4, 3]
    assert c.get_watermark_offsets(TopicPartition(src, 0), timeout=10) == (0, 10)
    c.close()
    rest = consume(s2.bootstrap, src, 13, group=group)
    assert sorted((m.partition(), m.offset()) for m in rest) == sorted(
        [(0, o) for o in range(4, 10)] + [(1, o) for o in range(3, 10)])
    got = consume(s2.bootstrap, view, 10)
    assert sorted(json.loads(m.value())["n"] for m in got) == list(range(10, 20))
    produce(s2.bootstrap, src, [json.dumps({"n": 99}).encode()], partitions=2)
    more = consume(s2.bootstrap, view, 11)
    assert 99 in [json.loads(m.value())["n"] for m in more]


def test_static_member_restart_takes_its_place_without_waiting_for_the_session(broker):
    topic, group = unique("static"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 2, 1))
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, **GROUP_CONF,
            "session.timeout.ms": 30000, "group.instance.id": "worker-1"}
    first = Consumer(conf)
    first.subscribe([topic])
    assert wait_until(lambda: (first.poll(0.1), len(first.assignment()) == 2)[1], 15)
    first.close()  # a static member leaves no LeaveGroup behind
    again = Consumer(conf)
    again.subscribe([topic])
    # Well inside the old incarnation's 30 s session (and its 300 s rebalance timeout).
    assert wait_until(lambda: (again.poll(0.1), len(again.assignment()) == 2)[1], 10)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(10)
    assert len(desc.members) == 1
    again.close()
