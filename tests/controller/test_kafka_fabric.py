"""Kafka across the fabric (issue 14 item 7): `camus serve` on several hosts of one network.

One `camus net serve --topology fattree:4` and real `camus serve --target fabric://...`
processes on hosts h0 (ToR t0_0), h1 (same ToR), h5 (pod 1) and h12 (pod 3), driven by
confluent-kafka and kafka-python over real sockets. The records a host's broker receives
are checked against the reference evaluator (`compiler.semantics.holds`) on the records
produced, through the subscriptions' own rules (`shim.subscriptions.rules_for`).
"""

from __future__ import annotations

import json
import random
import re
import socket
import subprocess
import sys
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.ast import And, Or
from compiler.semantics import holds
from controller import filter_wire
from controller.targets import check_spec, parse_fabric
from shim.schema import parse_schema
from shim.subscriptions import Subscription, kafka_spec, rules_for, view_filter
from tests.broker.conftest import REPO, Server, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SCHEMA = "price:u32=$.price,qty:u16=$.qty"
HOSTS = ("h0", "h1", "h5", "h12")


class Controller:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "camus.cli", "net", "serve", *args],
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"fabric controller on ([\d.]+):(\d+)", line)
        if m is None:
            self.stop()
            raise RuntimeError(f"camus net serve did not start: {line!r}")
        self.address = (m.group(1), int(m.group(2)))

    def call(self, **req) -> dict:
        with socket.create_connection(self.address, timeout=10) as s:
            s.sendall(json.dumps(req).encode() + b"\n")
            return json.loads(s.makefile().readline())

    def host(self, h: str) -> dict:
        return self.call(op="status")["hosts"][h]

    def stop(self) -> None:
        stop_process(self.proc)


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, and SIGKILL if that did not stop it in `timeout` seconds: never hang a run."""
    proc.terminate()
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def fabric():
    ctl = Controller("--topology", "fattree:4")
    brokers = {}
    try:
        for h in HOSTS:
            brokers[h] = Server(extra=["--target", "fabric://%s:%d?host=%s" % (*ctl.address, h)])
        yield ctl, brokers
    finally:
        for b in brokers.values():
            b.stop()
        ctl.stop()


def create(bootstrap: str, name: str, partitions: int = 2, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1, config=config)]).values():
        f.result(15)


def produce(bootstrap: str, topic: str, docs: list[dict]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, d in enumerate(docs):
        p.produce(topic, json.dumps(d).encode(), partition=i % 2)
    assert p.flush(15) == 0


def consume(bootstrap: str, topic: str, want: int | None, quiet: float = 2.0,
            group: str | None = None) -> list[dict]:
    """Everything `topic` holds from the start: until `want` records came, or none came for
    `quiet` seconds (so a count short of `want` shows up as a failure, not a hang)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or uuid.uuid4().hex,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, last = [], time.monotonic()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and time.monotonic() - last < quiet + (3 if not got else 0):
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(json.loads(m.value()))
            last = time.monotonic()
            if want is not None and len(got) >= want:
                break
    c.close()
    return got


def expected(topic_number: int, docs: list[dict], text: str | None,
             partitions: frozenset[int] | None = None) -> list[dict]:
    """The records a subscription matches, by the reference evaluator on its rule."""
    spec, schema = kafka_spec(), parse_schema(SCHEMA)
    f = view_filter(spec, schema, text) if text else And(())
    rule = rules_for(spec, [Subscription(topic_number, 1, partitions, f)])[0]
    out = []
    for i, d in enumerate(docs):
        slots = schema.extract(None, json.dumps(d).encode(), [])
        values = {"kafka.topic_id": topic_number, "kafka.partition": i % 2,
                  **{f"kafka.slot{j}": v for j, v in enumerate(slots)}}
        if holds(rule.filter, values):
            out.append(d)
    return out


def key(d: dict) -> tuple:
    return d["seq"], d["price"], d["qty"]


def docs_for(seed: int, n: int) -> list[dict]:
    rnd = random.Random(seed)
    edges = [0, 1, 499, 500, 501, 999, 1000, 2**32 - 1]
    return [{"seq": i, "price": rnd.choice(edges) if rnd.random() < 0.2 else rnd.randrange(1000),
             "qty": rnd.randrange(0, 2**16)} for i in range(n)]


