"""The equality-only fast path (`compiler.exact_only`): the same entries, pipeline and sizes as
the general compile, and the reference evaluator's port sets, on every packet."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import exact_only
from compiler.compile import TooLarge, compile_rules
from compiler.dot import render
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import parse_spec
from compiler.tables import state_ids
from pipeline import document

# A 3-bit field (the whole domain can be covered, the top and bottom values named) beside a
# 32-bit one, each declared exact or range (an equality-only range field compiles exact).
SPEC = parse_spec("""
header msg {
    bit<3>  small;
    bit<32> big;
    bit<5>  pad;
}
@pragma query_field_exact(msg.small)
@pragma query_field(msg.big)
""", name="t")


def general(rules, **kw):
    with exact_only.general_only():
        return compile_rules(SPEC, rules, **kw)


def same(a, b) -> None:
    assert written(a) == written(b)  # entries.json (the fast path writes it without objects)
    assert a.entries == b.entries
    assert drawn(a) == drawn(b)  # the diagram itself (`camus compile --dot`)
    assert document.dumps(a.pipeline) == document.dumps(b.pipeline)
    for key in ("rules", "conjunctions", "fields", "entries", "states", "state_width",
                "multicast_groups"):
        assert a.stats[key] == b.stats[key], key


def written(c) -> str:
    out = io.StringIO()
    c.write_entries(out)
    return out.getvalue()


def drawn(c) -> str:
    d = c.diagram
    return render(d, state_ids(d, d.reachable(), bits=c.pipeline.state_width))


rule_sets = st.one_of(
    st.lists(st.tuples(st.just("small"), st.integers(0, 7),
                       st.sets(st.integers(1, 5), min_size=1, max_size=3)), min_size=1,
             max_size=12),
    st.lists(st.tuples(st.just("big"), st.one_of(st.integers(0, 40),
                                                 st.integers(2**32 - 4, 2**32 - 1)),
                       st.sets(st.integers(1, 5), min_size=1, max_size=3)), min_size=1,
             max_size=12))


def text(rules) -> str:
    return "\n".join(f"{f} == {v} : fwd({', '.join(map(str, sorted(p)))})" for f, v, p in rules)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_sets)
def test_fast_path_equals_general_compile_and_semantics(spec_rules):
    rules = parse_rules(text(spec_rules), SPEC)
    fast = compile_rules(SPEC, rules)
    assert exact_only.diagram_for(SPEC, rules, None, False) is not None  # the fast path
    same(fast, general(rules))
    tables = fast.tables()
    field = spec_rules[0][0]
    top = 7 if field == "small" else 2**32 - 1
    values = {v for _, v, _ in spec_rules}
    probes = values | {max(v - 1, 0) for v in values} | {min(v + 1, top) for v in values} | {0, top}
    for v in probes:
        msg = {f"msg.{field}": v}
        assert tables.ports(fast.application, msg) == evaluate(rules, msg), msg


def test_whole_domain_covered_by_one_port_set():
    # Every value of the 3-bit field leads to port 1: the root's one interval, no dead state.
    rules = parse_rules("\n".join(f"small == {v} : fwd(1)" for v in range(8)), SPEC)
    fast = compile_rules(SPEC, rules)
    same(fast, general(rules))


@pytest.mark.parametrize("rules", [
    "small == 1 : fwd(1)\nbig == 2 : fwd(2)",      # two fields
    "small == 1 and big == 2 : fwd(1)",            # a conjunction
    "small != 1 : fwd(1)",                         # not an equality
    "big > 3 : fwd(1)",
])
def test_other_shapes_take_the_general_path(rules):
    parsed = parse_rules(rules, SPEC)
    assert exact_only.diagram_for(SPEC, parsed, None, False) is None


def test_over_budget_is_refused_and_the_estimate_is_exact():
    rules = parse_rules("\n".join(f"big == {v} : fwd(1)" for v in range(0, 20, 2)), SPEC)
    with pytest.raises(TooLarge, match="budget of 9 entries"):
        compile_rules(SPEC, rules, max_entries=9)  # left to the general path, which says why
    c = compile_rules(SPEC, rules, max_entries=10)
    assert c.stats["estimate"]["entries"] == c.stats["entries"]["total"] == 10


def test_decimal_shortcut_in_the_parser_still_checks_every_constant():
    # After the first decimal on (field, op) is typed, later ones skip the typer (1M hICN
    # identifiers); one that does not fit must still be refused at its own line and column.
    from compiler.errors import RuleError

    rules = parse_rules("small == 1 : fwd(1)\nsmall == 007 : fwd(2)", SPEC)
    assert [r.filter.value for r in rules] == [1, 7]
    with pytest.raises(RuleError, match="does not fit in 3-bit") as info:
        parse_rules("small == 1 : fwd(1)\nsmall == 8 : fwd(2)", SPEC)
    assert (info.value.line, info.value.column) == (2, 10)


def test_entries_come_straight_from_the_values_and_the_diagram_when_read():
    # A wide field: the dead state is the default, the entries are written from the values
    # and the diagram is only built when something reads it (`--dot`, here `same`).
    rules = parse_rules("\n".join(f"big == {v} : fwd({v % 3 + 1})" for v in range(0, 50, 3)), SPEC)
    fast = compile_rules(SPEC, rules)
    assert "_build" in vars(fast.diagram)
    same(fast, general(rules))
    assert "_build" not in vars(fast.diagram)


def test_a_leaf_spanning_more_than_the_dead_state_takes_the_general_emit():
    # Six of eight values to port 1: that leaf is the default entry, the dead values get
    # entries of their own; the entries come from the diagram, as in the general path.
    rules = parse_rules("\n".join(f"small == {v} : fwd(1)" for v in range(1, 7)), SPEC)
    plan = exact_only.diagram_for(SPEC, rules, None, False)
    assert not plan.prepare("t_leaf", 1, 16)
    same(compile_rules(SPEC, rules), general(rules))
