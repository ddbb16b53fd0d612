"""Views with state (docs/stateful.md, "Kafka views") with real Kafka clients over sockets, on
a real `camus serve`: CreateTopics and AlterConfigs from confluent-kafka and kafka-python,
records with their own timestamps, a view made while a producer runs, several views on one
switch, `camus topic describe` reading the instances from the switch, and kill -9.

What each view holds is checked against the reference evaluator over the source's records
as a consumer reads them back (tests/shim/views_reference.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

from shim.broker import describe_cell  # noqa: E402
from shim.subscriptions import kafka_spec  # noqa: E402
from tests.shim.views_reference import reference  # noqa: E402

from .conftest import REPO, unique  # noqa: E402

SCHEMA = "stock:str8=$.stock,price:u32=$.price,side:str1=header:side"
T0 = 1_764_000_000_000  # ms: a whole second (2025-11-24T16:00:00Z)
FILTERS = {
    "hot": 'stock == "GOOGL" and avg(price) > 50',  # the slides' rule
    "quota": "records <= 2",  # the first two records of each second
    "busy": 'side == "B" and rate(arrivals) >= 3',  # buys once 3 arrived this second
}


def create(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics(list(topics), operation_timeout=30, request_timeout=40).values():
        fut.result(40)


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> list:
    """Every record of every partition, up to the end (partition EOF), as
    (partition, offset, timestamp, key, value, headers), by partition and offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                  "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got, done, deadline = [], set(), time.monotonic() + timeout
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                    continue
                raise KafkaException(m.error())
            got.append((m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(),
                        tuple(m.headers() or ())))
    finally:
        c.close()
    assert len(done) == partitions, f"{topic}: no end of partitions {set(range(partitions)) - done}"
    return sorted(got, key=lambda r: r[:2])  # partitions interleave as the fetches come


