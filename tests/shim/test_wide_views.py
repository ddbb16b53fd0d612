"""Views whose filter is too wide for disjunctive normal form, at the data path (issue 16
items 2 and 7): while any endpoint's rule is wide, each change compiles every rule from
scratch (`compile_rules`, the compiler's formula path) and writes the difference; once none
is, the incremental compiler takes over again (shim.approximation).

Random sequences of views added and removed, wide (an `and` of 17 to 22 two-atom `or`s) and
plain, some under a small entry budget: after every change the switch holds exactly what a
from-scratch compile of the endpoints' rules gives, and each view receives exactly the
records `compiler.semantics` selects.
"""

from __future__ import annotations

import json
import logging

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules
from compiler.approximate import approximate_rules
from compiler.formula import wide
from compiler.incremental import Incremental
from compiler.semantics import holds
from shim.approximation import SLOT_NAMES, WholeCompile
from shim.protocol.records import Record
from shim.schema import parse_schema
from shim.subscriptions import rules_for, view_filter

from .inline import data_path, delivered

SCHEMA = parse_schema("a:u16=$.a,b:u32=$.b,c:u16=$.c,d:u32=$.d")
FIELDS = "abcd"
OPS = ("<", "<=", ">", ">=", "==", "!=")


@st.composite
def wide_filters(draw) -> str:
    """An `and` of 17..22 two-atom `or`s: more than 100,000 alternatives in normal form."""
    n = draw(st.integers(17, 22))
    clauses = []
    for _ in range(n):
        x, y = draw(st.lists(st.sampled_from(FIELDS), min_size=2, max_size=2, unique=True))
        clauses.append(f"({x} {draw(st.sampled_from(OPS))} {draw(st.integers(0, 40))} or "
                       f"{y} {draw(st.sampled_from(OPS))} {draw(st.integers(0, 40))})")
    return " and ".join(clauses)


@st.composite
def plain_filters(draw) -> str:
    x, y = draw(st.lists(st.sampled_from(FIELDS), min_size=2, max_size=2, unique=True))
    return (f"{x} {draw(st.sampled_from(OPS))} {draw(st.integers(0, 40))} and "
            f"{y} {draw(st.sampled_from(OPS))} {draw(st.integers(0, 40))}")


# A step: add a view with this filter, or remove the i-th view still held.
steps = st.lists(st.one_of(wide_filters(), plain_filters(), st.integers(0, 5)),
                 min_size=2, max_size=7)


def values(records: list[Record]) -> list[dict]:
    return [dict(zip(SLOT_NAMES, SCHEMA.extract(None, r.value, []))) for r in records]


def entries_key(entries) -> list[str]:
    return sorted(json.dumps(e, sort_keys=True) for e in entries)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.sampled_from((0, 0, 30)),
       st.lists(st.tuples(*[st.integers(0, 42)] * 4), min_size=20, max_size=40))
def test_wide_views_are_exact_through_adds_and_removes(plan, budget, docs):
    logging.getLogger("camus.datapath").setLevel(logging.ERROR)
    dp = data_path("native")
    dp.budget.max_entries = budget
    records = [Record(i, 1, None, json.dumps(dict(zip(FIELDS, d))).encode())
               for i, d in enumerate(docs)]
    views: dict[int, object] = {}
    for step in plan:
        if isinstance(step, int):
            if not views:
                continue
            port = list(views)[step % len(views)]
            del views[port]
            dp.unsubscribe(port)
        else:
            port = dp.allocate_port()
            views[port] = view_filter(dp.spec, SCHEMA, step)
            dp.subscribe(port, 7, None, views[port])
        dp.sync()
        rules = rules_for(dp.spec, [dp.subscriptions[p] for p in views])
        held_wide = any(wide(r.filter) for r in rules)
        assert isinstance(dp.compiler, WholeCompile if held_wide else Incremental)
        given_rules = approximate_rules(rules, dp.held.alpha)
        scratch = compile_rules(dp.spec, given_rules, static=True).entries["table_entries"]
        assert entries_key(dp.target.entries()) == entries_key(scratch)
        if held_wide:
            assert dp.held.alpha == {} and dp.held.recheck == {}
        out = delivered(dp.send, 7, 0, SCHEMA, records)
        vals = values(records)
        for port, f in views.items():
            want = [i for i, v in enumerate(vals) if holds(f, v)]
            assert [o for o, _ in out.get(port, [])] == want
        event("wide held" if held_wide else "incremental")


def test_a_wide_view_over_the_budget_is_held_exact_and_said_once(caplog):
    """The α fit works on normal forms; a rule set holding a wide filter is held exact, its
    excess over the budget logged once, and nothing is re-checked. Once the wide view goes,
    the plain views over the budget are approximated again (incremental compiler), as far
    as rounding goes (`c == 3` cannot be rounded)."""
    dp = data_path("native")
    dp.budget.max_entries = 5
    w = " and ".join(f"(a > {i} or b < {100 + i})" for i in range(20))
    with caplog.at_level(logging.WARNING, logger="camus.datapath"):
        plain = []
        for i in range(6):
            plain.append(dp.allocate_port())
            dp.subscribe(plain[-1], 7, None,
                         view_filter(dp.spec, SCHEMA, f"b > {i * 1000 + 7} and d < {i * 31 + 3}"))
        dp.sync()
        assert dp.held.alpha and set(dp.held.recheck) == set(plain)
        port = dp.allocate_port()
        dp.subscribe(port, 7, None, view_filter(dp.spec, SCHEMA, w))
        dp.sync()
        assert isinstance(dp.compiler, WholeCompile)
        assert dp.held.alpha == {} and dp.held.recheck == {}
        assert dp.held.entries == len(dp.target.entries()) > 5
        dp.subscribe(dp.allocate_port(), 7, None, view_filter(dp.spec, SCHEMA, "c == 3"))
        dp.sync()
        said = [r.getMessage() for r in caplog.records if "too wide for normal form" in r.getMessage()]
        assert len(said) == 2 and "never approximated" in said[1]
        dp.unsubscribe(port)
        dp.sync()
    assert isinstance(dp.compiler, Incremental)
    assert dp.held.alpha and dp.held.recheck and set(dp.held.recheck) <= set(plain)
    assert dp.held.entries == len(dp.target.entries())
