"""ACLs on the cluster-admin, group-deletion, KIP-848 describe and transaction APIs, over
real sockets: each refuses a principal without the permission Kafka's KafkaApis checks, with
Kafka's error, and does its work once the ACL is granted. bob never gets an ACL here; alice
is granted what each step needs (this module has its own broker)."""

from __future__ import annotations

import struct
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (AclOperation, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)

from tests.broker.conftest import unique
from tests.broker.test_acls import (acl_broker, admin, conf, grant, kafka_error,  # noqa: F401 (fixture)
                                    make_topic, raw_login)
from tests.broker.test_bad_input import read_frame, request
from tests.protocol.protocol_helpers import decode_response

TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 29, 30, 31, 53


def ask(s, api_key: int, version: int, **fields):
    s.sendall(request(api_key, version, **fields))
    return decode_response(api_key, version, read_frame(s))[1]


def first_txn_state_error(s, txn: str) -> int:
    """DescribeTransactions v0's first error code, read by hand: the reader here refuses the
    -1 start time Kafka (and camus) answer for a transaction not in progress."""
    s.sendall(request(65, 0, transactional_ids=[txn]))
    frame = read_frame(s)
    # v0 is flexible: size, correlation id, tagged fields (none), throttle time, a one-byte
    # compact array length, then the first error code
    return struct.unpack_from(">h", frame, 14)[0]


def test_delete_records_needs_delete_on_the_topic(acl_broker):
    topic = unique("acl-dr")
    make_topic(acl_broker, topic)
    s = raw_login(acl_broker, "bob")
    answer = ask(s, 21, 2, topics=[{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}],
                 timeout_ms=5000)
    assert answer.topics[0].partitions[0].error_code == TOPIC_AUTH
    s.close()
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.DELETE)
    done = admin(acl_broker, "alice").delete_records([TopicPartition(topic, 0, 0)], request_timeout=15)
    assert next(iter(done.values())).result().low_watermark == 0


def test_alter_configs_need_alter_configs_on_the_topic_or_cluster(acl_broker):
    topic = unique("acl-cfg")
    make_topic(acl_broker, topic)

    def alter(user):
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
        return next(iter(admin(acl_broker, user).incremental_alter_configs(
            [res], request_timeout=15).values()))
    assert kafka_error(alter("bob")).code() == TOPIC_AUTH
    s = raw_login(acl_broker, "bob")  # broker configs: ALTER_CONFIGS on the cluster
    answer = ask(s, 44, 1, resources=[{"resource_type": 4, "resource_name": "0", "configs": []}],
                 validate_only=True)
    assert answer.responses[0].error_code == CLUSTER_AUTH
    s.close()
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.ALTER_CONFIGS)
    alter("alice").result()
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    found = next(iter(admin(acl_broker).describe_configs([res], request_timeout=15).values())).result()
    assert found["retention.ms"].value == "60000"


def test_cluster_apis_need_cluster_describe_or_alter(acl_broker):
    topic = unique("acl-cl")
    make_topic(acl_broker, topic)
    s = raw_login(acl_broker, "bob")
    logdirs = ask(s, 35, 4, topics=None)
    assert logdirs.error_code == CLUSTER_AUTH and logdirs.results == ()
    elect = ask(s, 43, 2, election_type=0, timeout=5000,
                topic_partitions=[{"topic": topic, "partitions": [0]}])
    assert elect.error_code == CLUSTER_AUTH
    assert elect.replica_election_results[0].partition_result[0].error_code == CLUSTER_AUTH
    assert ask(s, 46, 0, timeout_ms=5000, topics=None).error_code == CLUSTER_AUTH
    assert ask(s, 55, 2, topics=[]).error_code == CLUSTER_AUTH
    assert ask(s, 74, 1, resource_types=[]).error_code == CLUSTER_AUTH
    s.close()
    grant(acl_broker, "User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER,
          AclOperation.DESCRIBE_CONFIGS)  # ALTER implies DESCRIBE
    s = raw_login(acl_broker, "alice")
    logdirs = ask(s, 35, 4, topics=None)
    assert logdirs.error_code == 0 and topic in {t.name for t in logdirs.results[0].topics}
    elect = ask(s, 43, 2, election_type=0, timeout=5000,
                topic_partitions=[{"topic": topic, "partitions": [0]}])
    assert elect.replica_election_results[0].partition_result[0].error_code == 84  # not needed
    assert ask(s, 46, 0, timeout_ms=5000, topics=None).error_code == 0
    assert ask(s, 74, 1, resource_types=[]).error_code == 0
    s.close()


