"""Views with state (docs/stateful.md, "Kafka views") through the broker, against the
reference evaluator: a view holds exactly the records its filter selects when each source
partition's records, in offset order, are the only packets its instances see, whatever the
moment it was created, after AlterConfigs replaced its filter, and after the broker starts
again from its data directory.

The broker runs in this process (`shim.broker.Broker`, no sockets) on the embedded native
switch; the reference is `compiler.semantics.Evaluator` over the filter as the topic's
schema names it (schema fields and `avg(f)` of schema fields, before the broker puts them on
slots and lanes), one evaluator per source partition, fed the partition's records with their
field values and their timestamp as the Kafka header carries it. Real Kafka clients over
sockets, a real `camus serve` and kill -9 are tests/broker/test_stateful_views.py.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shim.broker import Broker, Config, describe_cell
from shim.protocol.records import Record, decode_batches, encode_batch
from shim.topics import TopicError

from . import views_reference

SCHEMA = "stock:str8=$.stock,price:u32=$.price,qty:u16=$.qty"
T0 = 1_700_000_000_000  # ms, a whole second
DAYS_3257 = views_reference.DAYS_3257  # what the header's timestamp is taken modulo


# ---- the reference -----------------------------------------------------------------------

def reference(filter_text: str, records: list[tuple[int, int, dict]]) -> list[int]:
    """The offsets a view with this filter selects among one partition's records
    [(offset, timestamp, value)], in offset order, by the reference evaluator."""
    return views_reference.reference(filter_text, SCHEMA, [
        (o, ts, None, json.dumps(v).encode(), ()) for o, ts, v in records])[0]


# ---- the broker ----------------------------------------------------------------------------

def produce(b: Broker, partition: int, items: list[tuple[int, dict]]) -> None:
    recs = [Record(i, ts, None, json.dumps(v).encode()) for i, (ts, v) in enumerate(items)]
    raw = encode_batch(recs)
    b.append(b.catalog.get("src"), partition, raw, decode_batches(raw))


def log_of(b: Broker, name: str, partition: int) -> list[tuple[int, int, dict]]:
    lg = b.logs[(name, partition)]
    data = lg.read(lg.start_offset, 1 << 40)
    return [(r.offset, r.timestamp, json.loads(r.value)) for bt in decode_batches(data or b"")
            if not bt.is_control for r in bt.records]


def view_offsets(b: Broker, name: str, partition: int) -> list[int]:
    return [o for o, _, _ in log_of(b, name, partition)]


def check(b: Broker, views: dict[str, str], partitions: int) -> None:
    for name, text in views.items():
        for p in range(partitions):
            want = reference(text, log_of(b, "src", p))
            assert view_offsets(b, name, p) == want, (name, text, p)
            # the view's end is its source's: a consumer reaches the high watermark
            assert b.logs[(name, p)].next_offset == b.logs[("src", p)].next_offset


# ---- strategies ------------------------------------------------------------------------------

FIELD_ATOMS = ['stock == "A"', 'stock != "B"', "price > 50", "price <= 20", "qty >= 3", "qty < 2"]
STATE_ATOMS = ["records > 2", "records <= 1", "records == 3", "rate(arrivals) >= 2",
               "avg(price) > 50", "avg(price) <= 30", "avg(qty) >= 2", "avg(qty) < 1",
               "avg(price) in {0, 40, 60}"]


@st.composite
def filters(draw, depth: int = 2):
    """A filter with at least one state predicate, and/or/not over field and state atoms."""
    def node(d):
        if d == 0 or draw(st.booleans()):
            return draw(st.sampled_from(FIELD_ATOMS + STATE_ATOMS * 2))
        op = draw(st.sampled_from(["and", "or", "not"]))
        if op == "not":
            return f"not ({node(d - 1)})"
        return f"({node(d - 1)}) {op} ({node(d - 1)})"
    text = node(depth)
    if not any(a in text for a in STATE_ATOMS):
        text = f"({text}) and {draw(st.sampled_from(STATE_ATOMS))}"
    return text


values = st.fixed_dictionaries({"stock": st.sampled_from(["A", "B"]),
                                "price": st.integers(0, 100), "qty": st.integers(0, 4)})
# Mostly forward in time, across second boundaries, now and then backwards (out of order).
steps = st.integers(-1500, 700)


@st.composite
def runs(draw):
    partitions = draw(st.integers(1, 2))
    batches = []
    clock = [T0] * partitions
    for _ in range(draw(st.integers(1, 10))):
        p = draw(st.integers(0, partitions - 1))
        items = []
        for _ in range(draw(st.integers(1, 4))):
            clock[p] = max(T0 - 5000, clock[p] + draw(steps))
            items.append((clock[p], draw(values)))
        batches.append((p, items))
    created = draw(st.integers(0, len(batches)))  # batches produced before the view is made
    altered = draw(st.none() | st.integers(created, len(batches)))
    return partitions, batches, created, altered


# ---- tests ---------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs(), filters(), filters(), filters())
def test_a_view_with_state_holds_its_filter_over_each_partition_in_order(run, first, second,
                                                                          other):
    """A view created at any point while records flow, altered (new filter, fresh state) at
    any later point, beside another view with state and a stateless one on the same source:
    each holds exactly what the reference selects from the whole source, and so does each
    after the broker starts again from its data directory."""
    partitions, batches, created, altered = run
    with tempfile.TemporaryDirectory() as d:
        b = Broker(Config(data_dir=Path(d)))
        b.create_topic("src", partitions, {"camus.schema": SCHEMA}, partitions_given=True)
        b.create_topic("other", 1, {"camus.source": "src", "camus.filter": other})
        b.create_topic("plain", 1, {"camus.source": "src", "camus.filter": "price > 50"})
        views = {"other": other}
        for i, (p, items) in enumerate(batches):
            if i == created:
                b.create_topic("view", 1, {"camus.source": "src", "camus.filter": first})
                views["view"] = first
            if i == altered:
                b.alter_topic(b.catalog.get("view"), {"camus.source": "src",
                                                      "camus.filter": second})
                views["view"] = second
            produce(b, p, items)
        if created == len(batches):
            b.create_topic("view", 1, {"camus.source": "src", "camus.filter": first})
            views["view"] = first
        if altered == len(batches):
            b.alter_topic(b.catalog.get("view"), {"camus.source": "src", "camus.filter": second})
            views["view"] = second
        check(b, views, partitions)
        for p in range(partitions):
            assert view_offsets(b, "plain", p) == [o for o, _, v in log_of(b, "src", p)
                                                   if v["price"] > 50]
        held = {(name, p): view_offsets(b, name, p) for name in views for p in range(partitions)}
        b.datapath.close()

        again = Broker(Config(data_dir=Path(d)))  # as after kill -9: logs and topics.json only
        assert {(name, p): view_offsets(again, name, p) for name in views
                for p in range(partitions)} == held
        produce(again, 0, [(T0 + 9000, {"stock": "A", "price": 77, "qty": 3})])
        check(again, views, partitions)
        again.datapath.close()


def test_the_slides_rule_and_what_describe_reads_from_the_switch():
    """`stock == "GOOGL" and avg(price) > 50` (the slides), record by record, and the
    instance the switch holds after it, as DescribeConfigs shows it."""
    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": "stock:str8=$.stock,price:u32=$.price"})
    b.create_topic("hot", 1, {"camus.source": "src",
                              "camus.filter": 'stock == "GOOGL" and avg(price) > 50'})
    items = [(T0, {"stock": "GOOGL", "price": 40}), (T0 + 1, {"stock": "GOOGL", "price": 70}),
             (T0 + 2, {"stock": "MSFT", "price": 999}), (T0 + 3, {"stock": "GOOGL", "price": 30}),
             (T0 + 1000, {"stock": "GOOGL", "price": 60}), (T0 + 1001, {"stock": "GOOGL", "price": 51})]
    produce(b, 0, items)
    # 40 (average 40), 70 (55: in), MSFT (not in scope), 30 (46.7), then a new second: 60, 51
    assert view_offsets(b, "hot", 0) == [1, 4, 5]
    window = (T0 + 1000) % DAYS_3257 // 1000
    state = b.view_state(b.catalog.get("hot"))
    assert state == {"0.avg(price)": describe_cell(b.datapath.spec.state_vars["avg(kafka.avg0)"],
                                                   window, 2, 111)}
    assert state["0.avg(price)"].startswith(f"window {window} (from 2023-11-14T22:13:21.000Z")
    assert state["0.avg(price)"].endswith("n=2 s=111 avg=55.5")
    b.datapath.close()


def test_views_with_state_never_see_each_others_records_or_the_sources_packets():
    """Equal filters on two views are two sets of instances; a stateless view and a group
    member's subscription on the same source do not feed them."""
    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": SCHEMA})
    produce(b, 0, [(T0 + i, {"stock": "A", "price": 1, "qty": 1}) for i in range(3)])
    b.create_topic("first", 1, {"camus.source": "src", "camus.filter": "records <= 2"})
    produce(b, 0, [(T0 + 10 + i, {"stock": "A", "price": 1, "qty": 1}) for i in range(3)])
    b.create_topic("second", 1, {"camus.source": "src", "camus.filter": "records <= 2"})
    b.create_topic("plain", 1, {"camus.source": "src", "camus.filter": "price > 0"})
    produce(b, 0, [(T0 + 1000, {"stock": "A", "price": 1, "qty": 1})])
    # the first two records of each second, for both, whenever they were created
    assert view_offsets(b, "first", 0) == view_offsets(b, "second", 0) == [0, 1, 6]
    assert view_offsets(b, "plain", 0) == list(range(7))
    assert b.view_state(b.catalog.get("first"))["0.records"].endswith("n=1")
    b.datapath.close()


