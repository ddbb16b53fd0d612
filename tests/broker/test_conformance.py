"""Regressions found by running real Kafka clients' own tools and suites against `camus serve`.

Each test drives a real client over a real socket; docs/kafka-protocol.md ("Conformance
runs") lists the runs that found them.
"""

from __future__ import annotations

import logging
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_fetch_partition_error_carries_empty_records_not_null(inprocess, monkeypatch):
    """A Fetch answered with an error (here UNKNOWN_SERVER_ERROR from a failing read) must
    carry an empty record set, as Kafka's does: librdkafka refuses a null one as a parse
    failure and drops the connection instead of retrying the partition."""
    from shim.handlers import fetch as fetch_handlers

    topic = unique("fetcherr")
    create(inprocess.bootstrap, NewTopic(topic, 1, 1))
    p = Producer({"bootstrap.servers": inprocess.bootstrap})
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(10) == 0

    real_read, failures = fetch_handlers._read, []

    def failing_read(ctx, request, budget, *items):
        if len(failures) < 3:
            failures.append(1)
            raise RuntimeError("injected read failure")
        return real_read(ctx, request, budget, *items)

    monkeypatch.setattr(fetch_handlers, "_read", failing_read)
    log = logging.getLogger(unique("rdkafka"))
    lines = _Lines()
    log.addHandler(lines)
    log.setLevel(logging.DEBUG)
    c = Consumer({"bootstrap.servers": inprocess.bootstrap, "group.id": unique("g"),
                  "debug": "protocol,fetch,broker", "logger": log,
                  "fetch.error.backoff.ms": 50, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 20
    try:
        while len(got) < 5 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():  # the injected failure surfaces as a partition error
                assert m.error().code() in (KafkaError.UNKNOWN, KafkaError._PARTITION_EOF), m.error()
                continue
            got.append(m.value())
    finally:
        c.close()
    assert len(failures) == 3
    assert got == [f"v{i}".encode() for i in range(5)]
    # With records=null: "PROTOERR ... Protocol parse failure for Fetch v16(flex)" and
    # "invalid MessageSetSize -1".
    assert [line for line in lines.lines if line.startswith("PROTOERR")] == []


def test_commit_in_revoke_callback_during_rebalance_is_kept(broker):
    """A member commits what it processed as its partitions are revoked, while the group is
    PreparingRebalance (the new member is waiting for it to rejoin). Kafka accepts that
    commit (only CompletingRebalance answers REBALANCE_IN_PROGRESS); refusing it made
    VerifiableConsumer's rebalance run redeliver records."""
    from .test_groups_and_restart import GROUP_CONF, produce

    topic, group = unique("revoke"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 2, 1))
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(20)], partitions=2)
    a = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **GROUP_CONF})
    commits: list = []
    consumed: dict[int, int] = {}

    def on_revoke(c, parts):
        if not parts:
            return
        mine = [TopicPartition(topic, p.partition, consumed[p.partition])
                for p in parts if p.partition in consumed]
        try:
            commits.append(("ok", c.commit(offsets=mine, asynchronous=False)))
        except Exception as exc:  # KafkaException(REBALANCE_IN_PROGRESS) before the fix
            commits.append(("error", exc))

    a.subscribe([topic], on_revoke=on_revoke)
    b = None
    try:
        deadline = time.monotonic() + 20
        while sum(consumed.values()) < 20 and time.monotonic() < deadline:
            m = a.poll(0.2)
            if m is not None and not m.error():
                consumed[m.partition()] = m.offset() + 1
        assert sum(consumed.values()) == 20
        b = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **GROUP_CONF})
        b.subscribe([topic])
        deadline = time.monotonic() + 20
        while not commits and time.monotonic() < deadline:
            a.poll(0.1)
            b.poll(0.1)
        assert commits and commits[0][0] == "ok", commits
        assert all(tp.error is None for tp in commits[0][1]), commits
    finally:
        a.close()
        if b is not None:
            b.close()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    finally:
        c.close()
    assert {tp.partition: tp.offset for tp in got} == {0: 10, 1: 10}