def test_describe_topic_partitions_hides_or_refuses_undescribable_topics(acl_broker):
    topic = unique("acl-dtp")
    make_topic(acl_broker, topic)
    s = raw_login(acl_broker, "bob")
    named = ask(s, 75, 0, topics=[{"name": topic}], response_partition_limit=100, cursor=None)
    assert [(t.name, t.error_code, t.partitions) for t in named.topics] == [(topic, TOPIC_AUTH, ())]
    listed = ask(s, 75, 0, topics=[], response_partition_limit=100, cursor=None)
    assert topic not in {t.name for t in listed.topics}
    s.close()
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    s = raw_login(acl_broker, "alice")
    named = ask(s, 75, 0, topics=[{"name": topic}], response_partition_limit=100, cursor=None)
    assert named.topics[0].error_code == 0 and len(named.topics[0].partitions) == 2
    assert named.topics[0].topic_authorized_operations == 1 << 8  # DESCRIBE only
    listed = ask(s, 75, 0, topics=[], response_partition_limit=100, cursor=None)
    assert topic in {t.name for t in listed.topics}
    s.close()


def test_delete_groups_and_consumer_group_describe_need_group_acls(acl_broker):
    group = unique("acl-grp")
    err = kafka_error(next(iter(admin(acl_broker, "bob").delete_consumer_groups(
        [group], request_timeout=15).values())))
    assert err.code() == GROUP_AUTH
    s = raw_login(acl_broker, "bob")
    described = ask(s, 69, 0, group_ids=[group], include_authorized_operations=True)
    assert described.groups[0].error_code == GROUP_AUTH
    s.close()
    grant(acl_broker, "User:alice", ResourceType.GROUP, group, AclOperation.DELETE)
    # Allowed: past the authorizer, the group is unknown (GROUP_ID_NOT_FOUND, 69).
    err = kafka_error(next(iter(admin(acl_broker, "alice").delete_consumer_groups(
        [group], request_timeout=15).values())))
    assert err.code() == 69
    s = raw_login(acl_broker, "alice")  # DELETE implies DESCRIBE
    described = ask(s, 69, 0, group_ids=[group], include_authorized_operations=True)
    assert described.groups[0].error_code == 69
    s.close()


def add_partition_error(s, txn: str, topic: str) -> int:
    answer = ask(s, 24, 3, v3_and_below_transactional_id=txn, v3_and_below_producer_id=1,
                 v3_and_below_producer_epoch=0,
                 v3_and_below_topics=[{"name": topic, "partitions": [0]}])
    return answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def add_offsets_error(s, txn: str, group: str) -> int:
    return ask(s, 25, 3, transactional_id=txn, producer_id=1, producer_epoch=0,
               group_id=group).error_code


def txn_offset_commit_error(s, txn: str, group: str, topic: str) -> int:
    answer = ask(s, 28, 3, transactional_id=txn, group_id=group, producer_id=1, producer_epoch=0,
                 generation_id=-1, member_id="", group_instance_id=None,
                 topics=[{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                         "committed_leader_epoch": -1,
                                                         "committed_metadata": None}]}])
    return answer.topics[0].partitions[0].error_code


def test_transaction_apis_need_transactional_id_group_and_topic_acls(acl_broker):
    topic, txn, group = unique("acl-txt"), unique("acl-txn"), unique("acl-txg")
    make_topic(acl_broker, topic)
    s = raw_login(acl_broker, "bob")
    assert add_partition_error(s, txn, topic) == TXN_AUTH
    assert add_offsets_error(s, txn, group) == TXN_AUTH
    assert ask(s, 26, 3, transactional_id=txn, producer_id=1, producer_epoch=0,
               committed=False).error_code == TXN_AUTH
    assert txn_offset_commit_error(s, txn, group, topic) == TXN_AUTH
    producers = ask(s, 61, 0, topics=[{"name": topic, "partition_indexes": [0]}])
    assert producers.topics[0].partitions[0].error_code == TOPIC_AUTH
    s.close()

    # alice may write the transactional id but not yet the topic, nor read the group.
    grant(acl_broker, "User:alice", ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE)
    s = raw_login(acl_broker, "alice")
    assert add_partition_error(s, txn, topic) == TOPIC_AUTH
    assert add_offsets_error(s, txn, group) == GROUP_AUTH
    assert txn_offset_commit_error(s, txn, group, topic) == GROUP_AUTH
    grant(acl_broker, "User:alice", ResourceType.GROUP, group, AclOperation.READ)
    assert txn_offset_commit_error(s, txn, group, topic) == TOPIC_AUTH  # no READ on the topic
    s.close()

    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    p = Producer({**conf(acl_broker, "alice"), "transactional.id": txn})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"v", partition=0)
    c = Consumer({**conf(acl_broker, "alice"), "group.id": group})
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], c.consumer_group_metadata(), 15)
    p.commit_transaction(15)
    c.close()
    committed = admin(acl_broker).list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])
    assert next(iter(committed.values())).result().topic_partitions[0].offset == 1

    s = raw_login(acl_broker, "alice")  # WRITE implies DESCRIBE on the id and the topic
    producers = ask(s, 61, 0, topics=[{"name": topic, "partition_indexes": [0]}])
    assert producers.topics[0].partitions[0].error_code == 0
    assert first_txn_state_error(s, txn) == 0
    listed = ask(s, 66, 0, state_filters=[], producer_id_filters=[])
    assert txn in {t.transactional_id for t in listed.transaction_states}
    s.close()
    s = raw_login(acl_broker, "bob")
    assert first_txn_state_error(s, txn) == TXN_AUTH
    listed = ask(s, 66, 0, state_filters=[], producer_id_filters=[])
    assert txn not in {t.transactional_id for t in listed.transaction_states}
    s.close()