def test_a_view_on_another_host_gets_exactly_its_records(fabric):
    """A view created on h5 after every broker started; a producer on h0: h5's view holds
    exactly the matching records, h12 (whose view matches none) receives nothing, and h0's
    own view is served locally and never by the network (no host gets its own packets)."""
    ctl, b = fabric
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    for h in HOSTS:
        create(b[h].bootstrap, topic, **{"camus.schema": SCHEMA})
    number = ctl.call(op="status")["topics"][topic]
    texts = {"h5": "price > 500 and qty < 30000 or price == 0",
             "h12": "price > 4000000000 and price < 4000000001",
             "h0": "price <= 499"}
    before = {h: ctl.host(h) for h in HOSTS}
    for h, text in texts.items():
        create(b[h].bootstrap, f"{topic}-view", **{"camus.source": topic, "camus.filter": text})
    assert wait_until(lambda: all(ctl.host(h)["subscriptions"] > before[h]["subscriptions"]
                                  for h in texts), 20), ctl.call(op="status")["hosts"]
    # A view of a new topic is a new filter in the network: its change rewrote switches;
    # h12's matches nothing at all (an empty price range), so its change writes nothing.
    recent = ctl.call(op="status")["recent_changes"]
    for h in ("h5", "h0"):
        assert any(c["host"] == h and c["added"] and c["writes"] and c["switches"]
                   for c in recent), (h, recent)
    assert any(c["host"] == "h12" and c["added"] and not c["writes"] for c in recent), recent
    docs = docs_for(14, 400)
    produce(b["h0"].bootstrap, topic, docs)
    want5 = expected(number, docs, texts["h5"])
    assert 0 < len(want5) < len(docs)
    got5 = consume(b["h5"].bootstrap, f"{topic}-view", len(want5))
    assert sorted(map(key, got5)) == sorted(map(key, want5))
    # h5's copy of the topic holds what its subscriptions matched: nothing more.
    assert sorted(map(key, consume(b["h5"].bootstrap, topic, len(want5)))) == \
        sorted(map(key, want5))
    assert consume(b["h12"].bootstrap, f"{topic}-view", None, quiet=1) == []
    assert consume(b["h12"].bootstrap, topic, None, quiet=0.5) == []
    want0 = expected(number, docs, texts["h0"])
    assert sorted(map(key, consume(b["h0"].bootstrap, f"{topic}-view", len(want0)))) == \
        sorted(map(key, want0))
    after = {h: ctl.host(h) for h in HOSTS}
    assert after["h0"]["frames_in"] - before["h0"]["frames_in"] == len(docs)
    assert after["h5"]["frames_out"] - before["h5"]["frames_out"] == len(want5)
    for h in ("h0", "h1", "h12"):
        assert after[h]["frames_out"] == before[h]["frames_out"], h


