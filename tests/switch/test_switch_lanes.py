"""Both data planes run lanes (pipeline IR 3): random ITCH rule sets compiled into several lanes
give every port exactly what `compiler.semantics` selects, MoldUDP64 pruning and counters
included, and the two implementations agree copy for copy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules
from compiler.rules import parse_rules
from switch.dataplane import IMPLEMENTATIONS, load
from switch_helpers import add_order, itch_frame, route
from test_switch_semantics import FALLBACK_PORT, SPEC, cuts, frames, rule_sets, run_case, wide_rule_sets


def compiled(rules_text: str, lanes):
    rules = parse_rules(rules_text, SPEC)
    c = compile_rules(SPEC, rules, lanes=lanes)
    entries = dict(c.entries, table_entries=list(c.entries["table_entries"]) + [route(0, 0, FALLBACK_PORT)])
    return rules, c, entries


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@settings(max_examples=150, deadline=None)
@given(rules_text=rule_sets, cases=st.lists(st.tuples(frames, cuts), min_size=1, max_size=6),
       lanes=st.integers(2, 6))
def test_lanes_give_every_port_what_the_rules_select(impl, rules_text, cases, lanes):
    rules, c, entries = compiled(rules_text, lanes)
    run_case(load(c.pipeline, entries, impl=impl), rules, cases)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@settings(max_examples=60, deadline=None)
@given(rules_text=wide_rule_sets, cases=st.lists(st.tuples(frames, st.none()), min_size=1, max_size=4))
def test_lanes_with_port_bitmaps_across_words(impl, rules_text, cases):
    rules, c, entries = compiled(rules_text, 4)
    run_case(load(c.pipeline, entries, impl=impl), rules, cases)


def test_lanes_decide_independently_and_union():
    """Four rules on four fields, one lane each: a message matching several gets the union,
    each lane's tables count their own lookups, and a port two lanes select gets one copy."""
    text = ('stock == "GOOGL" : fwd(1)\nprice > 50 : fwd(2, 3)\nshares < 100 : fwd(3)\n'
            'buy_sell_indicator == "S" : fwd(4)')
    rules, c, entries = compiled(text, 4)
    assert len(c.application.all_lanes) == 4
    msgs = [add_order("GOOGL", 60, 50, side=b"S"), add_order("AAPL", 10, 500)]
    frame = itch_frame(msgs, seq=5)
    outs = {impl: load(c.pipeline, entries, impl=impl) for impl in IMPLEMENTATIONS}
    copies = {impl: dp.process(frame, 0) for impl, dp in outs.items()}
    assert copies["native"] == copies["python"]
    assert [p for p, _ in copies["python"]] == [1, 2, 3, 4]  # port 3 from two lanes: one copy
    counters = {impl: dp.counters() for impl, dp in outs.items()}
    assert counters["native"] == counters["python"]
    for lane in c.application.all_lanes:
        t = counters["python"]["tables"][lane.stages[0].table]
        d = counters["python"]["tables"][lane.stages[0].default_table]
        assert t["hits"] + t["misses"] == 2  # every lane looks at both messages
        assert d["hits"] + d["misses"] == t["misses"]