@pytest.mark.parametrize("text, message", [
    ("avg(stock) > 3", "avg(stock): stock is str8; only numeric schema fields of at most 32 bits"),
    ("avg(price) > 3 or avg(qty) > 1 or avg(big) > 2", "big is u64"),
    ("avg(price) > 3 or avg(qty) > 1 or avg(small) > 2", "a view averages at most 2 fields"),
    ("avg(qty) > 70000", "constant 70000 is out of range for avg(qty) (at most 65535)"),
    ("rate(records) > 3", "'records' is a counter, not a meter"),
    ("records > 3 and count(records)", "expected"),
])
def test_bad_filters_with_state_are_refused_with_their_column(text, message):
    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": SCHEMA + ",big:u64=$.big,small:u8=$.small"})
    with pytest.raises(TopicError, match="camus.filter:1:") as got:
        b.create_topic("v", 1, {"camus.source": "src", "camus.filter": text})
    assert message in str(got.value) and got.value.code_name == "invalid_config"
    assert b.catalog.get("v") is None
    b.datapath.close()


def test_a_schema_field_named_like_a_state_is_the_field():
    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": "records:u8=$.records"})
    b.create_topic("v", 1, {"camus.source": "src", "camus.filter": "records > 3"})
    assert not b.catalog.get("v").stateful
    produce(b, 0, [(T0, {"records": 5}), (T0, {"records": 1})])
    assert view_offsets(b, "v", 0) == [0]
    b.datapath.close()