def test_consumer_group_describe_hides_a_group_over_undescribable_topics(acl_broker):
    """Kafka 4: DESCRIBE on the group is not enough when its members subscribe to a topic
    the principal may not describe (TOPIC_AUTHORIZATION_FAILED for the group)."""
    topic, group = unique("acl-cgt"), unique("acl-cgg")
    make_topic(acl_broker, topic)
    c = Consumer({**conf(acl_broker, "admin"), "group.id": group, "group.protocol": "consumer"})
    c.subscribe([topic])
    grant(acl_broker, "User:alice", ResourceType.GROUP, group, AclOperation.DESCRIBE)
    s = raw_login(acl_broker, "alice")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the member has joined
            c.poll(0.2)
            described = ask(s, 69, 0, group_ids=[group], include_authorized_operations=False)
            if described.groups[0].error_code != 69:
                break
        assert described.groups[0].error_code == TOPIC_AUTH and described.groups[0].members == ()
        grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
        described = ask(s, 69, 0, group_ids=[group], include_authorized_operations=False)
        assert described.groups[0].error_code == 0
        assert [m.subscribed_topic_names for m in described.groups[0].members] == [(topic,)]
    finally:
        s.close()
        c.close()


def _injected_produce(s, topic: str, txn: str | None, pid: int, epoch: int, seq: int,
                      transactional: bool) -> int:
    """A Produce v9 of one record "evil" under someone else's producer id; its error code."""
    from shim.protocol.records import TRANSACTIONAL_BIT, Record, encode_batch
    batch = encode_batch([Record(0, int(time.time() * 1000), None, b"evil")], producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq,
                         attributes=TRANSACTIONAL_BIT if transactional else 0)
    answer = ask(s, 0, 9, transactional_id=txn, acks=-1, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}])
    return answer.responses[0].partition_responses[0].error_code


def test_no_one_produces_into_another_principals_transaction(acl_broker):
    """bob may write the topic but not alice's transactional id. Knowing her producer id,
    epoch and sequence (DescribeProducers), he cannot slip a record into her transaction:
    not under her transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka checks
    WRITE on it), not under his own (its producer id is not hers), not as a plain idempotent
    batch of her producer id, nor by bumping her producer id's epoch (InitProducerId). Her
    next record is stored, and read_committed sees only hers."""
    topic, txn, own = unique("acl-inj"), unique("acl-inj-txn"), unique("acl-inj-own")
    make_topic(acl_broker, topic)
    grant(acl_broker, "User:alice", ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE)
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE)
    # READ for DescribeProducers, as Kafka
    grant(acl_broker, "User:bob", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    grant(acl_broker, "User:bob", ResourceType.TRANSACTIONAL_ID, own, AclOperation.WRITE)
    p = Producer({**conf(acl_broker, "alice"), "transactional.id": txn})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"a0", partition=0)
    assert p.flush(15) == 0

    s = raw_login(acl_broker, "bob")
    state = ask(s, 61, 0, topics=[{"name": topic, "partition_indexes": [0]}]).topics[0]
    assert state.partitions[0].error_code == 0
    (victim,) = state.partitions[0].active_producers
    pid, epoch, seq = victim.producer_id, victim.producer_epoch, victim.last_sequence + 1
    assert _injected_produce(s, topic, txn, pid, epoch, seq, True) == TXN_AUTH
    assert ask(s, 22, 4, transactional_id=own, transaction_timeout=60000, producer_id=-1,
               producer_epoch=-1).error_code == 0
    assert _injected_produce(s, topic, own, pid, epoch, seq, True) == 49  # INVALID_PRODUCER_ID_MAPPING
    assert _injected_produce(s, topic, None, pid, epoch, seq, True) == 48  # INVALID_TXN_STATE
    assert _injected_produce(s, topic, None, pid, epoch, seq, False) == 48
    # Nor does an idempotent InitProducerId naming her producer id bump its epoch for him.
    bumped = ask(s, 22, 4, transactional_id=None, transaction_timeout=60000, producer_id=pid,
                 producer_epoch=epoch)
    assert bumped.error_code == 0 and bumped.producer_id != pid
    s.close()

    delivered = []
    p.produce(topic, b"a1", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    p.commit_transaction(15)
    assert delivered == [None]
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.READ)
    grant(acl_broker, "User:alice", ResourceType.GROUP, "*", AclOperation.READ)
    c = Consumer({**conf(acl_broker, "alice"), "group.id": unique("acl-inj-g"),
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while True:
            m = c.poll(15)
            assert m is not None, got
            if m.error():
                break
            got.append(m.value())
    finally:
        c.close()
    assert got == [b"a0", b"a1"]
