"""The entry budget at the data path: approximated superset on the switch + exact re-check at
the edge = exactly what each view's filter selects (shim.approximation, issue 16 item 4).

Random view filters over a topic schema, random records (values near the filters' constants
as often as not), a small random budget: what every view receives equals what
`compiler.semantics` says its filter selects, the switch delivered at least that (a
superset: re-checked = kept + dropped), and the switch holds exactly what a from-scratch
compile of the rules it was given (approximated or not) makes, within the budget when any
rounding can bring it there.
"""

from __future__ import annotations

import json
import logging
import struct

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compiler.ast import And, Atom, Const, Filter, Not, Or
from compiler.compile import compile_rules
from compiler.approximate import approximate_rules
from compiler.semantics import holds
from shim import reframe
from shim.approximation import SLOT_NAMES, recheck
from shim.protocol.records import Record
from shim.schema import parse_schema
from shim.subscriptions import kafka_spec, rules_for, view_filter

from .inline import data_path, delivered

SCHEMA = parse_schema("price:u32=$.price,qty:u32=$.qty,side:u8=$.side")
FIELDS = ("price", "qty", "side")
TOPS = {"price": 2**32 - 1, "qty": 2**32 - 1, "side": 255}
OPS = ("==", "!=", "<", "<=", ">", ">=")

constants = st.one_of(st.integers(0, 5000), st.integers(0, 2**32 - 1))


@st.composite
def filters(draw, depth: int = 0) -> str:
    """A view's camus.filter text over the schema's names."""
    if depth >= 2 or draw(st.booleans()):
        name = draw(st.sampled_from(FIELDS))
        value = min(draw(constants), TOPS[name])
        return f"{name} {draw(st.sampled_from(OPS))} {value}"
    kind = draw(st.sampled_from(("and", "or", "not")))
    if kind == "not":
        return f"not ({draw(filters(depth + 1))})"
    items = draw(st.lists(filters(depth + 1), min_size=2, max_size=3))
    return "(" + f" {kind} ".join(items) + ")"


def constants_of(f: Filter) -> list[int]:
    if isinstance(f, Atom):
        return [f.value]
    if isinstance(f, (And, Or)):
        return [c for i in f.items for c in constants_of(i)]
    if isinstance(f, Not):
        return constants_of(f.item)
    return []


@st.composite
def cases(draw):
    texts = draw(st.lists(filters(), min_size=1, max_size=6))
    budget = draw(st.sampled_from((1, 5, 20, 60, 0)))
    near = draw(st.lists(st.integers(-2, 2), min_size=1, max_size=5))
    n = draw(st.integers(1, 60))
    seeds = draw(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
                                    st.integers(0, 255), st.integers(0, 10**9)),
                          min_size=n, max_size=n))
    return texts, budget, near, seeds


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_superset_plus_recheck_is_exact(case):
    texts, budget, near, seeds = case
    logging.getLogger("camus.datapath").setLevel(logging.ERROR)
    dp = data_path("native")
    dp.budget.max_entries = budget
    views = {}
    for text in texts:
        port = dp.allocate_port()
        views[port] = view_filter(dp.spec, SCHEMA, text)
        dp.subscribe(port, 7, None, views[port])
    dp.sync()
    # The records: uniform values, and values next to the filters' constants.
    consts = sorted({c for f in views.values() for c in constants_of(f)}) or [0]
    docs = []
    for i, (p, q, s, pick) in enumerate(seeds):
        if i % 2:
            c = consts[pick % len(consts)] + near[pick % len(near)]
            p = q = max(0, min(c, 2**32 - 1))
            s = max(0, min(c, 255))
        docs.append({"price": p, "qty": q, "side": s})
    records = [Record(i, 1, None, json.dumps(d).encode()) for i, d in enumerate(docs)]
    out = delivered(dp.send, 7, 0, SCHEMA, records)

    for port, f in views.items():
        want = [i for i, d in enumerate(docs)
                if holds(f, dict(zip(SLOT_NAMES, SCHEMA.extract(None, records[i].value, []))))]
        assert [o for o, _ in out.get(port, [])] == want, (port, texts)
        if port in dp.held.recheck:
            checked = dp.stats.rechecked.get(port, 0)
            assert checked - dp.stats.false_positives.get(port, 0) == len(want)
        else:
            assert port not in dp.stats.rechecked
    event("approximated" if dp.held.alpha else "exact")
    event("false positives dropped" if any(dp.stats.false_positives.values()) else "none dropped")
    # The switch holds the from-scratch compile of the rules it was given.
    given_rules = approximate_rules(rules_for(dp.spec, [dp.subscriptions[p] for p in views]),
                                  dp.held.alpha)
    scratch = compile_rules(dp.spec, given_rules, static=True).entries["table_entries"]
    key = lambda e: json.dumps(e, sort_keys=True)  # noqa: E731
    assert sorted(map(key, dp.target.entries())) == sorted(map(key, scratch))
    assert dp.held.entries == len(scratch)
    if dp.held.alpha:  # approximated only where the exact rules are over the budget
        exact = compile_rules(dp.spec, rules_for(dp.spec, [dp.subscriptions[p] for p in views]),
                              static=True).entries["table_entries"]
        assert len(exact) > budget >= 1
    # Dropping all but one view: the rest stays exact per the filters, whatever α now is.
    for port in list(views)[1:]:
        dp.unsubscribe(port)
    dp.sync()
    assert dp.held.entries == len(dp.target.entries())
    first = next(iter(views))
    out = delivered(dp.send, 7, 0, SCHEMA, records)
    want = [i for i, d in enumerate(docs)
            if holds(views[first], dict(zip(SLOT_NAMES, SCHEMA.extract(None, records[i].value, []))))]
    assert [o for o, _ in out.get(first, [])] == want