def test_compacted_sources_are_refused():
    b = Broker(Config())
    b.create_topic("compacted", 1, {"camus.schema": SCHEMA, "cleanup.policy": "compact"})
    with pytest.raises(TopicError, match="is compacted"):
        b.create_topic("v", 1, {"camus.source": "compacted", "camus.filter": "records > 1"})
    b.create_topic("src", 1, {"camus.schema": SCHEMA})
    b.create_topic("v", 1, {"camus.source": "src", "camus.filter": "records > 1"})
    with pytest.raises(TopicError, match="would compact away"):
        b.alter_topic(b.catalog.get("src"), {"camus.schema": SCHEMA, "cleanup.policy": "compact"})
    b.datapath.close()


def test_new_source_partitions_rebuild_the_view_with_a_rule_each():
    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": SCHEMA})
    b.create_topic("v", 1, {"camus.source": "src", "camus.filter": "records <= 1"})
    produce(b, 0, [(T0, {"stock": "A"}), (T0 + 1, {"stock": "A"})])
    b.add_partitions(b.catalog.get("src"), 2)
    produce(b, 1, [(T0, {"stock": "A"}), (T0 + 1, {"stock": "A"})])
    produce(b, 0, [(T0 + 2, {"stock": "A"})])
    assert [view_offsets(b, "v", p) for p in (0, 1)] == [[0], [0]]
    b.datapath.close()


