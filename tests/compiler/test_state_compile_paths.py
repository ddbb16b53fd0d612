"""The stateful compiler's shortcuts against its general paths (compiler/stateful.py).

`compile_rule` takes the shortcut `_compile_flat` for an `and` of predicates (worked out
once per shape of state predicates), and `State._plan` takes `_plan_by_rule` when every
bound rule has one state; the contexts of a compile are found from the leaves' sorted
ports (`compiler.compile._emit_stateful`). Each shortcut must give exactly what the general
path gives: the same pseudo-rules (filters and markers), the same bind and decide plans,
the same contexts. The end-to-end check (tables against the evaluator) is
tests/compiler/test_state_compile.py; these pin the shortcuts to the general code on
shapes the end-to-end tests meet rarely (many combinations, constants and repeated shapes).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import stateful as sf
from compiler.compile import compile_rules
from compiler.errors import StateError
from compiler.rules import parse_rules

from .test_state_compile import SPEC
from .test_stateful_properties import FIELD_ATOMS, OPS, STATE_ATOMS, UPDATES


def flat_rule(rng: random.Random) -> str:
    """An `and` of field and state predicates (at least one state predicate, or an update
    action), with constants near the values the states take."""
    atoms = []
    for _ in range(rng.randint(1, 4)):
        table = STATE_ATOMS if rng.random() < 0.6 else FIELD_ATOMS
        name = rng.choice(sorted(table))
        op = rng.choice(["==", "!="]) if name == "k" else rng.choice(OPS)
        atoms.append(f"{name} {op} {rng.choice(table[name])}")
    actions = ["fwd(" + ", ".join(map(str, rng.sample(range(1, 6), rng.randint(1, 2)))) + ")"]
    if rng.random() < 0.4:
        actions += rng.sample(UPDATES, rng.randint(1, 2))
    return " and ".join(atoms) + " : " + ", ".join(actions)


def shape(rs: sf.RuleState):
    return (rs.vars, rs.bounds, rs.scoped, rs.updates, rs.combinations,
            [(p.filter, p.ports, p.line, p.text) for p in rs.pseudo])


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_flat_rules_compile_as_the_general_path_does(seed):
    rng = random.Random(seed)
    rules = [r for r in parse_rules("\n".join(flat_rule(rng) for _ in range(8)), SPEC)
             if sf.stateful(r)]
    shapes: dict = {}  # shared by the rules, as a State shares it: shapes repeat
    for serial, rule in enumerate(rules):
        assert sf.flat(rule.filter)
        try:
            want = sf._compile_any(rule, serial)
        except StateError as exc:
            try:
                sf.compile_rule(rule, serial, shapes)
            except StateError as got:
                assert str(got) == str(exc)
                continue
            raise AssertionError(f"the shortcut compiled what the general path refuses: {rule}")
        got = sf.compile_rule(rule, serial, shapes)
        assert shape(got) == shape(want), rule.text


def test_a_shape_compiled_once_serves_rules_with_other_fields_and_serials():
    rules = parse_rules('k == 1 and c < 3 : fwd(1), count(c)\n'
                        'a > 7 and k == 2 and c < 3 : fwd(2), count(c)\n'
                        'c < 3 : fwd(3), count(c)\n', SPEC)
    shapes: dict = {}
    for serial, rule in enumerate(rules):
        got, want = sf.compile_rule(rule, serial + 5, shapes), sf._compile_any(rule, serial + 5)
        assert shape(got) == shape(want)
    assert len(shapes) == 1


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(2, 12))
def test_compiles_plan_by_rule_as_the_general_plan_does(seed, n_rules):
    rng = random.Random(seed)
    text = "\n".join(flat_rule(rng) for _ in range(n_rules))
    try:
        c = compile_rules(SPEC, parse_rules(text, SPEC))
    except StateError:
        return
    # Compile again to reach the State: every bound set of the compile, planned both ways.
    state = sf.State(SPEC)
    for r in parse_rules(text, SPEC):
        if sf.stateful(r):
            state.add(r)
    d = c.diagram
    contexts = {state.context(d.contents[s][0]) for s in d.reachable()
                if not d.contents[s][1] and d.contents[s][0]} - {None}
    state.allocate(contexts)
    names = sf.tables_for(SPEC, c.pipeline.applications[0].state)
    for ctx in contexts:
        if all(len(state.rules[s].vars) == 1 for s, _ in ctx.bound):
            assert state._plan_by_rule(ctx.bound, names) == state._plan_any(ctx.bound, names)


def test_contexts_are_equal_by_ports_and_bound_and_keep_their_hash():
    a = sf.Context(frozenset({1, 2}), ((0, frozenset({1})),))
    b = sf.Context(frozenset({2, 1}), ((0, frozenset({1})),))
    other = sf.Context(frozenset({1, 2}), ((0, frozenset({0})),))
    assert a == b and hash(a) == hash(b) and len({a, b, other}) == 2
    assert a != other and a != (a.ports, a.bound)


def test_a_leafs_context_is_the_same_from_its_markers_or_its_ports():
    state = sf.State(SPEC)
    for r in parse_rules("k == 1 and c > 2 : fwd(1)\nk == 1 and avg(a) >= 3 : fwd(2)\n", SPEC):
        state.add(r)
    ports = frozenset({1, 4, sf.marker(0, 1), sf.marker(0, sf.SCOPE), sf.marker(1, 1)})
    markers = sorted(p for p in ports if sf.is_marker(p))
    assert state.context(ports) == state.context(ports, markers)
    assert state.context(ports).bound == ((0, frozenset({1})), (1, frozenset({1})))
    assert state.context(frozenset({1, 4})) is None
    assert state.context(frozenset({1, 4}), []) is None