def test_recheck_reads_the_slots_the_frames_carry():
    schema = parse_schema("price:u32=$.price")
    f = view_filter(kafka_spec(), schema, "price > 10")
    values = [b'{"price": 11}', b'{"x": 1}', b'{"price": 10}', b'{"price": 99}']
    recs = [Record(5 + i, 1, None, v) for i, v in enumerate(values)]
    frames = [fr for r in recs for fr in reframe.packets(
        3, 0, r.offset, schema.extract(None, r.value, []),
        reframe.Record(r.timestamp, r.key, r.value), fragment=4)]  # fragments: slots once
    slots = reframe.slots_of(b"".join(frames), struct.pack(f"<{len(frames)}I", *map(len, frames)))
    assert slots == {5: (11,) + (0,) * 7, 6: (0,) * 8, 7: (10,) + (0,) * 7, 8: (99,) + (0,) * 7}
    items = [(r.offset, r) for r in recs]
    assert [o for o, _ in recheck(slots, items, f, {})] == [5, 8]
    assert recheck(slots, items, Const(True), {}) == items


def test_a_change_estimated_over_the_budget_is_never_compiled_exactly(monkeypatch):
    """New rules with enough conjunctions for the estimate to be trusted (the threshold
    lowered here from 10,000 to 5) and estimated over the budget go to the approximation at
    once: the compiler is never handed their exact form (the compile that could blow up)."""
    import shim.approximation as approximation

    monkeypatch.setattr(approximation, "TRUST_ESTIMATE_AT", 5)
    dp = data_path("native")
    dp.budget.max_entries = 30
    handed = []
    change = dp.compiler.change
    dp.compiler.change = lambda added, removed: handed.append(added) or change(added, removed)
    views = {}
    for i in range(8):
        port = dp.allocate_port()
        views[port] = view_filter(dp.spec, SCHEMA, f"price > {i * 1237} and qty < {i * 977 + 5}")
        dp.subscribe(port, 7, None, views[port])
    dp.sync()
    assert handed == [] and dp.held.alpha and dp.held.entries <= 30
    assert set(dp.held.recheck) == set(views)


def test_over_the_budget_with_nothing_to_round_stays_incremental(caplog):
    """Views that differ only in equalities cannot be rounded: past the budget each change is
    kept as the incremental compiler made it (the same writes as with no budget at all, not
    a rebuild), the warning given once, and nothing is re-checked (the rules are exact)."""
    budgeted, free = data_path("native"), data_path("native")
    budgeted.budget.max_entries, free.budget.max_entries = 3, 0
    compiler = budgeted.compiler
    with caplog.at_level(logging.WARNING, logger="camus.datapath"):
        for i in range(6):
            for dp in (budgeted, free):
                dp.subscribe(dp.allocate_port(), 7, None,
                             view_filter(dp.spec, SCHEMA, f"side == {i}"))
            assert budgeted.sync() == free.sync()
    said = [r for r in caplog.records if "no rounding" in r.getMessage()]
    assert len(said) == 1
    assert budgeted.compiler is compiler  # changed in place, never rebuilt
    assert budgeted.held.alpha == {} and budgeted.held.recheck == {}
    assert budgeted.held.entries == len(budgeted.target.entries()) > 3
