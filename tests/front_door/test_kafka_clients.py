"""Real Kafka clients through `camus serve --kafka` in front of a real Apache Kafka
(KAFKA_PEER): produce acknowledged with the client's own acks, idempotent and transactional
producers, consumer groups and commits, administration, and the records where a client of
the cluster finds them."""

from __future__ import annotations

import socket

import pytest

from kio.index import load_request_schema
from shim.protocol import ErrorCode, build
from shim.protocol.records import encode_batch, records_now
from tests.protocol.protocol_helpers import decode_response, encode_request

from .conftest import PEER, QUIET, consume, read_frame, unique, values

pytestmark = pytest.mark.skipif(not PEER, reason="set KAFKA_PEER=HOST:PORT to an Apache Kafka 4.3.1 broker")


def _create(bootstrap: str, topic: str, partitions: int = 1, **config) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1, config={k.replace("_", "."): str(v)
                                                                 for k, v in config.items()})
                         ])[topic].result(30)


def test_metadata_shows_camus_as_the_only_broker(door):
    from confluent_kafka.admin import AdminClient
    topic = unique("meta")
    _create(door.bootstrap, topic, 3)
    md = AdminClient({"bootstrap.servers": door.bootstrap, **QUIET}).list_topics(topic, timeout=30)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", door.port)]
    (camus,) = md.brokers
    assert {p.leader for p in md.topics[topic].partitions.values()} == {camus}
    # The cluster's own brokers are where the topic is.
    direct = AdminClient({"bootstrap.servers": PEER, **QUIET}).list_topics(topic, timeout=30)
    assert len(direct.topics[topic].partitions) == 3


def test_idempotent_acks_all_produce_and_a_consumer_group(door):
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic, group = unique("idem"), unique("group")
    _create(door.bootstrap, topic, 3)
    p = Producer({"bootstrap.servers": door.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, **QUIET})
    delivered = []
    for i in range(300):
        p.produce(topic, f"v{i}".encode(), key=str(i).encode(),
                  on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert p.flush(30) == 0
    assert all(err is None for err, _, _ in delivered) and len(delivered) == 300
    # Acknowledged means in the cluster: a client of the cluster reads every record there,
    # at the offsets camus reported.
    direct = consume({"bootstrap.servers": PEER}, topic, 300)
    assert [(pt, off) for pt, off, _ in direct] == sorted((pt, off) for _, pt, off in delivered)
    # A consumer group through camus: its commits are the cluster's.
    assert len(consume({"bootstrap.servers": door.bootstrap}, topic, 300, group=group)) == 300
    # A client of the cluster sees the group's commits there.
    direct = Consumer({"bootstrap.servers": PEER, "group.id": group, **QUIET})
    committed = direct.committed([TopicPartition(topic, i) for i in range(3)], 30)
    direct.close()
    assert sum(tp.offset for tp in committed) == 300


def test_transactions_commit_abort_and_offsets_in_the_transaction(door):
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic, source, group = unique("txn"), unique("txnsrc"), unique("txngroup")
    _create(door.bootstrap, topic, 2)
    _create(door.bootstrap, source, 1)
    p = Producer({"bootstrap.servers": door.bootstrap, "transactional.id": unique("tid"), **QUIET})
    p.init_transactions(30)
    # The group's offsets of `source` go in with the records (consume-transform-produce).
    c = Consumer({"bootstrap.servers": door.bootstrap, "group.id": group, **QUIET})
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"c{i}".encode(), partition=i % 2)
    p.send_offsets_to_transaction([TopicPartition(source, 0, 7)], c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"a{i}".encode(), partition=i % 2)
    p.send_offsets_to_transaction([TopicPartition(source, 0, 99)], c.consumer_group_metadata(), 30)
    p.flush(30)  # librdkafka's abort drops records not yet sent: these are to be in the log
    p.abort_transaction(30)
    assert [tp.offset for tp in c.committed([TopicPartition(source, 0)], 30)] == [7]
    c.close()
    for bootstrap in (door.bootstrap, PEER):  # through camus, and straight from the cluster
        committed = consume({"bootstrap.servers": bootstrap}, topic, 10,
                              **{"isolation.level": "read_committed"})
        assert values(committed) == sorted(f"c{i}".encode() for i in range(10))
    uncommitted = consume({"bootstrap.servers": door.bootstrap}, topic, 20,
                            **{"isolation.level": "read_uncommitted"})
    assert len(uncommitted) == 20, uncommitted