def _events(path) -> list[dict]:
    import json

    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line the tool wrote half of, or a log line
    return out


@pytest.mark.java
def test_java_verifiable_producer_and_consumers_through_a_rebalance(broker, tmp_path):
    """Kafka's own VerifiableProducer and two VerifiableConsumers in one group (classic
    protocol, range assignor, a synchronous commit after every batch): the second consumer
    joins while records flow, so the group rebalances mid-stream. Every acknowledged record
    is consumed exactly once and every commit succeeds."""
    import signal
    import subprocess

    from .test_kcat_and_java import java_tool, kafka_libs

    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    topic, group, total = unique("verifiable"), unique("vg"), 3000
    java_tool(libs, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap,
              "--create", "--topic", topic, "--partitions", "4", "--replication-factor", "1")

    def start(cls, out, *args):
        with open(out, "w") as sink:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(["java", "-Xmx256m", "-cp", f"{libs}/*",
                                     f"org.apache.kafka.tools.{cls}", "--bootstrap-server",
                                     broker.bootstrap, "--topic", topic, *args],
                                    stdout=sink, stderr=subprocess.DEVNULL)

    consumer_args = ("--group-id", group, "--session-timeout", "6000", "--verbose")
    outs = [tmp_path / "c1.json", tmp_path / "c2.json"]
    procs = [start("VerifiableConsumer", outs[0], *consumer_args)]
    try:
        producer = start("VerifiableProducer", tmp_path / "p.json", "--max-messages", str(total),
                         "--throughput", "600", "--acks", "-1")
        time.sleep(1.5)
        procs.append(start("VerifiableConsumer", outs[1], *consumer_args))
        assert producer.wait(60) == 0
        produced = {(e["partition"], e["offset"]): e["value"]
                    for e in _events(tmp_path / "p.json") if e["name"] == "producer_send_success"}
        assert len(produced) == total

        def records():
            return [(e["partition"], e["offset"], e["value"]) for o in outs for e in _events(o)
                    if e["name"] == "record_data"]

        def second_assigned():
            return any(e["name"] == "partitions_assigned" and e["partitions"]
                       for e in _events(outs[1]))

        deadline = time.monotonic() + 60
        while (len(records()) < total or not second_assigned()) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
    got = records()
    events = [e for o in outs for e in _events(o)]
    assert [e for e in events if e["name"] == "offsets_committed" and not e["success"]] == []
    assert second_assigned()
    assert len(got) == len(set(got)), "duplicates"
    assert {(p, o): v for p, o, v in got} == produced


def test_kafka_python_describe_configs_types_and_broker_listeners(broker):
    """kafka-python's own suite (test_admin_integration) checks DescribeConfigs v3+ config
    types (retention.bytes is LONG) and that the broker describes advertised.listeners as a
    read-only static config."""
    from kafka.admin import ConfigResource, ConfigResourceType

    from .test_kafka_python import admin

    topic = unique("cfgtypes")
    a = admin(broker)
    try:
        a.create_topics({topic: {"num_partitions": 1, "replication_factor": 1,
                                 "configs": {"retention.ms": "3600000"}}})
        got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                 config_filter="all")["topic"][topic]
        assert got["retention.bytes"]["config_type"] == "LONG"
        assert got["retention.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert got["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert got["segment.bytes"]["config_type"] == "INT"
        assert got["cleanup.policy"]["config_type"] == "LIST"
        node = str(a._client.least_loaded_node())
        cfg = a.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)],
                                 config_filter="all")["broker"][node]
        listeners = cfg["advertised.listeners"]
        assert listeners["config_source"] == "STATIC_BROKER_CONFIG"
        assert listeners["read_only"] is True
        assert listeners["value"] == f"PLAINTEXT://{broker.bootstrap}"
        assert cfg["num.partitions"]["config_type"] == "INT"
    finally:
        a.close()


