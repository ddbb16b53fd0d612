"""Exactly once across crashes: kill -9 of a Kafka broker and of a camus instance while
200,000 records are produced, a view created while they flow, a broker and an instance
restarted; then every view holds exactly the matching source records once (count and
checksum over source partition, offset and value, and source order per partition), and
every record the cluster acknowledged is in the source topic.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from shim.cluster.catalog import group_id  # noqa: E402

from .conftest import camus, unique, wait_until  # noqa: E402
from .kafka_io import caught_up, create_topic, read_all  # noqa: E402
from .test_materialise import check_view, expected  # noqa: E402

pytestmark = pytest.mark.java

RECORDS = 200_000
RATE = 8_000  # records a second the producer aims at: ~25 s, so the events fall inside it
SCHEMA = "stock:str8=$.stock,price:u32=$.price,side:str1=header:side"
STOCKS = ["GOOGL", "AAPL", "MSFT", "AMZN", "IBM"]


def members(bootstrap: str, group: str) -> int:
    """Members of `group` holding at least one partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        desc = admin.describe_consumer_groups([group])[group].result(10)
    except Exception:  # noqa: BLE001 - not formed yet
        return 0
    return sum(1 for m in desc.members if m.assignment.topic_partitions)


class Produce(threading.Thread):
    """RECORDS records at about RATE a second, acks=all and idempotent, noting every record
    the cluster acknowledged: (partition, offset, value)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 10,
                                  "delivery.timeout.ms": 180_000})
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list[str] = []
        self.sent = 0
        self.error: BaseException | None = None

    def _report(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed.append(err.str())

    def run(self) -> None:
        try:
            rng = random.Random(27)
            start = time.monotonic()
            for i in range(RECORDS):
                doc = {"n": i, "stock": rng.choice(STOCKS), "price": rng.randrange(1000)}
                while True:
                    try:
                        self.producer.produce(self.topic, json.dumps(doc).encode(),
                                              headers=[("side", rng.choice([b"B", b"S"]))],
                                              on_delivery=self._report)
                        break
                    except BufferError:
                        self.producer.poll(0.05)
                self.sent = i + 1
                if i % 500 == 499:
                    self.producer.poll(0)
                    ahead = (i + 1) / RATE - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
            left = self.producer.flush(240)
            assert left == 0, f"{left} records neither acknowledged nor failed after 240 s"
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test
            self.error = exc


def test_kill_broker_and_instance_during_produce(cluster, materialisers):
    b = cluster.bootstrap
    dep, src = unique("dep"), unique("flow")
    create_topic(b, src, 4)
    assert camus("cluster", "schema", "set", src, SCHEMA, "--kafka", b,
                 "--deployment", dep).returncode == 0
    views = {unique("high"): "price > 700", unique("buys"): 'side == "B" and price < 300'}
    late_name, late_filter = unique("late"), 'stock == "GOOGL" or price < 50'
    for name, text in views.items():
        made = camus("cluster", "view", "create", name, "--source", src, "--filter", text,
                     "--kafka", b, "--deployment", dep)
        assert made.returncode == 0, made.stderr
    instances = {n: materialisers(b, dep, n) for n in ("a", "b")}
    for name in views:
        wait_until(lambda: members(b, group_id(dep, name)) == 2, 60,
                   f"both instances to hold partitions of {name}")

    # Kill the broker leading the source's partition 0 (a leader, so the producer and the
    # instances must move), and an instance; restart both later, the instance under its
    # own name (its transactional ids fence what its killed self left).
    md = AdminClient({"bootstrap.servers": b}).list_topics(src, timeout=30)
    victim = md.topics[src].partitions[0].leader
    producer = Produce(b, src)
    events = [
        (40_000, "kill -9 broker", lambda: cluster.node(victim).kill()),
        (80_000, "kill -9 instance b", lambda: instances["b"].kill()),
        (110_000, "create a view", lambda: views.update({late_name: late_filter}) or camus(
            "cluster", "view", "create", late_name, "--source", src, "--filter", late_filter,
            "--kafka", cluster.bootstrap_alive(), "--deployment", dep)),
        (150_000, "restart the broker", lambda: cluster.restart(victim)),
        (170_000, "restart instance b", lambda: materialisers(b, dep, "b")),
    ]
    timeline = []
    began = time.monotonic()
    producer.start()
    for at, what, act in events:
        wait_until(lambda: producer.sent >= at or not producer.is_alive(), 300, what)
        result = act()
        if what == "create a view":
            assert result.returncode == 0, result.stderr
        timeline.append(f"{time.monotonic() - began:6.1f} s  {producer.sent:7d} sent: {what}")
    producer.join(400)
    assert producer.error is None, producer.error
    timeline.append(f"{time.monotonic() - began:6.1f} s  produce done: {len(producer.acked)} "
                    f"acknowledged, {len(producer.failed)} failed {producer.failed[:3]}")

    for name in views:
        wait_until(lambda: caught_up(b, group_id(dep, name), src), 300,
                   f"view {name} to catch up\n" + "\n".join(timeline))
    timeline.append(f"{time.monotonic() - began:6.1f} s  every view caught up")

    source = read_all(b, src)
    stored = {(r.partition, r.offset, r.value) for r in source}
    assert len(stored) == len(source)
    missing = [a for a in producer.acked if a not in stored]
    assert not missing, f"{len(missing)} acknowledged records are not in the source"
    assert len({r.value for r in source}) == len(source), "a record is in the source twice"
    for name, text in views.items():
        check_view(source, read_all(b, name), expected(SCHEMA, text, source))
    timeline.append(f"{time.monotonic() - began:6.1f} s  checked {len(source)} source records "
                    f"and {len(views)} views")
    print("\n".join(timeline))
