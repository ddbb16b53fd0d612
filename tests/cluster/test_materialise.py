"""Views materialised into a real three-node Kafka cluster by `camus cluster materialise`.

Each view must hold exactly the source records the reference evaluator
(`compiler.semantics.holds`) selects, once each, in source order per partition, with the
source partition and offset in headers; Kafka's own clients (confluent-kafka, kafka-python,
the Java console consumer) read it straight from the cluster.
"""

from __future__ import annotations

import json
import random
import shutil

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from compiler.semantics import holds  # noqa: E402
from shim.approximation import SLOT_NAMES  # noqa: E402
from shim.cluster.catalog import group_id  # noqa: E402
from shim.cluster.materialise import SOURCE_OFFSET, SOURCE_PARTITION  # noqa: E402
from shim.schema import parse_schema  # noqa: E402
from shim.subscriptions import kafka_spec, view_filter  # noqa: E402

from .conftest import camus, checksum, source_with_views, unique, wait_until  # noqa: E402
from .kafka_io import Row, caught_up, create_topic, read_all  # noqa: E402

pytestmark = pytest.mark.java

SCHEMA = "a:u16=$.a,b:u32=$.b,s:str2=$.s,side:str1=header:side"


def produce(bootstrap: str, topic: str, docs: list[tuple[dict, bytes]], partitions: int = 2
            ) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})
    for i, (doc, side) in enumerate(docs):
        p.produce(topic, json.dumps(doc).encode(), key=str(i).encode(),
                  partition=i % partitions, headers=[("side", side)])
    assert p.flush(60) == 0


def expected(schema_text: str, filter_text: str, source: list[Row]) -> list[Row]:
    """The source records the view must hold, by the reference evaluator."""
    schema = parse_schema(schema_text)
    f = view_filter(kafka_spec(), schema, filter_text)
    return [r for r in source
            if holds(f, dict(zip(SLOT_NAMES, schema.extract(r.key, r.value, list(r.headers)))))]


def check_view(source: list[Row], view: list[Row], want: list[Row]) -> None:
    """`view` holds exactly `want`, once each, in source order per partition, in the
    source's partition, with the source's key, value and headers plus the two camus ones."""
    by_origin = {(r.partition, r.offset): r for r in source}
    origins = []
    for r in view:
        p, o = int(r.header(SOURCE_PARTITION)), int(r.header(SOURCE_OFFSET))
        assert p == r.partition, "a view record left its source partition"
        src = by_origin[(p, o)]
        assert (r.key, r.value) == (src.key, src.value)
        assert r.headers[:len(src.headers)] == src.headers
        origins.append((p, o, r.value))
    for p in {o[0] for o in origins}:
        offsets = [o for q, o, _ in origins if q == p]
        assert offsets == sorted(set(offsets)), f"partition {p}: out of order or repeated"
    assert checksum(origins) == checksum((r.partition, r.offset, r.value) for r in want)


def doc(rng: random.Random) -> tuple[dict, bytes]:
    return ({"a": rng.randrange(1000), "b": rng.randrange(1 << 20),
             "s": rng.choice(["AB", "CD", "EF", "A"])}, rng.choice([b"B", b"S"]))


def test_view_holds_what_the_reference_selects_and_any_client_reads_it(cluster, materialisers):
    b = cluster.bootstrap
    dep, src, view = unique("dep"), unique("src"), unique("view")
    text = 'a > 500 and side == "B" or s == "CD"'
    source_with_views(b, dep, src, 2, SCHEMA, {view: text})
    materialisers(b, dep, "one")
    rng = random.Random(7)
    produce(b, src, [doc(rng) for _ in range(3000)])
    wait_until(lambda: caught_up(b, group_id(dep, view), src), 120, "the view to catch up")
    source = read_all(b, src)
    want = expected(SCHEMA, text, source)
    got = read_all(b, view)
    assert 0 < len(want) < len(source)
    check_view(source, got, want)

    # kafka-python, a client sharing no code with librdkafka, reads the same records.
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(view, bootstrap_servers=b.split(","),
                                   isolation_level="read_committed",
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   consumer_timeout_ms=10000)
    seen = [(m.partition, m.offset, m.value, tuple(m.headers)) for m in consumer]
    consumer.close()
    assert sorted(seen) == sorted((r.partition, r.offset, r.value, r.headers) for r in got)

    # Kafka's own console consumer (Java), where it runs.
    if shutil.which("java"):
        out = cluster.tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
                           "--bootstrap-server", b, "--topic", view, "--from-beginning",
                           "--isolation-level", "read_committed",
                           "--max-messages", str(len(got)), "--timeout-ms", "30000",
                           "--formatter-property", "print.partition=true",
                           "--formatter-property", "print.headers=true")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert len(lines) == len(got)
        java = sorted((int(line.split("\t")[0].removeprefix("Partition:")),
                       line.split("\t")[-1]) for line in lines)
        assert java == sorted((r.partition, r.value.decode()) for r in got)
        assert all(f"{SOURCE_OFFSET}:" in line for line in lines)


FIELDS = {"a": 1000, "b": 1 << 20}