def test_kafka_python_manual_replica_assignments_naming_the_one_broker(broker):
    """Manual assignments that name this (only) broker are valid in Kafka; kafka-python's
    test_create_partitions sends them. Naming another broker is INVALID_REPLICA_ASSIGNMENT."""
    from kafka.errors import InvalidReplicationAssignmentError, InvalidRequestError

    from .test_kafka_python import admin

    topic, other = unique("assign"), unique("assign")
    a = admin(broker)
    try:
        a.create_topics({topic: {"assignments": {0: [0], 1: [0]}}})
        assert len(a.describe_topics([topic])[0]["partitions"]) == 2
        a.create_partitions({topic: {"count": 4, "assignments": [[0], [0]]}})
        assert len(a.describe_topics([topic])[0]["partitions"]) == 4
        with pytest.raises(InvalidReplicationAssignmentError):
            a.create_partitions({topic: {"count": 5, "assignments": [[1]]}})
        with pytest.raises(InvalidReplicationAssignmentError):
            a.create_partitions({topic: {"count": 6, "assignments": [[0]]}})  # 2 new, 1 given
        with pytest.raises(InvalidReplicationAssignmentError):
            a.create_topics({other: {"assignments": {0: [0, 1]}}})
        with pytest.raises(InvalidRequestError):
            a.create_topics({other: {"num_partitions": 2, "assignments": {0: [0]}}})
        assert len(a.describe_topics([topic])[0]["partitions"]) == 4
    finally:
        a.close()


def test_group_known_only_by_committed_offsets_is_empty_not_dead(broker):
    """Offsets committed outside group management (generation -1: the admin client, or
    kafka-consumer-groups --reset-offsets) make a group Kafka describes as Empty; Dead made
    kafka-consumer-groups --describe say the group does not exist and hide its offsets."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    topic, group = unique("offonly"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        c.close()
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    desc = a.describe_consumer_groups([group])[group].result(10)
    assert desc.state == ConsumerGroupState.EMPTY
    assert desc.members == []
    missing = unique("nogroup")
    assert a.describe_consumer_groups([missing])[missing].result(10).state == ConsumerGroupState.DEAD


def test_kafka_python_admin_calls_without_api_versions_get_answers(broker):
    """kafka-python configured with a broker version (as its own suite runs it:
    api_version=(4, 0)) sends DeleteGroups and DeleteRecords without checking ApiVersions.
    Before issue 17 each item got UNSUPPORTED_VERSION; now they are served: an unknown
    group is GROUP_ID_NOT_FOUND, as on Kafka, and the records are deleted."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    topic, group = unique("unimpl"), unique("g")
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=(4, 0),
                         request_timeout_ms=10000)
    try:
        a.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}})
        assert a.delete_groups([group]) == {group: "GroupIdNotFoundError"}
        got = a.delete_records({KTP(topic, 0): 0})
        assert got[KTP(topic, 0)]["error_code"] == 0
        assert topic in a.list_topics()
    finally:
        a.close()


def test_batch_larger_than_max_message_bytes_is_refused(broker):
    """franz-go's TestClient_ProduceLargeMessages: a batch larger than the topic's
    max.message.bytes gets MESSAGE_TOO_LARGE for its partition (it was stored)."""
    topic = unique("maxbytes")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={"max.message.bytes": "51200"}))
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 20_000_000,
                  "compression.type": "none", "linger.ms": 0})
    errors: list = []

    def done(err, msg):
        errors.append(err)

    p.produce(topic, b"x" * 100_000, on_delivery=done)
    assert p.flush(15) == 0
    p.produce(topic, b"y" * 1000, on_delivery=done)  # a batch of its own
    assert p.flush(15) == 0
    codes = sorted(e.code() if e else 0 for e in errors)
    assert codes == [0, KafkaError.MSG_SIZE_TOO_LARGE], errors
    got = consume(broker.bootstrap, topic, 1)
    assert [m.value() for m in got] == [b"y" * 1000]