def test_group_members_subscribe_and_leave(fabric):
    """A consumer group on h12 reading a plain topic produced on h1: while its member is
    there, h12 receives every record of its assigned partitions; once the member leaves,
    h12's subscription is gone from the network and later records do not reach it."""
    ctl, b = fabric
    topic = f"trades-{uuid.uuid4().hex[:6]}"
    for h in HOSTS:
        create(b[h].bootstrap, topic, **{"camus.schema": SCHEMA})
    base = ctl.host("h12")
    c = Consumer({"bootstrap.servers": b["h12"].bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[dict] = []
    deadline = time.monotonic() + 30
    while ctl.host("h12")["subscriptions"] <= base["subscriptions"]:
        assert time.monotonic() < deadline, "the member's subscription never reached the network"
        c.poll(0.2)
    docs = docs_for(7, 200)
    produce(b["h1"].bootstrap, topic, docs)
    deadline = time.monotonic() + 30
    while len(got) < len(docs) and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(json.loads(m.value()))
    assert sorted(map(key, got)) == sorted(map(key, docs))
    c.close()
    assert wait_until(lambda: ctl.host("h12")["subscriptions"] == base["subscriptions"], 20)
    seen = ctl.host("h12")["frames_out"]
    produce(b["h1"].bootstrap, topic, docs_for(8, 50))
    time.sleep(1)
    assert ctl.host("h12")["frames_out"] == seen
    assert ctl.host("h1")["frames_in"] >= 250
    # h12 stored the 200 records its member wanted, and none of the later 50.
    assert len(consume(b["h12"].bootstrap, topic, None, quiet=1)) == len(docs)


def test_kafka_python_consumer_of_a_view_across_pods(fabric):
    """kafka-python produces on h5, kafka-python reads a view on h0 in another pod."""
    kafka = pytest.importorskip("kafka")
    ctl, b = fabric
    topic = f"quotes-{uuid.uuid4().hex[:6]}"
    for h in HOSTS:
        create(b[h].bootstrap, topic, **{"camus.schema": SCHEMA})
    number = ctl.call(op="status")["topics"][topic]
    text = "qty >= 32768"
    n0 = ctl.host("h0")["subscriptions"]
    create(b["h0"].bootstrap, f"{topic}-hi", **{"camus.source": topic, "camus.filter": text})
    assert wait_until(lambda: ctl.host("h0")["subscriptions"] > n0, 20)
    docs = docs_for(9, 300)
    p = kafka.KafkaProducer(bootstrap_servers=b["h5"].bootstrap)
    for i, d in enumerate(docs):
        p.send(topic, json.dumps(d).encode(), partition=i % 2)
    p.flush(15)
    p.close()
    want = expected(number, docs, text)
    c = kafka.KafkaConsumer(f"{topic}-hi", bootstrap_servers=b["h0"].bootstrap,
                            auto_offset_reset="earliest", consumer_timeout_ms=4000)
    got = [json.loads(m.value) for m in c]
    c.close()
    assert sorted(map(key, got)) == sorted(map(key, want))


def test_a_view_with_state_on_another_host(fabric):
    """A view with state on h5 over a topic produced on h0 (docs/stateful.md, "Kafka views"):
    the network brings h5 the records in the scope of its filter, which h5's broker feeds to
    the view; the view holds its filter over the records produced, partition by partition,
    by the reference evaluator."""
    from tests.shim.views_reference import reference

    ctl, b = fabric
    topic = f"ticks-{uuid.uuid4().hex[:6]}"
    for h in HOSTS:
        create(b[h].bootstrap, topic, **{"camus.schema": SCHEMA})
    text = "price > 500 and records <= 3"
    n5 = ctl.host("h5")["subscriptions"]
    create(b["h5"].bootstrap, f"{topic}-first", **{"camus.source": topic, "camus.filter": text})
    assert wait_until(lambda: ctl.host("h5")["subscriptions"] > n5, 20)
    docs = docs_for(21, 200)
    t0 = 1_764_000_000_000
    p = Producer({"bootstrap.servers": b["h0"].bootstrap, "linger.ms": 5})
    for i, d in enumerate(docs):
        p.produce(topic, json.dumps(d).encode(), partition=i % 2, timestamp=t0 + i * 40)
    assert p.flush(15) == 0
    want = []
    for part in (0, 1):
        mine = [(i, t0 + i * 40, None, json.dumps(d).encode(), ())
                for i, d in enumerate(docs) if i % 2 == part]
        want += [docs[i] for i in reference(text, SCHEMA, mine)[0]]
    assert 0 < len(want) < sum(d["price"] > 500 for d in docs)
    got = consume(b["h5"].bootstrap, f"{topic}-first", len(want))
    assert sorted(map(key, got)) == sorted(map(key, want))
    # h5's copy of the topic: the records in the view's scope, no more
    scoped = [d for d in docs if d["price"] > 500]
    assert sorted(map(key, consume(b["h5"].bootstrap, topic, len(scoped)))) == \
        sorted(map(key, scoped))


def test_filters_cross_the_api_unchanged():
    """Every filter a view can have, as the broker compiles it, is the same filter after
    its JSON trip (so equal subscriptions collapse and a removal finds its addition)."""
    spec, schema = kafka_spec(), parse_schema(SCHEMA)
    texts = ["price > 5", "not (price < 3 or qty == 7)", "price >= 1 and qty != 2 or price <= 9",
             "true", "false"]
    subs = [Subscription(3, 1, None, view_filter(spec, schema, t)) for t in texts]
    subs.append(Subscription(4, 2, frozenset({0, 3}), view_filter(spec, schema, "qty > 1")))
    for rule in rules_for(spec, subs):
        doc = json.loads(json.dumps(filter_wire.to_json(rule.filter)))
        assert filter_wire.from_json(doc, spec) == rule.filter
    assert isinstance(filter_wire.from_json(["or", []], spec), Or)
    for bad in (["atom", "kafka.nope", "==", 1, None], ["atom", "kafka.partition", "~", 1, None],
                ["atom", "kafka.partition", "==", 1 << 40, None], ["xor", []], "price > 5"):
        with pytest.raises(ValueError):
            filter_wire.from_json(bad, spec)


def test_fabric_specs_are_checked():
    assert parse_fabric("fabric://127.0.0.1:7000?host=h3") == \
        (("127.0.0.1", 7000), "h3", "native", None)
    assert parse_fabric("fabric:///run/f.sock?host=h1&io=iface:c1h1-eth0") == \
        ("/run/f.sock", "h1", "native", "c1h1-eth0")
    assert check_spec("fabric://127.0.0.1:7000?host=h3&impl=python")[0] == "fabric"
    for bad in ("fabric://127.0.0.1?host=h3", "fabric://127.0.0.1:7000",
                "fabric://127.0.0.1:7000?host=h3&x=1", "fabric://127.0.0.1:7000?host=h&impl=z",
                "fabric://127.0.0.1:7000?host=h&io=udp:x", "fabric://rel/path?host=h"):
        with pytest.raises(ValueError):
            parse_fabric(bad)


def test_serve_says_so_when_the_controller_is_not_there():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run([sys.executable, "-m", "camus.cli", "serve", "--listen", "127.0.0.1:0",
                          "--target", f"fabric://127.0.0.1:{port}?host=h0"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "fabric controller at 127.0.0.1" in out.stderr, out.stderr


def test_a_host_the_network_lacks_is_refused(fabric):
    ctl, _ = fabric
    out = subprocess.run([sys.executable, "-m", "camus.cli", "serve", "--listen", "127.0.0.1:0",
                          "--target", "fabric://%s:%d?host=h99" % ctl.address], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "no host 'h99'" in out.stderr, out.stderr


def test_a_broker_restart_keeps_its_subscriptions_and_misses_what_came_meanwhile(tmp_path):
    """h5's broker (with a data directory) stops and starts again: the network keeps its
    subscriptions meanwhile (copies for it are dropped and counted: nothing is replayed from
    the producer's log), its restart changes no switch, and afterwards its view holds what
    it stored before plus what came after."""
    ctl = Controller("--topology", "fattree:4", "--state", str(tmp_path / "ctl"))
    brokers = []
    try:
        target = "fabric://%s:%d?host=%%s" % ctl.address
        b0 = Server(extra=["--target", target % "h0"])
        brokers.append(b0)
        b5 = Server(tmp_path / "h5", extra=["--target", target % "h5"])
        brokers.append(b5)
        for b in (b0, b5):
            create(b.bootstrap, "ticks", **{"camus.schema": SCHEMA})
        create(b5.bootstrap, "ticks-cheap", **{"camus.source": "ticks", "camus.filter": "price < 300"})
        assert wait_until(lambda: ctl.host("h5")["subscriptions"] == 1, 20)
        number = ctl.call(op="status")["topics"]["ticks"]
        first, second, third = docs_for(1, 100), docs_for(2, 100), docs_for(3, 100)
        for batch, d in ((first, 0), (second, 1000), (third, 2000)):
            for x in batch:
                x["seq"] += d
        produce(b0.bootstrap, "ticks", first)
        want1 = expected(number, first, "price < 300")
        assert len(consume(b5.bootstrap, "ticks-cheap", len(want1))) == len(want1)
        # The consumer's group member came and went: wait until its leaving is published.
        assert wait_until(lambda: ctl.host("h5")["subscriptions"] == 1, 20)
        changes = ctl.call(op="status")["changes"]
        b5.stop()
        assert wait_until(lambda: ctl.host("h5")["attached"] is None, 20)
        dropped = ctl.host("h5")["dropped"]
        produce(b0.bootstrap, "ticks", second)
        assert wait_until(lambda: ctl.host("h5")["dropped"] - dropped ==
                          len(expected(number, second, "price < 300")), 10)
        assert ctl.host("h5")["subscriptions"] == 1
        b5 = Server(tmp_path / "h5", extra=["--target", target % "h5"])
        brokers.append(b5)
        assert wait_until(lambda: ctl.host("h5")["attached"] is not None, 20)
        time.sleep(1.5)  # its first publication: the same set
        assert ctl.call(op="status")["changes"] == changes
        produce(b0.bootstrap, "ticks", third)
        want = want1 + expected(number, third, "price < 300")
        got = consume(b5.bootstrap, "ticks-cheap", len(want))
        assert sorted(map(key, got)) == sorted(map(key, want))
    finally:
        for b in brokers:
            b.stop()
        ctl.stop()


CLIENT = REPO / "tests" / "controller" / "kafka_host_client.py"


@pytest.mark.parametrize("switch", ["camus", "bmv2"])
def test_brokers_on_mininet_hosts(tmp_path, switch):
    """`camus net serve --mininet` on a three-switch line, brokers on its hosts' namespaces
    (their interfaces are their links), Kafka clients beside them: h2's view gets exactly
    the matching records produced on h0, two switches away, and h1 (whose switch the records
    cross) stores exactly the few its view matches. The switches are camus's switch, or bmv2
    running the Kafka spec's fabric program."""
    from controller.emulation import bmv2_missing, usable

    reason = usable()
    if reason is not None:
        pytest.skip(f"camus net serve --mininet: {reason}")
    if switch == "bmv2" and bmv2_missing() is not None:
        pytest.skip(f"bmv2: {bmv2_missing()}")
    graph = tmp_path / "line.txt"
    graph.write_text("A B\nB C\nhost h0 A\nhost h1 B\nhost h2 C\n")
    ctl = subprocess.Popen([sys.executable, "-m", "camus.cli", "net", "serve", "--mininet",
                            "--switch", switch, "--graph", str(graph)], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=open(tmp_path / "ctl.log", "w"), text=True)
    procs = []
    try:
        lines = []
        for line in ctl.stdout:
            lines.append(line)
            if line.strip() == "ready":
                break
        assert lines and lines[-1].strip() == "ready", (tmp_path / "ctl.log").read_text()
        sock = re.search(r"fabric controller on (\S+)", lines[0]).group(1)
        hosts = {m.group(1): (m.group(2), m.group(3)) for m in
                 (re.match(r"host (\S+) pid (\d+) iface (\S+)", x) for x in lines) if m}
        bootstrap = "127.0.0.1:9092"
        for h, (pid, iface) in hosts.items():
            proc = subprocess.Popen(["mnexec", "-a", pid, sys.executable, "-m", "camus.cli",
                                     "serve", "--listen", bootstrap, "--target",
                                     f"fabric://{sock}?host={h}&io=iface:{iface}"],
                                    cwd=REPO, stdout=subprocess.PIPE,
                                    stderr=open(tmp_path / f"{h}.log", "w"), text=True)
            procs.append(proc)
            assert "listening on" in proc.stdout.readline(), (tmp_path / f"{h}.log").read_text()

        def client(h: str, *args: str) -> str:
            out = subprocess.run(["mnexec", "-a", hosts[h][0], sys.executable, str(CLIENT),
                                  bootstrap, *args], cwd=REPO, capture_output=True, text=True,
                                 timeout=120)
            assert out.returncode == 0, out.stderr
            return out.stdout

        def status() -> dict:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(sock)
                s.sendall(b'{"op": "status"}\n')
                return json.loads(s.makefile().readline())

        for h in hosts:
            client(h, "create", "orders", json.dumps({"camus.schema": SCHEMA}))
        texts = {"h2": "price >= 500 and qty > 1000", "h1": "price > 4000000000"}
        for h, text in texts.items():
            client(h, "create", "orders-view",
                   json.dumps({"camus.source": "orders", "camus.filter": text}))
        assert wait_until(lambda: all(status()["hosts"][h]["subscriptions"] == 1
                                      for h in texts), 30)
        number = status()["topics"]["orders"]
        docs = docs_for(21, 200)
        (tmp_path / "docs.json").write_text(json.dumps(docs))
        client("h0", "produce", "orders", str(tmp_path / "docs.json"))
        want = expected(number, docs, texts["h2"])
        assert want
        got = json.loads(client("h2", "consume", "orders-view", str(len(want)), "2"))
        assert sorted(map(key, got)) == sorted(map(key, want))
        # h1, on the path between them, gets its own few (the top price) and stores no other.
        want1 = expected(number, docs, texts["h1"])
        assert 0 < len(want1) < len(want)
        got1 = json.loads(client("h1", "consume", "orders", "0", "1"))
        assert sorted(map(key, got1)) == sorted(map(key, want1))
    finally:
        for p in procs:
            stop_process(p)
        stop_process(ctl, 60)  # it takes the network down


def test_fragments_of_two_senders_with_the_same_offsets_are_reassembled_apart():
    """Two brokers number one partition's records independently, so a third can receive
    fragments of two different records under one (topic, partition, offset), interleaved.
    Each fabric target stamps its host as the frames' Ethernet source, and the receiving
    data path reassembles per sender: both records come out whole."""
    from controller.embedded import EmbeddedTarget
    from controller.fabric_target import host_mac
    from shim import reframe
    from shim.datapath import DataPath

    dp = DataPath(EmbeddedTarget())
    runs = []
    dp.set_arrivals(runs.extend)
    records = {h: reframe.Record(1000 + i, f"k{h}".encode(), bytes([65 + i]) * 5000)
               for i, h in enumerate(("h0", "h1"))}
    frames = {}
    for h, r in records.items():
        frames[h] = []
        for f in reframe.packets(7, 0, 42, [0] * 8, r):
            f = bytearray(f)
            f[6:12] = host_mac(h)
            frames[h].append(bytes(f))
    assert len(frames["h0"]) == len(frames["h1"]) > 1
    interleaved = [f for pair in zip(frames["h0"], frames["h1"]) for f in pair]
    dp._arrived(interleaved)
    got = [r for _, _, recs in runs for r in recs]
    assert sorted(got, key=lambda r: r.timestamp) == [records["h0"], records["h1"]]
    assert dp.stats.arrived == 2
    dp.close()


VIEW_ATOMS = ("price > 500", "price <= 499", "price == 0", "price != 1000", "qty < 30000",
              "qty >= 65535", "price >= 4294967295", "true")


@st.composite
def host_sets(draw):
    """Per step, some hosts' whole subscription sets: rules the way a broker makes them
    (topic, partitions, a view filter over the schema), duplicates allowed."""
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        step = {}
        for h in draw(st.lists(st.sampled_from(("h0", "h3", "h6", "h13")), min_size=1,
                               max_size=3, unique=True)):
            subs = []
            for port in range(draw(st.integers(0, 3))):
                text = " and ".join(draw(st.lists(st.sampled_from(VIEW_ATOMS), min_size=1,
                                                  max_size=2)))
                parts = draw(st.sampled_from((None, frozenset({0}), frozenset({1}))))
                subs.append((draw(st.sampled_from((1, 2))), parts, text))
            step[h] = subs
        steps.append(step)
    return steps


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(host_sets(), st.sampled_from((("tr", 1), ("mr", 1), ("tr", 100))), st.integers(0, 2**16))
def test_the_controller_applies_whole_sets_exactly(steps, policy_alpha, seed):
    """The controller's `subscriptions` request, as brokers send it (filters in JSON), leaves
    every switch holding what a fresh compile of the hosts' current sets holds, and each host
    receives a random Kafka frame from another host once iff one of its filters matches it
    (compiler.semantics), never its own."""
    from compiler.spec import load_spec
    from controller.fabric_service import FabricService
    from controller.network import Network
    from controller.policy import Subscription as HostSub
    from controller.topology import fat_tree
    from shim import reframe

    policy, alpha = policy_alpha
    spec, schema = kafka_spec(), parse_schema(SCHEMA)
    topo = fat_tree(4)
    service = FabricService(Network(load_spec(REPO / "p4/kafka/kafka.p4"), topo, [], policy, alpha))
    rng = random.Random(seed)
    try:
        current: dict[str, list] = {}
        for step in steps:
            for h, subs in step.items():
                rules = rules_for(spec, [Subscription(t, i + 1, parts, view_filter(spec, schema, x))
                                         for i, (t, parts, x) in enumerate(subs)])
                sent = json.loads(json.dumps([filter_wire.to_json(r.filter) for r in rules]))
                answer = service.request({"op": "subscriptions", "host": h, "filters": sent})
                assert answer["ok"], answer
                # As the controller reads them: query fields are its spec's own objects.
                current[h] = [filter_wire.from_json(f, service.net.spec) for f in sent]
            live = [HostSub(h, f) for h, fs in current.items() for f in fs]
            fresh = Network(service.net.spec, topo, live, policy, alpha)
            for s in topo.switches:
                assert sorted(map(repr, service.fabric.switches[s].entries())) == \
                    sorted(map(repr, fresh.compiled[s]["table_entries"])), s
            for _ in range(8):
                sender = rng.choice(sorted(topo.hosts))
                topic, part = rng.choice((1, 2)), rng.choice((0, 1))
                price = rng.choice((0, 1, 499, 500, 501, 1000, 2**32 - 1, rng.randrange(2000)))
                qty = rng.choice((0, 29999, 30000, 65535, rng.randrange(65536)))
                slots = [price, qty] + [0] * 6
                frame = reframe.packets(topic, part, 5, slots, reframe.Record(1, None, b"{}"))[0]
                got = [h for h, _ in service.fabric.inject(sender, frame)]
                values = {"kafka.topic_id": topic, "kafka.partition": part,
                          "kafka.slot0": price, "kafka.slot1": qty}
                want = [h for h, fs in current.items()
                        if h != sender and any(holds(f, values) for f in fs)]
                assert sorted(got) == sorted(want), (sender, values)
    finally:
        service.close()


def test_a_controller_restart_is_repaired_by_the_brokers(tmp_path):
    """The controller stops and starts again on the same address and state: each broker
    reconnects, attaches again (new UDP sockets) and republishes its subscriptions within a
    second or two, topic numbers are the same, and records cross again."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ("--topology", "fattree:4", "--listen", f"127.0.0.1:{port}",
            "--state", str(tmp_path / "ctl"))
    ctl = Controller(*args)
    brokers = []
    try:
        target = f"fabric://127.0.0.1:{port}?host=%s"
        b0 = Server(extra=["--target", target % "h0"])
        brokers.append(b0)
        b5 = Server(extra=["--target", target % "h5"])
        brokers.append(b5)
        for b in (b0, b5):
            create(b.bootstrap, "feed", **{"camus.schema": SCHEMA})
        create(b5.bootstrap, "feed-view", **{"camus.source": "feed", "camus.filter": "qty < 1000"})
        assert wait_until(lambda: ctl.host("h5")["subscriptions"] == 1, 20)
        topics = ctl.call(op="status")["topics"]
        ctl.stop()
        # Meanwhile a new topic has no number to take: refused, saying why, nothing made.
        with pytest.raises(confluent_kafka.KafkaException, match="no topic number"):
            create(b0.bootstrap, "while-away")
        ctl = Controller(*args)
        assert wait_until(lambda: ctl.host("h5")["subscriptions"] == 1
                          and ctl.host("h5")["attached"] and ctl.host("h0")["attached"], 20), \
            ctl.call(op="status")["hosts"]
        assert ctl.call(op="status")["topics"] == topics
        create(b0.bootstrap, "while-away")  # now it is numbered
        assert "while-away" in ctl.call(op="status")["topics"]
        docs = [{"seq": i, "price": 1, "qty": q} for i, q in enumerate((5, 999, 1000, 7, 60000))]
        produce(b0.bootstrap, "feed", docs)
        want = [d for d in docs if d["qty"] < 1000]
        assert sorted(map(key, consume(b5.bootstrap, "feed-view", len(want)))) == \
            sorted(map(key, want))
    finally:
        for b in brokers:
            b.stop()
        ctl.stop()