@st.composite
def filters(draw, depth=2):
    if depth == 0 or draw(st.booleans()):
        kind = draw(st.sampled_from(["num", "num", "str", "side"]))
        if kind == "num":
            name = draw(st.sampled_from(sorted(FIELDS)))
            op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
            return f"{name} {op} {draw(st.integers(0, FIELDS[name]))}"
        if kind == "str":
            return f's {draw(st.sampled_from(["==", "!="]))} "{draw(st.sampled_from(["AB", "CD", "A", "ZZ"]))}"'
        return f'side == "{draw(st.sampled_from(["B", "S"]))}"'
    op = draw(st.sampled_from(["and", "or"]))
    left, right = draw(filters(depth - 1)), draw(filters(depth - 1))
    text = f"({left} {op} {right})"
    return f"not {text}" if draw(st.booleans()) else text


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=filters(), seed=st.integers(0, 1 << 30), count=st.integers(0, 400))
def test_views_equal_the_reference_evaluator(cluster, materialisers, text, seed, count):
    """Random filters over random records: the view is what `compiler.semantics` selects.
    One materialiser per example's deployment picks the view up from the catalog."""
    b = cluster.bootstrap
    dep, src, view = unique("dep"), unique("src"), unique("view")
    create_topic(b, src, 2)
    assert camus("cluster", "schema", "set", src, SCHEMA, "--kafka", b, "--deployment", dep
                 ).returncode == 0
    rng = random.Random(seed)
    produce(b, src, [doc(rng) for _ in range(count)])
    made = camus("cluster", "view", "create", view, "--source", src, "--filter", text,
                 "--kafka", b, "--deployment", dep)
    assert made.returncode == 0, made.stderr
    inst = materialisers(b, dep, "p")
    try:
        wait_until(lambda: count == 0 or caught_up(b, group_id(dep, view), src), 120,
                   "the view to catch up")
        source = read_all(b, src)
        check_view(source, read_all(b, view), expected(SCHEMA, text, source))
    finally:
        inst.stop()


def test_bad_view_and_schema_are_refused_with_where(cluster):
    b = cluster.bootstrap
    dep, src = unique("dep"), unique("src")
    create_topic(b, src, 1)
    bad = camus("cluster", "schema", "set", src, "a:u16=$.a,b:u99=$.b", "--kafka", b,
                "--deployment", dep)
    assert bad.returncode != 0 and "1:" in bad.stderr and "u99" in bad.stderr
    assert camus("cluster", "schema", "set", src, "a:u16=$.a", "--kafka", b, "--deployment",
                 dep).returncode == 0
    typo = camus("cluster", "view", "create", unique("v"), "--source", src, "--filter",
                 "a > 1 and bb < 3", "--kafka", b, "--deployment", dep)
    assert typo.returncode == 1
    assert "camus.filter:1:11" in typo.stderr and "'bb'" in typo.stderr
    nosrc = camus("cluster", "view", "create", unique("v"), "--source", unique("none"),
                  "--filter", "a > 1", "--kafka", b, "--deployment", dep)
    assert nosrc.returncode == 1 and "no such topic" in nosrc.stderr
    badaddr = camus("cluster", "view", "list", "--kafka", "localhost")
    assert badaddr.returncode == 2 and "HOST:PORT" in badaddr.stderr


def test_view_delete_removes_topic_and_catalog_entry(cluster, materialisers):
    b = cluster.bootstrap
    dep, src, view = unique("dep"), unique("src"), unique("view")
    source_with_views(b, dep, src, 1, SCHEMA, {view: "a > 3"})
    listed = camus("cluster", "view", "list", "--kafka", b, "--deployment", dep)
    assert f"{view}\tview of {src} where a > 3" in listed.stdout
    inst = materialisers(b, dep, "d")
    produce(b, src, [({"a": i, "b": 0, "s": "AB"}, b"B") for i in range(10)], partitions=1)
    wait_until(lambda: caught_up(b, group_id(dep, view), src), 60, "the view to catch up")
    gone = camus("cluster", "view", "delete", view, "--kafka", b, "--deployment", dep)
    assert gone.returncode == 0, gone.stderr
    assert view not in camus("cluster", "view", "list", "--kafka", b, "--deployment", dep).stdout
    wait_until(lambda: f"view {view}: stopped" in inst.stderr(), 30,
               "the instance to stop materialising the deleted view")
    assert inst.proc.poll() is None, inst.stderr()  # the instance itself goes on


def test_a_remote_target_materialises_the_same(cluster, materialisers):
    """`--target switch`: the records go through `camus switch serve`, a separate process
    reached over P4Runtime and UDP, as `camus serve --target switch` sends them."""
    b = cluster.bootstrap
    dep, src, view = unique("dep"), unique("src"), unique("view")
    text = 'a < 300 or s == "EF"'
    source_with_views(b, dep, src, 2, SCHEMA, {view: text})
    materialisers(b, dep, "remote", ["--target", "switch"])
    rng = random.Random(11)
    produce(b, src, [doc(rng) for _ in range(1500)])
    wait_until(lambda: caught_up(b, group_id(dep, view), src), 120, "the view to catch up")
    source = read_all(b, src)
    check_view(source, read_all(b, view), expected(SCHEMA, text, source))