def _java(libs, *args, timeout: float = 120) -> tuple[int, str]:
    import subprocess

    out = subprocess.run(["java", "-Xmx256m", "-cp", f"{libs}/*", *args], capture_output=True,
                         text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


@pytest.mark.java
def test_java_consumer_groups_and_admin_tools(broker, tmp_path):
    """Kafka's kafka-consumer-groups (describe, state, reset-offsets, delete-offsets,
    delete), kafka-configs --alter and kafka-delete-records against camus. Before issue 17
    the last four ended in UnsupportedVersion errors."""
    import json

    from .test_kcat_and_java import kafka_libs

    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    from .test_groups_and_restart import GROUP_CONF, produce

    topic, group = unique("jcg"), unique("jg")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(10)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **GROUP_CONF})
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 20
    while got < 10 and time.monotonic() < deadline:
        m = c.poll(0.2)
        got += m is not None and not m.error()
    c.commit(asynchronous=False)
    c.close()  # the group is Empty now, its offsets kept

    cg = ["org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
          broker.bootstrap, "--group", group]
    rc, out = _java(libs, *cg, "--describe")
    assert rc == 0 and "has no active members" in out, out
    row = next(line.split() for line in out.splitlines() if line.startswith(group))
    assert row[:6] == [group, topic, "0", "10", "10", "0"], out
    rc, out = _java(libs, *cg, "--describe", "--state")
    assert rc == 0 and "Empty" in out, out
    rc, out = _java(libs, *cg, "--reset-offsets", "--to-offset", "3", "--topic", topic, "--execute")
    assert rc == 0 and any(line.split()[:4] == [group, topic, "0", "3"] for line in out.splitlines()), out
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 3
    c.close()
    rc, out = _java(libs, "kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap,
                    "--alter", "--entity-type", "topics", "--entity-name", topic,
                    "--add-config", "retention.ms=1000000")
    assert rc == 0 and f"Completed updating config for topic {topic}" in out, out
    rc, out = _java(libs, "kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap,
                    "--describe", "--entity-type", "topics", "--entity-name", topic)
    assert "retention.ms=1000000" in out, out
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 4}]}))
    rc, out = _java(libs, "org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server",
                    broker.bootstrap, "--offset-json-file", str(spec))
    assert rc == 0 and f"partition: {topic}-0\tlow_watermark: 4" in out, out
    rc, out = _java(libs, *cg, "--delete-offsets", "--topic", topic)
    assert rc == 0 and any(line.split()[:3] == [topic, "0", "Successful"]
                           for line in out.splitlines()), out
    rc, out = _java(libs, *cg, "--delete")
    assert rc == 0 and f"Deletion of requested consumer groups ('{group}') was successful" in out, out
    rc, out = _java(libs, *cg, "--describe")
    assert f"GroupIdNotFoundException: Group {group} not found." in out, out  # as Kafka 4.3