def test_the_consumer_group_protocol_of_kip_848(door):
    # group.protocol=consumer: ConsumerGroupHeartbeat to the group's coordinator, the
    # assignment computed by the cluster.
    from confluent_kafka import Producer
    topic, group = unique("kip848"), unique("g848")
    _create(door.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": door.bootstrap, **QUIET})
    for i in range(40):
        p.produce(topic, f"m{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    got = consume({"bootstrap.servers": door.bootstrap, "group.protocol": "consumer"}, topic, 40,
                  group=group)
    assert values(got) == sorted(f"m{i}".encode() for i in range(40))


def test_kafka_python_producers_consumer_group_and_admin(door):
    kafka = pytest.importorskip("kafka")
    topic, group = unique("kp"), unique("kpgroup")
    _create(door.bootstrap, topic, 2)
    p = kafka.KafkaProducer(bootstrap_servers=door.bootstrap, acks="all", enable_idempotence=True)
    for i in range(50):
        p.send(topic, f"i{i}".encode())
    p.flush(30)
    p.close()
    t = kafka.KafkaProducer(bootstrap_servers=door.bootstrap, transactional_id=unique("kptid"))
    t.init_transactions()
    t.begin_transaction()
    for i in range(5):
        t.send(topic, f"t{i}".encode(), partition=0)
    t.commit_transaction()
    t.begin_transaction()
    t.send(topic, b"aborted", partition=0)
    t.flush()
    t.abort_transaction()
    t.close()
    c = kafka.KafkaConsumer(topic, bootstrap_servers=door.bootstrap, group_id=group,
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            isolation_level="read_committed", consumer_timeout_ms=8000)
    values = [m.value for m in c]
    c.commit()
    c.close()
    assert sorted(values) == sorted([f"i{i}".encode() for i in range(50)]
                                    + [f"t{i}".encode() for i in range(5)])
    admin = kafka.KafkaAdminClient(bootstrap_servers=door.bootstrap)
    try:
        assert group in [g["group_id"] for g in admin.list_groups()]
        offsets = admin.list_group_offsets(group)[group]
        # The consumer read to the end: its commits are the partitions' end offsets.
        ends = kafka.KafkaConsumer(bootstrap_servers=PEER).end_offsets(list(offsets))
        assert {tp: o.offset for tp, o in offsets.items()} == ends
        assert sum(ends.values()) == 50 + 5 + 1 + 2  # records, the aborted one, two markers
        assert topic in admin.list_topics()
    finally:
        admin.close()


def _raw_produce(port: int, topic: str, acks: int):
    batch = encode_batch(records_now([(None, b"x")]))
    body = build(load_request_schema(0, 9), acks=acks, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}])
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(encode_request(0, 9, body, 5))
        _, answer, _ = decode_response(0, 9, read_frame(s))
    [[part]] = [t.partition_responses for t in answer.responses]
    return part


def test_the_cluster_acknowledges_with_the_clients_own_acks(door):
    # The acks field reaches the cluster as the client sent it: an invalid one gets the
    # cluster's INVALID_REQUIRED_ACKS, acks=all and acks=1 their offsets.
    topic = unique("acks")
    _create(door.bootstrap, topic, 1)
    assert _raw_produce(door.port, topic, 2).error_code == ErrorCode.invalid_required_acks
    assert [_raw_produce(door.port, topic, acks).base_offset for acks in (-1, 1)] == [0, 1]


def test_view_mistakes_get_the_embedded_brokers_answers_and_plain_topics_beside_them_are_created(door):
    # The views themselves, materialised, are tests/cluster/test_front_door_views.py's.
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": door.bootstrap, **QUIET})
    plain, orphan, half, typo = unique("plain"), unique("view"), unique("view"), unique("view")
    futures = admin.create_topics([
        NewTopic(plain, 1, 1),
        NewTopic(orphan, 1, 1, config={"camus.source": unique("nothing"), "camus.filter": "price > 1"}),
        NewTopic(half, 1, 1, config={"camus.source": plain}),
        NewTopic(typo, 1, 1, config={"camus.sorce": plain})])
    futures[plain].result(30)
    for name, says in ((orphan, "no such topic"), (half, "needs both camus.source and camus.filter"),
                       (typo, "unknown camus config 'camus.sorce'")):
        with pytest.raises(Exception) as refused:
            futures[name].result(60)
        error = refused.value.args[0]
        assert error.code() == ErrorCode.invalid_config and says in error.str(), error.str()
    topics = AdminClient({"bootstrap.servers": PEER, **QUIET}).list_topics(timeout=30).topics
    assert plain in topics and not {orphan, half, typo} & set(topics)


