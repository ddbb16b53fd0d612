"""The admin APIs tools and AdminClients call (issue 17), with real clients over real sockets.

Before issue 17 each of these answered UNSUPPORTED_VERSION. One broker is the whole
cluster, so several answers are trivial, and are the ones Kafka 4.3.1 gives a one-broker
cluster (compared by hand against ../shared/peers/kafka/kafka.sh's broker).
"""

from __future__ import annotations

import json
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource, NewTopic, ResourceType)

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402

SCHEMA = "price:u32=$.price"


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, v, partition=partition)
        p.flush(10)  # one batch each, so log starts can fall between records
    assert p.flush(10) == 0


def _watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def test_delete_records_moves_the_log_start_and_survives_a_restart(camus_server, tmp_path):
    """confluent-kafka's delete_records: the low watermark moves, consumers from the
    beginning start there, a view follows its source, and the start survives a restart."""
    server = camus_server(tmp_path / "data")
    topic, view = unique("dr"), unique("drv")
    create(server.bootstrap, NewTopic(topic, 1, 1, config={"camus.schema": SCHEMA}))
    create(server.bootstrap, NewTopic(view, 1, 1, config={"camus.source": topic,
                                                          "camus.filter": "price > 0"}))
    _produce(server.bootstrap, topic, [json.dumps({"price": i + 1}).encode() for i in range(10)])
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    got = admin.delete_records([TopicPartition(topic, 0, 6)])
    assert [f.result(10).low_watermark for f in got.values()] == [6]
    assert _watermarks(server.bootstrap, topic) == (6, 10)
    assert [m.offset() for m in consume(server.bootstrap, topic, 4)] == [6, 7, 8, 9]
    assert wait_until(lambda: _watermarks(server.bootstrap, view)[0] == 6)
    with pytest.raises(KafkaException, match="OFFSET_OUT_OF_RANGE"):
        next(iter(admin.delete_records([TopicPartition(topic, 0, 11)]).values())).result(10)
    with pytest.raises(KafkaException, match="POLICY_VIOLATION"):  # a view follows its source
        next(iter(admin.delete_records([TopicPartition(view, 0, 8)]).values())).result(10)
    server.stop()
    server = camus_server(tmp_path / "data")
    assert _watermarks(server.bootstrap, topic) == (6, 10)
    assert [m.offset() for m in consume(server.bootstrap, view, 4)] == [6, 7, 8, 9]


def test_incremental_alter_configs_changes_a_views_filter_in_place(broker):
    """Issue 17: a view's filter changes without recreating it: same topic id, the
    records now matching, at their source offsets; a bad filter is refused with the
    parser's message and changes nothing."""
    topic, view = unique("src"), unique("view")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={"camus.schema": SCHEMA}))
    create(broker.bootstrap, NewTopic(view, 1, 1, config={"camus.source": topic,
                                                          "camus.filter": "price > 100"}))
    _produce(broker.bootstrap, topic, [json.dumps({"price": p}).encode()
                                       for p in (50, 150, 20, 300)])
    assert [m.offset() for m in consume(broker.bootstrap, view, 2)] == [1, 3]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    before = admin.describe_topics(
        confluent_kafka.TopicCollection([view]))[view].result(10).topic_id
    res = ConfigResource(ResourceType.TOPIC, view, incremental_configs=[
        ConfigEntry("camus.filter", "price < 100", incremental_operation=AlterConfigOpType.SET)])
    list(admin.incremental_alter_configs([res]).values())[0].result(10)
    assert [m.offset() for m in consume(broker.bootstrap, view, 2)] == [0, 2]
    _produce(broker.bootstrap, topic, [json.dumps({"price": p}).encode() for p in (1, 999)])
    assert [m.offset() for m in consume(broker.bootstrap, view, 3)] == [0, 2, 4]
    after = admin.describe_topics(
        confluent_kafka.TopicCollection([view]))[view].result(10).topic_id
    assert str(after) == str(before)
    bad = ConfigResource(ResourceType.TOPIC, view, incremental_configs=[
        ConfigEntry("camus.filter", "price >", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        list(admin.incremental_alter_configs([bad]).values())[0].result(10)
    configs = list(admin.describe_configs([ConfigResource(ResourceType.TOPIC, view)])
                   .values())[0].result(10)
    assert configs["camus.filter"].value == "price < 100"


def test_alter_configs_changes_retention_in_place(broker):
    """A topic's retention.bytes, changed by AlterConfigs, applies to its log at once: the
    oldest segments go and the log start moves; a bad value is INVALID_CONFIG."""
    topic = unique("ret")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={"segment.bytes": "100"}))
    _produce(broker.bootstrap, topic, [b"x" * 100 for _ in range(10)])
    assert _watermarks(broker.bootstrap, topic) == (0, 10)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.bytes": "100",
                                                                 "retention.bytes": "400"})
    list(admin.alter_configs([res]).values())[0].result(10)
    low, high = _watermarks(broker.bootstrap, topic)
    assert 0 < low < high == 10
    bad = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.bytes": "-5"})
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        list(admin.alter_configs([bad]).values())[0].result(10)
    configs = list(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
                   .values())[0].result(10)
    assert configs["retention.bytes"].value == "400"