def test_list_offsets_of_records_with_old_timestamps(broker):
    """confluent-kafka's own test_list_offsets: three records stamped in 2001, in one batch.
    They stay readable (Kafka checks time retention every 5 minutes; camus dropped them at
    once), and MAX_TIMESTAMP names the record with the newest timestamp, not the batch's
    last offset (Kafka >= 3.8)."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic = unique("oldts")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100})
    base = 1_000_000_000
    for value, dt in (("Message-1", 100), ("Message-2", 400), ("Message-3", 200)):
        p.produce(topic, value, partition=0, timestamp=base + dt)
    assert p.flush(10) == 0
    time.sleep(1.5)  # several housekeeping ticks
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)
    for kwargs in ({}, {"isolation_level": IsolationLevel.READ_COMMITTED}):
        for spec, want in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 3),
                           (OffsetSpec.max_timestamp(), 1),
                           (OffsetSpec.for_timestamp(base + 150), 1)):
            got = a.list_offsets({tp: spec}, **kwargs)[tp].result()
            assert got.offset == want, (type(spec).__name__, got.offset)
    assert [m.value() for m in consume(broker.bootstrap, topic, 3)] == [
        b"Message-1", b"Message-2", b"Message-3"]


def test_authorized_operations_when_asked(broker):
    """confluent-kafka's describe tests (test_describe_operations) ask for authorized
    operations and expect a non-empty list; Kafka without an authorizer answers every
    operation the resource type supports. Not asked: None."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient

    topic, group = unique("authops"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    c.poll(3)
    c.close()
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    for asked in (False, True):
        t = a.describe_topics(TopicCollection([topic]), include_authorized_operations=asked,
                              request_timeout=10)[topic].result()
        cl = a.describe_cluster(include_authorized_operations=asked, request_timeout=10).result()
        g = a.describe_consumer_groups([group], include_authorized_operations=asked,
                                       request_timeout=10)[group].result()
        if not asked:
            assert t.authorized_operations is cl.authorized_operations is None
            assert g.authorized_operations is None
            continue
        assert AclOperation.READ in t.authorized_operations
        assert AclOperation.DELETE in t.authorized_operations
        assert AclOperation.ALTER in cl.authorized_operations
        assert AclOperation.IDEMPOTENT_WRITE in cl.authorized_operations
        assert set(g.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE,
                                                AclOperation.DELETE}


def test_list_offsets_every_special_timestamp(broker):
    """The Java admin's OffsetSpec.latestTiered() (-5, ListOffsets v9+) failed with
    UNSUPPORTED_VERSION; Kafka without tiered storage answers offset -1. Here through
    kafka-python's admin, which sends the sentinels as they are."""
    from kafka.protocol.consumer.offsets import OffsetSpec

    from kafka import TopicPartition as KafkaTopicPartition

    from .test_kafka_python import admin

    topic = unique("specs")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        p.produce(topic, b"x", partition=0)
    assert p.flush(10) == 0
    a = admin(broker)
    try:
        tp = KafkaTopicPartition(topic, 0)
        got = {spec: a.list_partition_offsets({tp: spec})[tp].offset for spec in (
            OffsetSpec.EARLIEST, OffsetSpec.LATEST, OffsetSpec.EARLIEST_LOCAL,
            OffsetSpec.LATEST_TIERED)}
    finally:
        a.close()
    assert got == {OffsetSpec.EARLIEST: 0, OffsetSpec.LATEST: 3, OffsetSpec.EARLIEST_LOCAL: 0,
                   OffsetSpec.LATEST_TIERED: -1}


def test_admin_removes_a_static_member_by_instance_id(broker):
    """LeaveGroup v3+ naming a static member by group.instance.id alone (the Java admin's
    removeMembersFromConsumerGroup, kafka-python's remove_group_members) removes it, as
    Kafka; an unknown instance is UNKNOWN_MEMBER_ID."""
    from kafka.admin import MemberToRemove
    from kafka.errors import NoError, UnknownMemberIdError

    from .test_groups_and_restart import GROUP_CONF
    from .test_kafka_python import admin

    topic, group = unique("static"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 1, 1))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "group.instance.id": "inst-1", **GROUP_CONF})
    assigned: list = []
    c.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))
    deadline = time.monotonic() + 20
    while not assigned and time.monotonic() < deadline:
        c.poll(0.2)
    assert assigned
    a = admin(broker)
    try:
        gone, unknown = MemberToRemove(group_instance_id="inst-1"), MemberToRemove(
            group_instance_id="nobody")
        result = a.remove_group_members(group, [gone, unknown])
        assert result == {"inst-1": NoError, "nobody": UnknownMemberIdError}
        desc = a.describe_groups([group])[group]
        assert desc["members"] == [] and desc["group_state"] == "Empty"
    finally:
        a.close()
        c.close()