def test_requests_camus_does_not_forward_get_clear_answers(door):
    def ask(payload: bytes):
        with socket.create_connection(("127.0.0.1", door.port), timeout=20) as s:
            s.sendall(payload)
            return read_frame(s)

    versions = decode_response(18, 3, ask(encode_request(18, 3, build(
        load_request_schema(18, 3), client_software_name="t", client_software_version="1"), 1)))[1]
    keys = {k.api_key for k in versions.api_keys}
    assert {0, 1, 3, 10, 11, 22, 26} <= keys  # produce, fetch, metadata, groups, transactions
    assert not keys & {17, 36, 27, 76, 77, 78, 79}  # SASL, WriteTxnMarkers, share groups
    # SaslHandshake is not forwarded: UNSUPPORTED_VERSION, in the client's own format.
    answer = decode_response(17, 1, ask(encode_request(17, 1, build(
        load_request_schema(17, 1), mechanism="PLAIN"), 2)))[1]
    assert answer.error_code == ErrorCode.unsupported_version
    # A body that does not parse, and an API key nobody knows: the connection closes (as
    # Kafka does), and the front door keeps serving.
    assert ask(b"\x00\x00\x00\x0a\x00\x03\x00\x0c\x00\x00\x00\x03\xff\xff") is None
    assert ask(b"\x00\x00\x00\x08\x03\xe8\x00\x00\x00\x00\x00\x04") is None
    assert door.proc.poll() is None
    again = decode_response(18, 3, ask(encode_request(18, 3, build(
        load_request_schema(18, 3), client_software_name="t", client_software_version="1"), 3)))[1]
    assert again.error_code == ErrorCode.none


def test_every_version_of_the_answers_that_name_brokers_names_camus(door):
    """Metadata v0-13, FindCoordinator v0-6 and DescribeCluster v0-2, raw: camus is the only
    broker, the leader and the coordinator, at every version a client may pick."""
    topic = unique("versions")
    _create(door.bootstrap, topic, 2)

    def ask(api_key: int, version: int, **fields):
        with socket.create_connection(("127.0.0.1", door.port), timeout=20) as s:
            s.sendall(encode_request(api_key, version, build(load_request_schema(api_key, version),
                                                             **fields), version))
            correlation, body, _ = decode_response(api_key, version, read_frame(s))
        assert correlation == version
        return body

    camus = [("127.0.0.1", door.port)]
    for v in range(0, 14):
        md = ask(3, v, topics=[{"name": topic}], allow_auto_topic_creation=False)
        assert [(b.host, b.port) for b in md.brokers] == camus, v
        [t] = md.topics
        assert t.error_code == ErrorCode.none and len(t.partitions) == 2, v
        assert {p.leader_id for p in t.partitions} == {md.brokers[0].node_id}, v
        if v >= 1:
            assert md.controller_id == md.brokers[0].node_id
    for v in range(0, 7):
        fields = ({"coordinator_keys": [unique("g"), unique("g")], "key_type": 0} if v >= 4
                  else {"key": unique("g"), "key_type": 0})
        found = ask(10, v, **fields)
        entries = found.coordinators if v >= 4 else [found]
        assert [(c.error_code, c.host, c.port) for c in entries] == \
            [(ErrorCode.none, *camus[0])] * len(entries), v
    for v in range(0, 3):
        cluster = ask(60, v)
        assert [(b.host, b.port) for b in cluster.brokers] == camus, v


def test_broker_configs_through_camus(door):
    """camus's node id stands for a cluster broker: its configs are that broker's."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": door.bootstrap, **QUIET})
    (camus,) = admin.list_topics(timeout=30).brokers
    topic = unique("cfg")
    _create(door.bootstrap, topic, 1, retention_ms=123456)
    futures = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(camus)),
                                      ConfigResource(ResourceType.TOPIC, topic)])
    found = {res.name: f.result(30) for res, f in futures.items()}
    assert found[str(camus)]["log.retention.hours"].value == "1"  # the cluster broker's
    assert found[topic]["retention.ms"].value == "123456"
