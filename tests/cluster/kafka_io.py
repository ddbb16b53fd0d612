"""Reading and writing the test cluster with confluent-kafka, as any Kafka user would."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Row:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple

    def header(self, name: str) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(60)


def partitions_of(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return len(md.topics[topic].partitions)


def read_all(bootstrap: str, topic: str, timeout: float = 120.0,
             isolation: str = "read_committed") -> list[Row]:
    """Every record of `topic` a read_committed reader sees now, partition by partition
    in offset order (read until each partition reports its end)."""
    n = partitions_of(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "camus-test-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(n)])
        rows: dict[int, list[Row]] = {p: [] for p in range(n)}
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ended) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: partitions {sorted(set(range(n)) - ended)} "
                                     f"not read to their end in {timeout:g} s")
            for m in c.consume(10000, 0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        ended.add(m.partition())
                        continue
                    raise AssertionError(f"{topic}: {err.str()}")
                ended.discard(m.partition())
                rows[m.partition()].append(Row(m.partition(), m.offset(), m.key(), m.value(),
                                               tuple(m.headers() or ())))
        return [r for p in range(n) for r in rows[p]]
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "camus-test-reader"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions_of(bootstrap, topic))}
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets on `topic` (stable ones: a pending transaction's
    offsets count only once it is committed); -1001 where it has none."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p) for p in range(partitions_of(bootstrap, topic))]
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)],
                                            require_stable=True)[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def caught_up(bootstrap: str, group: str, topic: str) -> bool:
    """Whether the group has committed every record of `topic` there is now."""
    try:
        done = committed(bootstrap, group, topic)
        # A partition with no record has nothing to commit (its committed offset stays unset).
        return all(done.get(p, -1) == end or (end == 0 and done.get(p, -1) < 0)
                   for p, end in end_offsets(bootstrap, topic).items())
    except Exception:  # noqa: BLE001 - a coordinator moving after a kill: ask again
        return False
