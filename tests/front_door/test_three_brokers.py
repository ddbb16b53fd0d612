"""The front door in front of a three-broker Apache Kafka cluster, where a request's
partitions, groups and transactional ids belong to different brokers: camus splits each
request by owner and merges the answers, and a broker killed with -9 under an idempotent
producer costs no record and duplicates none.

The cluster is the session's (tests/conftest.py: tests/cluster/kafka_cluster.py's three
KRaft nodes, replication factor 3, min.insync.replicas 2), shared with tests/cluster; these
tests skip where it cannot run (no java, no Kafka jars).
"""

from __future__ import annotations

import time

import pytest

from .conftest import QUIET, consume, front_door, unique, values


@pytest.fixture(scope="module")
def door(kafka_cluster):
    s = front_door(kafka_cluster.bootstrap)
    yield s
    s.stop()


def _topic(cluster, partitions: int = 6) -> str:
    """A topic whose partitions' leaders are on every broker."""
    from confluent_kafka.admin import AdminClient, NewTopic
    name = unique("spread")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_alive(), **QUIET})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics[name]
        if len(md.partitions) == partitions and all(p.leader >= 0 for p in md.partitions.values()):
            leaders = {p.leader for p in md.partitions.values()}
            assert len(leaders) == len(cluster.nodes), leaders
            return name
        time.sleep(0.2)
    raise AssertionError(f"{name}: partitions without leaders")


def test_requests_split_by_leader_and_coordinator(cluster, door):
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    topic = _topic(cluster)
    p = Producer({"bootstrap.servers": door.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 20, **QUIET})
    acked = []
    for i in range(600):  # one Produce request carries partitions of all three leaders
        p.produce(topic, f"v{i}".encode(), key=str(i).encode(),
                  on_delivery=lambda err, msg: acked.append((err, msg.partition(), msg.offset())))
    assert p.flush(60) == 0
    assert all(err is None for err, _, _ in acked) and len(acked) == 600
    # One Fetch through camus asks three brokers; a client of the cluster agrees with it.
    through = consume({"bootstrap.servers": door.bootstrap}, topic, 600)
    direct = consume({"bootstrap.servers": cluster.bootstrap}, topic, 600)
    assert through == direct and len(through) == 600
    assert sorted((pt, off) for pt, off, _ in through) == sorted((pt, off) for _, pt, off in acked)
    # Watermarks (ListOffsets) per partition, whichever broker leads it.
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": door.bootstrap, "group.id": unique("w"), **QUIET})
    ends = [c.get_watermark_offsets(TopicPartition(topic, i), timeout=30)[1] for i in range(6)]
    c.close()
    assert sum(ends) == 600
    # Groups whose coordinators differ: listing asks every broker, describing splits.
    groups = [unique("grp") for _ in range(8)]
    for g in groups:
        consume({"bootstrap.servers": door.bootstrap}, topic, 600, group=g)
    admin = AdminClient({"bootstrap.servers": door.bootstrap, **QUIET})
    listed = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert set(groups) <= listed
    described = {g: f.result(30) for g, f in admin.describe_consumer_groups(groups).items()}
    assert {d.group_id for d in described.values()} == set(groups)
    direct_admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    coordinators = {direct_admin.describe_consumer_groups([g])[g].result(30).coordinator.id
                    for g in groups}
    assert len(coordinators) > 1, "the groups landed on one coordinator: nothing was split"


def test_transactions_whose_coordinators_differ(cluster, door):
    from confluent_kafka import Producer
    topic = _topic(cluster)
    for n in range(4):
        p = Producer({"bootstrap.servers": door.bootstrap, "transactional.id": unique(f"t{n}"), **QUIET})
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(30):
            p.produce(topic, f"{n}-{i}".encode(), partition=i % 6)
        p.commit_transaction(60)
        p.begin_transaction()
        p.produce(topic, b"aborted", partition=n)
        p.abort_transaction(60)
    got = values(consume({"bootstrap.servers": door.bootstrap}, topic, 120, timeout=60,
                         **{"isolation.level": "read_committed"}))
    assert got == sorted(f"{n}-{i}".encode() for n in range(4) for i in range(30))


def test_a_broker_killed_under_an_idempotent_producer(cluster, door):
    from confluent_kafka import Producer
    topic = _topic(cluster)
    p = Producer({"bootstrap.servers": door.bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 120000, **QUIET})
    acked, failed = [], []

    def report(err, msg):
        (failed if err else acked).append(err or msg.value())
    for i in range(3000):
        p.produce(topic, f"r{i}".encode(), on_delivery=report)
        if i == 1000:
            p.flush(60)
            cluster.node(2).kill()  # kill -9: its partitions' leadership moves to the others
        p.poll(0)
    assert p.flush(120) == 0
    assert failed == [] and len(acked) == 3000
    got = values(consume({"bootstrap.servers": door.bootstrap}, topic, 3000, timeout=90))
    assert got == sorted(f"r{i}".encode() for i in range(3000))  # each exactly once


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_a_busy_partition_beside_idle_ones_on_other_brokers(cluster, door, client):
    """Records stream into one partition while the others, led by other brokers, stay
    mostly idle: each Fetch through camus is answered as soon as one leader has records,
    the quiet leaders' long polls parked. Every record arrives once, in order."""
    import threading

    from confluent_kafka import Producer
    topic = _topic(cluster)
    sent: list[tuple[int, bytes]] = []

    def stream():
        # Idempotent, so that the partitions hold the records in the order sent even when
        # leadership still moves after an earlier test's kill (retries would reorder).
        p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0,
                      "enable.idempotence": True, **QUIET})
        for i in range(300):
            partition = 0 if i % 10 else 1 + (i // 10) % 5
            p.produce(topic, f"s{i}".encode(), partition=partition)
            sent.append((partition, f"s{i}".encode()))
            p.poll(0)
            time.sleep(0.005)
        p.flush(30)

    got: list[tuple[int, int, bytes]] = []
    if client == "kafka-python":
        kafka = pytest.importorskip("kafka")
        c = kafka.KafkaConsumer(bootstrap_servers=door.bootstrap, fetch_max_wait_ms=1000,
                                enable_auto_commit=False)
        parts = [kafka.TopicPartition(topic, i) for i in range(6)]
        c.assign(parts)
        c.seek_to_beginning(*parts)
        producer = threading.Thread(target=stream)
        producer.start()
        deadline = time.monotonic() + 90
        while len(got) < 300 and time.monotonic() < deadline:
            for tp, records in c.poll(500).items():
                got += [(tp.partition, m.offset, m.value) for m in records]
        c.close()
    else:
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": door.bootstrap, "group.id": unique("busy"),
                      "fetch.wait.max.ms": 1000, **QUIET})
        c.assign([TopicPartition(topic, i, 0) for i in range(6)])
        producer = threading.Thread(target=stream)
        producer.start()
        deadline = time.monotonic() + 90
        while len(got) < 300 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append((m.partition(), m.offset(), m.value()))
        c.close()
    producer.join()
    for partition in range(6):
        mine = [(offset, value) for p, offset, value in got if p == partition]
        assert [offset for offset, _ in mine] == list(range(len(mine))), partition  # in order, once
        assert [value for _, value in mine] == [v for p, v in sent if p == partition]