def test_state_the_target_lost_is_rebuilt_from_the_source():
    """A target loaded whole (after a write it refused) starts with empty registers: the
    broker feeds its views with state again and they hold what they held."""
    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": SCHEMA})
    b.create_topic("v", 1, {"camus.source": "src", "camus.filter": "records <= 2"})
    produce(b, 0, [(T0 + i, {"stock": "A"}) for i in range(4)])
    assert view_offsets(b, "v", 0) == [0, 1]
    b.datapath._reload = True  # the next commit loads the target whole
    b.create_topic("w", 1, {"camus.source": "src", "camus.filter": "price > 1"})
    produce(b, 0, [(T0 + 10, {"stock": "A"})])
    assert view_offsets(b, "v", 0) == [0, 1]  # the fifth record is the third of its second
    produce(b, 0, [(T0 + 1000, {"stock": "A"})])
    assert view_offsets(b, "v", 0) == [0, 1, 5]
    b.datapath.close()


def test_a_filter_the_compiler_refuses_is_refused_when_the_view_is_made():
    """More boundaries on one state than a bind entry holds (8): refused at CreateTopics,
    INVALID_CONFIG, with the compiler's message."""
    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": SCHEMA})
    with pytest.raises(TopicError, match="camus.filter:1:1: .* thresholds") as got:
        b.create_topic("v", 1, {"camus.source": "src",
                                "camus.filter": "records in {1, 2, 3, 4, 5, 6, 7, 8, 9}"})
    assert got.value.code_name == "invalid_config" and b.catalog.get("v") is None
    b.datapath.close()


def test_a_compiler_rebuilt_after_a_failed_change_moves_no_instance_unseen():
    """A change that fails rebuilds the compiler from the rules it held, which places their
    instances afresh (here: B and C move down into A's freed cells). The target, which
    still holds them where they were, is then loaded whole at the next change and the views
    with state are fed again: they hold what the reference says, before and after."""
    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": SCHEMA})
    views = {n: "records <= 1" for n in ("a", "bb", "c")}
    for n in views:
        b.create_topic(n, 1, {"camus.source": "src", "camus.filter": views[n]})
    produce(b, 0, [(T0 + i, {"stock": "A"}) for i in range(3)])
    b.delete_topic(b.catalog.get("a"))
    del views["a"]
    before = {n: b.datapath.instances[p] for p, n in b.view_ports.items()}

    def fail(*args):
        raise RuntimeError("a change that fails")

    change, b.datapath.budget.change = b.datapath.budget.change, fail
    with pytest.raises(RuntimeError):
        b.create_topic("d", 1, {"camus.source": "src", "camus.filter": "records > 1"})
    b.datapath.budget.change = change
    assert b.datapath._reload  # the rebuilt compiler placed them elsewhere
    # a new view with state takes cells the compiler now thinks free, which the target's
    # old binding of c still uses: without the reload, c and e would share an instance
    b.create_topic("e", 1, {"camus.source": "src", "camus.filter": "records <= 1"})
    views["e"] = "records <= 1"
    assert {n: b.datapath.instances[p] for p, n in b.view_ports.items() if n in before} != before
    produce(b, 0, [(T0 + 1000 + i, {"stock": "A"}) for i in range(2)])
    check(b, views, 1)
    b.datapath.close()


def test_a_large_change_staged_as_a_new_switch_keeps_the_instances():
    """A change of 1,000 writes or more replaces the embedded switch with one built aside
    (controller.embedded.REBUILD_AT); the instances of the views with state are carried
    over: the third record of a second is still the third."""
    from controller.embedded import REBUILD_AT

    b = Broker(Config())
    b.create_topic("src", 1, {"camus.schema": SCHEMA})
    b.create_topic("v", 1, {"camus.source": "src", "camus.filter": "records <= 2"})
    produce(b, 0, [(T0, {"price": 1}), (T0 + 1, {"price": 2})])
    old = b.datapath.target.switch
    writes = b.datapath.stats.writes
    wide = " or ".join(f"price == {3 * i}" for i in range(1000))
    b.create_topic("wide", 1, {"camus.source": "src", "camus.filter": wide})
    assert b.datapath.stats.writes - writes >= REBUILD_AT and b.datapath.target.switch is not old
    produce(b, 0, [(T0 + 2, {"price": 3}), (T0 + 1000, {"price": 4})])
    assert view_offsets(b, "v", 0) == [0, 1, 3]
    assert view_offsets(b, "wide", 0) == [2]
    b.datapath.close()
