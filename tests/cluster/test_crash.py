"""Exactly once across crashes: kill -9 of a Kafka broker and of a camus instance while
200,000 records are produced, a view created while they flow, a broker and an instance
restarted; then every view holds exactly the matching source records once (count and
checksum over source partition, offset and value, and source order per partition), and
every record the cluster acknowledged is in the source topic.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from shim.cluster.catalog import group_id  # noqa: E402

from .conftest import camus, source_with_views, unique, wait_until  # noqa: E402
from .kafka_io import caught_up, read_all  # noqa: E402
from .test_materialise import check_view, expected  # noqa: E402

pytestmark = pytest.mark.java

RECORDS = 200_000
RATE = 5_000  # records a second the producer aims at: ~40 s, so the events fall inside it
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
    """`records` records at about `rate` a second, acks=all and idempotent, noting every record
    the cluster acknowledged: (partition, offset, value)."""

    def __init__(self, bootstrap: str, topic: str, records: int = RECORDS, rate: int = RATE
                 ) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.records, self.rate = records, rate
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
            for i in range(self.records):
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
                    ahead = (i + 1) / self.rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
            left = self.producer.flush(240)
            assert left == 0, f"{left} records neither acknowledged nor failed after 240 s"
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test
            self.error = exc


def test_kill_broker_and_instance_during_produce(cluster, materialisers):
    b = cluster.bootstrap
    dep, src = unique("dep"), unique("flow")
    views = {unique("high"): "price > 700", unique("buys"): 'side == "B" and price < 300'}
    late_name, late_filter = unique("late"), 'stock == "GOOGL" or price < 50'
    source_with_views(b, dep, src, 4, SCHEMA, views)
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
    took_over: dict[str, int] = {}  # where instance a's log stood when b was killed

    def kill_b() -> None:
        took_over["at"] = len(instances["a"].stderr())
        instances["b"].kill()

    def create_late() -> None:
        views[late_name] = late_filter
        made = camus("cluster", "view", "create", late_name, "--source", src, "--filter",
                     late_filter, "--kafka", cluster.bootstrap_alive(), "--deployment", dep)
        assert made.returncode == 0, made.stderr

    events = [
        (40_000, "kill -9 broker", lambda: cluster.node(victim).kill()),
        (70_000, "kill -9 instance b", kill_b),
        (100_000, "create a view", create_late),
        (130_000, "restart the broker", lambda: cluster.restart(victim)),
        (150_000, "restart instance b", lambda: instances.update(b=materialisers(b, dep, "b"))),
    ]
    timeline: list[str] = []
    began = time.monotonic()
    failures: list[BaseException] = []

    def at(what: str) -> str:
        return f"{time.monotonic() - began:6.1f} s {producer.sent:7d} sent: {what}"

    def fire(what: str, act) -> None:
        # Each event on its own thread: a restart takes seconds and must not hold back the
        # events after it, which are to happen while records still flow.
        timeline.append(at(what))
        try:
            act()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        timeline.append(at(f"{what}: done"))

    producer.start()
    threads = []
    for count, what, act in events:
        wait_until(lambda: producer.sent >= count or not producer.is_alive(), 300, what)
        threads.append(threading.Thread(target=fire, args=(what, act)))
        threads[-1].start()
    producer.join(400)
    for t in threads:
        t.join(300)
    assert not failures, failures
    assert producer.error is None, producer.error
    timeline.append(at(f"produce done: {len(producer.acked)} acknowledged, "
                       f"{len(producer.failed)} failed {producer.failed[:3]}"))
    timeline.sort()

    for name in views:
        wait_until(lambda: caught_up(b, group_id(dep, name), src), 300,
                   f"view {name} to catch up\n" + "\n".join(timeline))
    timeline.append(at("every view caught up"))
    for name in views:  # the restarted b holds partitions again, of the late view too
        wait_until(lambda: members(b, group_id(dep, name)) == 2, 60, f"b back in {name}")
    # Instance a took over b's partitions of the views b held when it was killed.
    after_kill = instances["a"].stderr()[took_over["at"]:]
    for name in views:
        if name != late_name:
            assert f"view {name}: instance a assigned source partitions [0, 1, 2, 3]" in after_kill

    source = read_all(b, src)
    stored = {(r.partition, r.offset, r.value) for r in source}
    assert len(stored) == len(source)
    missing = [a for a in producer.acked if a not in stored]
    assert not missing, f"{len(missing)} acknowledged records are not in the source"
    assert len({r.value for r in source}) == len(source), "a record is in the source twice"
    for name, text in views.items():
        check_view(source, read_all(b, name), expected(SCHEMA, text, source))
    timeline.append(at(f"checked {len(source)} source records and {len(views)} views"))
    print("\n".join(timeline))


def test_a_paused_instance_cannot_commit_what_it_lost(cluster, materialisers):
    """KIP-447's fencing with a zombie: instance b is paused (SIGSTOP) past its session
    timeout while records flow, so the group gives its partitions to a; when b resumes it
    may still hold a batch it read before, but a commit of it carries b's old generation
    and is refused, so the view still holds every matching record exactly once."""
    b = cluster.bootstrap
    dep, src, view = unique("dep"), unique("zsrc"), unique("zview")
    text = "price < 600"
    source_with_views(b, dep, src, 4, SCHEMA, {view: text})
    inst = {n: materialisers(b, dep, n) for n in ("a", "b")}
    wait_until(lambda: members(b, group_id(dep, view)) == 2, 60, "both instances in the group")
    producer = Produce(b, src, records=40_000, rate=4_000)
    producer.start()
    wait_until(lambda: producer.sent >= 8_000, 60, "records flowing")
    mark = len(inst["a"].stderr())
    inst["b"].proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: f"view {view}: instance a assigned source partitions [0, 1, 2, 3]"
                   in inst["a"].stderr()[mark:], 60, "a to take b's partitions")
    finally:
        inst["b"].proc.send_signal(signal.SIGCONT)
    producer.join(300)
    assert producer.error is None, producer.error
    wait_until(lambda: caught_up(b, group_id(dep, view), src), 120, "the view to catch up")
    wait_until(lambda: members(b, group_id(dep, view)) == 2, 60, "b back in the group")
    assert inst["b"].proc.poll() is None, inst["b"].stderr()  # b resumed, and goes on
    source = read_all(b, src)
    check_view(source, read_all(b, view), expected(SCHEMA, text, source))