def test_static_member_restart_keeps_the_generation_and_the_others_assignment(broker):
    """Kafka's static membership (KIP-345): a static member that restarts within its session
    takes its old assignment back without a rebalance, so the other members keep consuming
    undisturbed (camus rebalanced the whole group; VerifiableConsumer --group-instance-id
    showed the other member revoking and re-assigning)."""
    from .test_groups_and_restart import GROUP_CONF

    topic, group = unique("static2"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 2, 1))

    def member(instance):
        events: list = []
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **GROUP_CONF,
                      "session.timeout.ms": 30000, "group.instance.id": instance})
        c.subscribe([topic], on_assign=lambda _c, p: events.append(("assign", len(p))),
                    on_revoke=lambda _c, p: events.append(("revoke", len(p))))
        return c, events

    a, a_events = member("a")
    b, _ = member("b")

    def settled():
        a.poll(0.05)
        b.poll(0.05)
        return len(a.assignment()) == 1 and len(b.assignment()) == 1

    assert wait_until(settled, 30)
    g = broker_group(broker.bootstrap, group)
    b.close()  # a static member sends no LeaveGroup
    before = list(a_events)
    b2, b2_events = member("b")
    try:
        assert wait_until(lambda: (a.poll(0.05), b2.poll(0.05), len(b2.assignment()) == 1)[2], 15)
        for _ in range(20):  # give a rebalance, if one were started, time to reach a
            a.poll(0.05)
        assert a_events == before, a_events
        assert len(a.assignment()) == 1
        assert broker_group(broker.bootstrap, group) == g  # same state, same member count
    finally:
        a.close()
        b2.close()


def broker_group(bootstrap, group):
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": bootstrap})
    d = a.describe_consumer_groups([group])[group].result(10)
    return d.state, sorted(m.group_instance_id for m in d.members)


def test_describe_unknown_group_v6_is_group_id_not_found(broker):
    """DescribeGroups v6 (KIP-1043, Kafka 4.0) answers an unknown group with
    GROUP_ID_NOT_FOUND and a message, not just state Dead; older versions keep Dead."""
    from .test_kafka_python import admin

    a = admin(broker)
    missing = unique("nogroup")
    try:
        desc = a.describe_groups([missing])[missing]
    finally:
        a.close()
    assert "GroupIdNotFound" in desc["error"] and "not found" in desc["error"], desc
    assert desc["group_state"] == "Dead"


def test_metadata_for_an_illegal_topic_name_is_invalid_topic(broker):
    """Metadata allowing auto-creation of a name Kafka cannot create answers
    INVALID_TOPIC_EXCEPTION, as Kafka, not UNKNOWN_TOPIC_OR_PARTITION (which clients retry)."""
    p = Producer({"bootstrap.servers": broker.bootstrap})  # producers allow auto-creation
    assert p.list_topics("bad name!", timeout=10).topics["bad name!"].error.code() == \
        KafkaError.TOPIC_EXCEPTION
    fine = unique("auto")
    assert p.list_topics(fine, timeout=10).topics[fine].error is None


def test_replaced_static_member_is_fenced_not_rejoined(broker):
    """Two consumers configured with one group.instance.id: the later one replaces the
    earlier, whose heartbeat then gets FENCED_INSTANCE_ID (fatal in clients), as Kafka.
    UNKNOWN_MEMBER_ID made it rejoin and fence its replacement in turn, back and forth."""
    from .test_groups_and_restart import GROUP_CONF

    topic, group = unique("fence"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 2, 1))
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, **GROUP_CONF,
            "session.timeout.ms": 30000, "heartbeat.interval.ms": 300,
            "group.instance.id": "dup"}
    errors: list = []
    a = Consumer(conf)
    a.subscribe([topic])

    def poll_a():
        m = a.poll(0.05)
        if m is not None and m.error():
            errors.append(m.error())

    assert wait_until(lambda: (poll_a(), len(a.assignment()) == 2)[1], 15)
    b = Consumer(conf)
    b.subscribe([topic])
    try:
        assert wait_until(lambda: (poll_a(), b.poll(0.05), any(
            e.code() == KafkaError._FATAL and "fenced" in e.str() for e in errors))[2], 15), errors
        for _ in range(30):
            poll_a()
            b.poll(0.05)
        assert len(b.assignment()) == 2
        assert broker_group(broker.bootstrap, group)[1] == ["dup"]
    finally:
        b.close()
        a.close()