def produce(bootstrap: str, topic: str, items) -> None:
    """items: (partition, timestamp ms, stock, price, side)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for partition, ts, stock, price, side in items:
        p.produce(topic, json.dumps({"stock": stock, "price": price}).encode(),
                  partition=partition, timestamp=ts, headers=[("side", side.encode())])
    assert p.flush(30) == 0


def workload(seconds: int, per_second: int, partitions: int, seed: int = 7):
    """Records over `seconds` seconds of record time, now and then one out of order."""
    import random
    rnd = random.Random(seed)
    out = []
    for i in range(seconds * per_second):
        ts = T0 + i * 1000 // per_second + (rnd.choice([0, 0, 0, -900]) if i else 0)
        out.append((rnd.randrange(partitions), ts, rnd.choice(["GOOGL", "GOOGL", "MSFT"]),
                    rnd.randrange(0, 101), rnd.choice("BS")))
    return out


def expected(source_records, text: str, partitions: int):
    """{partition: (offsets, instances)} by the reference over what the source holds."""
    out = {}
    for p in range(partitions):
        recs = sorted((o, ts, k, v, h) for q, o, ts, k, v, h in source_records if q == p)
        out[p] = reference(text, SCHEMA, recs)
    return out


def check_views(bootstrap: str, source: str, views: dict[str, str], partitions: int) -> dict:
    """Every view against the reference; {view: records} of what they hold."""
    src = read_all(bootstrap, source, partitions)
    held = {}
    for name, text in views.items():
        want = expected(src, text, partitions)
        got = read_all(bootstrap, name, partitions)
        held[name] = got
        for p in range(partitions):
            assert [o for q, o, *_ in got if q == p] == want[p][0], (name, text, p)
    return held


def describe(bootstrap: str, name: str) -> str:
    out = subprocess.run([sys.executable, "-m", "camus.cli", "topic", "describe", name,
                          "--bootstrap-server", bootstrap], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def state_lines(text: str) -> dict[str, str]:
    lines = text.split("  state (per partition, read from the switch):\n", 1)[1].splitlines()
    return dict(line.strip().split(": ", 1) for line in lines if line.startswith("    "))


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # AlterConfigs itself
def test_confluent_kafka_views_with_state_describe_alter_and_groups(camus_server):
    """CreateTopics of three views with state (average, counter, meter) and a stateless one,
    records with their own timestamps over several seconds on two partitions: each view
    holds what the reference selects; `camus topic describe` shows the instances the
    reference ends with; AlterConfigs replaces a filter (fresh state, rebuilt from the
    source); a consumer group member of a view with state reads it as any member."""
    s = camus_server()
    src = unique("orders")
    names = {name: unique(name) for name in FILTERS}
    create(s.bootstrap, NewTopic(src, 2, 1, config={"camus.schema": SCHEMA}))
    produce(s.bootstrap, src, workload(2, 6, 2, seed=1))  # before the views: their replay
    create(s.bootstrap, *[NewTopic(names[n], 2, 1, config={"camus.source": src,
                                                           "camus.filter": FILTERS[n]})
                          for n in FILTERS],
           NewTopic(unique("plain"), 2, 1, config={"camus.source": src, "camus.filter": "price > 50"}))
    produce(s.bootstrap, src, [(p, ts + 2000, *rest) for p, ts, *rest in workload(3, 8, 2, seed=2)])
    views = {names[n]: FILTERS[n] for n in FILTERS}
    check_views(s.bootstrap, src, views, 2)

    # describe: each partition's instance as the reference ends it
    src_records = read_all(s.bootstrap, src, 2)
    spec = kafka_spec().state_vars
    var = {"avg(price)": spec["avg(kafka.avg0)"], "records": spec["records"],
           "rate(arrivals)": spec["arrivals"]}
    for n in FILTERS:
        state = state_lines(describe(s.bootstrap, names[n]))
        for p, (_, instances) in expected(src_records, FILTERS[n], 2).items():
            for shown, (tag, count, total) in instances.items():
                assert state[f"{p}.{shown}"] == describe_cell(var[shown], tag or 0, count, total)

    # any AdminClient reads the same instances as read-only configs camus.state.*
    admin = AdminClient({"bootstrap.servers": s.bootstrap})
    [fut] = admin.describe_configs([ConfigResource("topic", names["hot"])]).values()
    configs = {k: v.value for k, v in fut.result(30).items() if k.startswith("camus.state.")}
    assert configs == {f"camus.state.{k}": v
                       for k, v in state_lines(describe(s.bootstrap, names["hot"])).items()}
    assert set(configs) == {"camus.state.0.avg(price)", "camus.state.1.avg(price)"}

    # a group member of a view with state: no switch port, the view's log through Fetch
    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": unique("g"),
                  "auto.offset.reset": "earliest"})
    c.subscribe([names["hot"]])
    got, deadline = [], time.monotonic() + 30
    want = len(read_all(s.bootstrap, names["hot"], 2))
    while len(got) < want and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m)
    c.close()
    assert len(got) == want

    # AlterConfigs: a new filter is a new rule, with empty instances, over the whole source
    new = 'stock == "GOOGL" and avg(price) > 60'
    res = ConfigResource("topic", names["hot"], set_config={"camus.source": src, "camus.filter": new})
    for fut in admin.alter_configs([res], request_timeout=40).values():
        fut.result(40)
    check_views(s.bootstrap, src, {names["hot"]: new}, 2)


def test_a_view_with_state_survives_kill_9_with_the_same_records_and_state(camus_server, tmp_path):
    """kill -9 of `camus serve`, then a restart on its data directory: every view with state
    holds exactly the records it held, its instances on the switch are what they were, and
    records produced afterwards continue them as the reference says."""
    s = camus_server(tmp_path / "data")
    src = unique("orders")
    names = {name: unique(name) for name in FILTERS}
    create(s.bootstrap, NewTopic(src, 2, 1, config={"camus.schema": SCHEMA}))
    create(s.bootstrap, *[NewTopic(names[n], 2, 1, config={"camus.source": src,
                                                           "camus.filter": FILTERS[n]})
                          for n in FILTERS])
    produce(s.bootstrap, src, workload(3, 10, 2, seed=3))
    views = {names[n]: FILTERS[n] for n in FILTERS}
    before = check_views(s.bootstrap, src, views, 2)
    assert 0 < len(before[names["hot"]]) < 30 and 0 < len(before[names["quota"]]) < 30
    states = {n: state_lines(describe(s.bootstrap, n)) for n in views}
    assert all(states.values())
    s.proc.kill()  # SIGKILL: nothing is shut down
    s.proc.wait(10)

    s2 = camus_server(tmp_path / "data")
    assert check_views(s2.bootstrap, src, views, 2) == before
    assert {n: state_lines(describe(s2.bootstrap, n)) for n in views} == states
    # the last second goes on where it was: produced into it, and into the next
    produce(s2.bootstrap, src, [(p, ts + 2500, *rest) for p, ts, *rest in workload(1, 10, 2, seed=4)])
    check_views(s2.bootstrap, src, views, 2)


def test_a_view_made_while_a_producer_runs_sees_each_record_once(camus_server):
    """A producer keeps producing (in record-time order, across seconds) while CreateTopics
    makes views with state: each holds its filter over the whole source, every record fed
    once, none missed between its replay and the records after it."""
    s = camus_server()
    src = unique("flow")
    create(s.bootstrap, NewTopic(src, 2, 1, config={"camus.schema": SCHEMA}))
    stop = threading.Event()
    errors = []

    def run():
        p = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 2, "enable.idempotence": True})
        i = 0
        try:
            while not stop.is_set() or i < 400:
                p.produce(src, json.dumps({"stock": "GOOGL", "price": i * 37 % 101}).encode(),
                          partition=i % 2, timestamp=T0 + i * 50, headers=[("side", b"B")])
                i += 1
                if i % 20 == 0:
                    p.poll(0)
                    time.sleep(0.01)
            assert p.flush(30) == 0
        except Exception as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.3)
    views = {}
    for n in FILTERS:
        views[unique(n)] = FILTERS[n]
        create(s.bootstrap, NewTopic(list(views)[-1], 2, 1, config={"camus.source": src,
                                                                     "camus.filter": FILTERS[n]}))
    stop.set()
    t.join(60)
    assert not errors and not t.is_alive()
    check_views(s.bootstrap, src, views, 2)


def test_kafka_python_creates_and_alters_a_view_with_state(camus_server):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType, NewTopic as KNewTopic
    from kafka.errors import InvalidConfigurationError

    s = camus_server()
    src, view = unique("kp-src"), unique("kp-view")
    a = kafka.KafkaAdminClient(bootstrap_servers=s.bootstrap, request_timeout_ms=40000)
    a.create_topics([KNewTopic(src, 1, 1, topic_configs={"camus.schema": SCHEMA})])
    produce(s.bootstrap, src, workload(2, 5, 1, seed=5))
    a.create_topics([KNewTopic(view, 1, 1, topic_configs={
        "camus.source": src, "camus.filter": FILTERS["hot"]})])
    check_views(s.bootstrap, src, {view: FILTERS["hot"]}, 1)
    a.alter_configs([KConfigResource(ConfigResourceType.TOPIC, view, configs={
        "camus.source": src, "camus.filter": FILTERS["quota"]})])
    check_views(s.bootstrap, src, {view: FILTERS["quota"]}, 1)
    with pytest.raises(InvalidConfigurationError, match="only numeric schema fields"):
        a.create_topics([KNewTopic(unique("bad"), 1, 1, topic_configs={
            "camus.source": src, "camus.filter": "avg(stock) > 1"})])
    a.close()
