"""The KIP-848 consumer group protocol (issue 17): ConsumerGroupHeartbeat and
ConsumerGroupDescribe, as current librdkafka and the Java client use them with
group.protocol=consumer. Before, neither API was advertised and such consumers failed."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, ConsumerGroupState  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from shim.consumer_groups import ConsumerGroups  # noqa: E402
from shim.group_coordinator import GroupError  # noqa: E402
from shim.protocol import ErrorCode  # noqa: E402

from .conftest import unique  # noqa: E402
from .test_confluent_kafka import create  # noqa: E402
from .test_group_semantics import _commit  # noqa: E402
from .test_groups_and_restart import produce  # noqa: E402
from .test_wire_semantics import call, connect  # noqa: E402


def _consumer(bootstrap, group, topic, name, events):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": True,
                  "auto.commit.interval.ms": 200})
    c.subscribe([topic],
                on_assign=lambda c2, ps: events.append((name, "assign", {p.partition for p in ps})),
                on_revoke=lambda c2, ps: events.append((name, "revoke", {p.partition for p in ps})))
    return c


def test_librdkafka_consumers_share_partitions_through_the_broker(broker):
    """Two confluent-kafka consumers with group.protocol=consumer: the first gets all four
    partitions, the second joining takes two of them, given up first by the first; every
    record is read once; the group describes as a consumer group, then as Empty."""
    topic, group = unique("k848"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 4, 1))
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(400)], partitions=4)
    events: list = []
    seen: list = []
    a = _consumer(broker.bootstrap, group, topic, "a", events)
    deadline = time.monotonic() + 30
    while len(seen) < 200 and time.monotonic() < deadline:
        m = a.poll(0.2)
        if m is not None and not m.error():
            seen.append((m.partition(), m.offset()))
    b = _consumer(broker.bootstrap, group, topic, "b", events)
    deadline = time.monotonic() + 45
    while len(seen) < 400 and time.monotonic() < deadline:
        for c in (a, b):
            m = c.poll(0.1)
            if m is not None and not m.error():
                seen.append((m.partition(), m.offset()))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(10)
    a.close()
    b.close()
    assert len(seen) == 400 and len(set(seen)) == 400
    assert ("a", "assign", {0, 1, 2, 3}) in events
    revoked = next(ps for who, kind, ps in events if who == "a" and kind == "revoke")
    assert len(revoked) == 2 and ("b", "assign", revoked) in events, events
    assert desc.state == ConsumerGroupState.STABLE
    assert sorted(len(m.assignment.topic_partitions) for m in desc.members) == [2, 2]
    listed = {g.group_id: g.state for g in admin.list_consumer_groups().result(10).valid}
    assert listed[group] == ConsumerGroupState.EMPTY


def test_heartbeat_epochs_and_commits_are_checked(broker):
    """Raw ConsumerGroupHeartbeat v1: a join gets an epoch and the partitions; a wrong
    epoch is FENCED_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID; a commit with a
    stale member epoch is STALE_MEMBER_EPOCH; a classic JoinGroup for the group is refused."""
    topic, group = unique("raw848"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 2, 1))
    s = connect(broker)

    def beat(member, epoch, topics=None, owned=None):
        return call(s, 68, 1, group_id=group, member_id=member, member_epoch=epoch,
                    instance_id=None, rack_id=None, rebalance_timeout=30000,
                    subscribed_topic_names=topics, subscribed_topic_regex=None,
                    server_assignor=None, topic_partitions=owned)

    joined = beat("m1", 0, [topic], [])
    assert joined.error_code == ErrorCode.none and joined.member_epoch >= 1
    assert sorted(joined.assignment.topic_partitions[0].partitions) == [0, 1]
    assert beat("m1", joined.member_epoch + 5).error_code == ErrorCode.fenced_member_epoch
    assert beat("nobody", 3).error_code == ErrorCode.unknown_member_id
    assert _commit(s, group, joined.member_epoch, "m1", topic) == ErrorCode.none
    assert _commit(s, group, joined.member_epoch - 1, "m1", topic) == ErrorCode.stale_member_epoch
    fetched = call(s, 9, 9, groups=[{"group_id": group, "member_id": "m1",
                                     "member_epoch": joined.member_epoch - 1,
                                     "topics": [{"name": topic, "partition_indexes": [0]}]}],
                   require_stable=False)
    assert fetched.groups[0].error_code == ErrorCode.stale_member_epoch
    join = call(s, 11, 9, group_id=group, session_timeout=10000, rebalance_timeout=10000,
                member_id="", group_instance_id=None, protocol_type="consumer",
                protocols=[{"name": "range", "metadata": b""}], reason=None)
    assert join.error_code == ErrorCode.inconsistent_group_protocol
    left = beat("m1", -1)
    assert left.error_code == ErrorCode.none and left.member_epoch == -1


def test_static_member_leaves_for_a_while_and_comes_back_as_itself(broker):
    """KIP-848 static membership: a member with an instance id leaving with epoch -2 keeps
    its partitions; a new incarnation (new member id, same instance id) gets them back at
    the same epoch, with no rebalance of the others; a second live holder of the instance
    id is UNRELEASED_INSTANCE_ID."""
    topic, group = unique("static848"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 4, 1))
    s = connect(broker)

    def beat(member, epoch, instance=None, topics=None, owned=None):
        return call(s, 68, 1, group_id=group, member_id=member, member_epoch=epoch,
                    instance_id=instance, rack_id=None, rebalance_timeout=30000,
                    subscribed_topic_names=topics, subscribed_topic_regex=None,
                    server_assignor=None, topic_partitions=owned)

    def mine(resp):
        return sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)

    a = beat("a1", 0, "A", [topic], [])
    b = beat("b1", 0, "B", [topic], [])
    assert a.error_code == b.error_code == ErrorCode.none
    tid = a.assignment.topic_partitions[0].topic_id
    a = beat("a1", a.member_epoch, owned=[{"topic_id": tid, "partitions": mine(a)}])
    assert mine(a) == [0, 1]  # told to give up two partitions for B
    a = beat("a1", a.member_epoch, owned=[{"topic_id": tid, "partitions": [0, 1]}])
    b = beat("b1", b.member_epoch, owned=[])
    assert mine(b) == [2, 3]
    epoch = b.member_epoch
    assert beat("b1", -2).member_epoch == -2  # away for a while: keeps 2 and 3
    assert beat("b2", 0, "A", [topic], []).error_code == ErrorCode.unreleased_instance_id
    back = beat("b2", 0, "B", [topic], [])
    assert back.error_code == ErrorCode.none and back.member_epoch == epoch and mine(back) == [2, 3]


@pytest.mark.java
def test_java_consumer_with_group_protocol_consumer(broker):
    """The Java consumer (ConsoleConsumer, group.protocol=consumer) reads and commits;
    kafka-consumer-groups --describe then shows the committed offsets."""
    from .test_conformance import _java
    from .test_kcat_and_java import kafka_libs

    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    topic, group = unique("j848"), unique("jg")
    create(broker.bootstrap, NewTopic(topic, 3, 1))
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(30)], partitions=3)
    rc, out = _java(libs, "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                    broker.bootstrap, "--topic", topic, "--group", group, "--consumer-property",
                    "group.protocol=consumer", "--from-beginning", "--max-messages", "30",
                    "--timeout-ms", "30000")
    assert rc == 0 and "Processed a total of 30 messages" in out, out
    rc, out = _java(libs, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                    "--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert sorted((r[2], r[3]) for r in rows) == [("0", "10"), ("1", "10"), ("2", "10")], out


# --- the assignment and its reconciliation, against a model ------------------------------

OPS = st.lists(st.tuples(st.sampled_from(["join", "leave", "beat", "grow"]),
                         st.integers(0, 3)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_no_partition_is_ever_assigned_to_two_members(ops):
    """Whatever members join, leave, heartbeat (reporting what they were given) and however
    the topic grows, no partition is assigned to two members at once; once everyone has
    heartbeated enough, every partition is assigned and the group is Stable."""
    counts = {"t": 3}
    groups = ConsumerGroups(lambda g: None, lambda name: counts.get(name, 0))
    epochs: dict[str, int] = {}

    def beat(mid):
        g = groups.groups.get("g")
        m = g.members[mid] if g and mid in g.members else None
        owned = dict(m.assigned) if m else {}
        try:
            answer = groups.heartbeat("g", mid, epochs[mid], instance_id=None, rack_id=None,
                                      rebalance_timeout_ms=1000, subscribed=("t",), regex=None,
                                      owned=owned, client_id="c", client_host="h")
        except GroupError:
            epochs.pop(mid)
            return
        epochs[mid] = answer["member_epoch"]

    for op, n in ops:
        mid = f"m{n}"
        if op == "join" and mid not in epochs:
            epochs[mid] = 0
            beat(mid)
        elif op == "leave" and mid in epochs:
            groups.heartbeat("g", mid, -1, instance_id=None, rack_id=None,
                             rebalance_timeout_ms=1000, subscribed=None, regex=None, owned=None,
                             client_id="c", client_host="h")
            epochs.pop(mid)
        elif op == "beat" and mid in epochs:
            beat(mid)
        elif op == "grow":
            counts["t"] += 1
        g = groups.groups.get("g")
        if g is not None:
            held = [p for m in g.members.values() for p in m.assigned.get("t", ())]
            assert len(held) == len(set(held))
    g = groups.groups.get("g")
    if g is None or not g.members:
        return
    for _ in range(4):
        for mid in list(epochs):
            beat(mid)
    held = sorted(p for m in g.members.values() for p in m.assigned.get("t", ()))
    assert held == list(range(counts["t"])) and g.state == "Stable"


def test_librdkafka_subscription_by_regular_expression(broker):
    """librdkafka sends a "^..." subscription to the broker as a regular expression
    (KIP-848): the broker matches it against whole topic names, including topics created
    after the consumer joined."""
    prefix = unique("re848").replace("-", "")
    first, later = f"{prefix}a", f"{prefix}b"
    create(broker.bootstrap, NewTopic(first, 1, 1), NewTopic(f"x{prefix}", 1, 1))
    produce(broker.bootstrap, first, [b"1", b"2"])
    produce(broker.bootstrap, f"x{prefix}", [b"no"])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "topic.metadata.refresh.interval.ms": 1000})
    c.subscribe([f"^{prefix}.*"])
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.topic(), m.value()))
    create(broker.bootstrap, NewTopic(later, 1, 1))
    produce(broker.bootstrap, later, [b"3"])
    deadline = time.monotonic() + 40
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.topic(), m.value()))
    c.close()
    assert sorted(got) == [(first, b"1"), (first, b"2"), (later, b"3")]


def test_member_that_does_not_give_partitions_up_in_time_is_fenced():
    """As Kafka: a member still holding partitions it was told to revoke after its
    rebalance timeout is removed, and its partitions go to the others."""
    groups = ConsumerGroups(lambda g: None, lambda name: 2)

    def beat(mid, epoch, owned):
        return groups.heartbeat("g", mid, epoch, instance_id=None, rack_id=None,
                                rebalance_timeout_ms=50, subscribed=("t",), regex=None,
                                owned=owned, client_id="c", client_host="h")

    a = beat("a", 0, {})
    b = beat("b", 0, {})
    a = beat("a", a["member_epoch"], {"t": frozenset({0, 1})})  # told to give one up
    assert len(a["assignment"]["t"]) == 1
    time.sleep(0.1)
    assert groups.expire() == [("g", "a")]
    b = beat("b", b["member_epoch"], {})
    assert b["assignment"] == {"t": frozenset({0, 1})}