def test_delete_groups_and_group_offsets(broker):
    """DeleteGroups: a group with members is NON_EMPTY_GROUP, an unknown one
    GROUP_ID_NOT_FOUND, an empty one goes with its offsets. OffsetDelete (kafka-python):
    a topic the active group subscribes to is GROUP_SUBSCRIBED_TO_TOPIC, others go."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    topic, other, group = unique("dg"), unique("dgo"), unique("g")
    create(broker.bootstrap, NewTopic(topic, 1, 1), NewTopic(other, 1, 1))
    _produce(broker.bootstrap, topic, [b"a", b"b"])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    assert wait_until(lambda: c.poll(0.2) is not None and c.assignment(), 20)
    c.commit(offsets=[TopicPartition(topic, 0, 1), TopicPartition(other, 0, 1)],
             asynchronous=False)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    missing = unique("nog")
    futures = admin.delete_consumer_groups([group, missing])
    with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
        futures[group].result(10)
    with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND"):
        futures[missing].result(10)
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        got = kp.delete_group_offsets(group, [KTP(topic, 0), KTP(other, 0)])
        assert {tp.topic: err.__name__ for tp, err in got.items()} == {
            topic: "GroupSubscribedToTopicError", other: "NoError"}
    finally:
        kp.close()
    committed = c.committed([TopicPartition(topic, 0), TopicPartition(other, 0)], timeout=10)
    assert [tp.offset for tp in committed] == [1, confluent_kafka.OFFSET_INVALID]
    c.close()
    admin.delete_consumer_groups([group])[group].result(10)
    listed = admin.list_consumer_groups().result(10)
    assert group not in {g.group_id for g in listed.valid}


def test_kafka_python_cluster_calls_answer_as_a_one_broker_kafka(broker):
    """kafka-python 3's admin calls that describe the cluster's replicas, log dirs and
    quorum get the answers Kafka 4.3.1 gives a one-broker cluster."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.errors import LogDirNotFoundError, NoError, NoReassignmentInProgressError
    from kafka.errors import InvalidReplicationAssignmentError

    topic = unique("kp")
    create(broker.bootstrap, NewTopic(topic, 3, 1))
    _produce(broker.bootstrap, topic, [b"v1", b"v2"])
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        assert a.get_broker_version_data(0).broker_version == (4, 3)
        dirs = a.describe_log_dirs()[0]["log_dirs"]
        assert [d["log_dir"] for d in dirs] == ["memory"]
        sizes = {p["partition_index"]: p["partition_size"]
                 for t in dirs[0]["topics"] if t["name"] == topic for p in t["partitions"]}
        assert sorted(sizes) == [0, 1, 2] and sizes[0] > 0 == sizes[1]
        assert a.alter_replica_log_dirs({(topic, 0, 0): "memory"}) != {}
        assert list(a.alter_replica_log_dirs({(topic, 0, 0): "memory"}).values()) == [NoError]
        assert list(a.alter_replica_log_dirs({(topic, 0, 0): "/elsewhere"}).values()) == [
            LogDirNotFoundError]
        for election in (0, 1):  # preferred, unclean: the one replica leads already
            res = a.elect_leaders(election, {topic: [0, 1]}, raise_errors=False)
            assert [(r.topic, p.partition_id, p.error_code)
                    for r in res.replica_election_results for p in r.partition_result] == [
                (topic, 0, 84), (topic, 1, 84)]
        got = a.alter_partition_reassignments({KTP(topic, 0): [0], KTP(topic, 1): [0, 1],
                                               KTP(topic, 2): None})
        assert got == {KTP(topic, 0): None, KTP(topic, 1): InvalidReplicationAssignmentError,
                       KTP(topic, 2): NoReassignmentInProgressError}
        assert a.list_partition_reassignments() == {}
        quorum = a.describe_metadata_quorum()
        part = quorum["topics"][0]["partitions"][0]
        assert (quorum["topics"][0]["topic_name"], part["leader_id"]) == ("__cluster_metadata", 0)
        assert [v["replica_id"] for v in part["current_voters"]] == [0]
        resources = a.list_config_resources()
        assert topic in resources["topic"] and resources["broker"] == ["0"]
        page = a.describe_topic_partitions([topic, "no-such-topic"], response_partition_limit=2)
        assert [(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                for t in page["topics"]] == [(topic, 0, [0, 1])]
        assert page["next_cursor"] == {"topic_name": topic, "partition_index": 2}
        page = a.describe_topic_partitions([topic, "no-such-topic"], cursor=page["next_cursor"])
        assert [(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                for t in page["topics"]] == [(topic, 0, [2]), ("no-such-topic", 3, [])]
    finally:
        a.close()


@pytest.mark.java
def test_java_admin_tools_for_log_dirs_quorum_elections_and_reassignments(broker):
    """kafka-log-dirs, kafka-metadata-quorum, kafka-leader-election, kafka-reassign-partitions
    --list and kafka-topics --describe (DescribeTopicPartitions in Kafka 4) against camus."""
    from .test_conformance import _java
    from .test_kcat_and_java import kafka_libs

    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    topic = unique("jt")
    create(broker.bootstrap, NewTopic(topic, 2, 1))
    _produce(broker.bootstrap, topic, [b"x"])
    b = ["--bootstrap-server", broker.bootstrap]
    rc, out = _java(libs, "org.apache.kafka.tools.LogDirsCommand", *b, "--describe",
                    "--topic-list", topic)
    doc = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert rc == 0 and [d["logDir"] for d in doc["brokers"][0]["logDirs"]] == ["memory"], out
    rc, out = _java(libs, "org.apache.kafka.tools.MetadataQuorumCommand", *b, "describe",
                    "--status")
    assert rc == 0 and "LeaderId:               0" in out, out
    rc, out = _java(libs, "org.apache.kafka.tools.LeaderElectionCommand", *b,
                    "--election-type", "preferred", "--topic", topic, "--partition", "0")
    assert rc == 0 and f"Valid replica already elected for partitions {topic}-0" in out, out
    rc, out = _java(libs, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", *b,
                    "--list")
    assert rc == 0 and "No partition reassignments found." in out, out
    rc, out = _java(libs, "org.apache.kafka.tools.TopicCommand", *b, "--describe", "--topic", topic)
    assert rc == 0 and f"Topic: {topic}\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0" in out, out
