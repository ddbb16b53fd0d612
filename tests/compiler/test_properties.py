"""Compiled tables agree with the reference evaluator, always (ARCHITECTURE: "Correctness")."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules
from compiler.rules import parse_rules
from compiler.semantics import evaluate

from .gen import random_message, random_rules, random_spec


def check(seed: int, n_rules: int, n_messages: int = 200, permute: bool = False,
          static: bool = False) -> None:
    rng = random.Random(seed)
    spec, gens = random_spec(rng)
    rules = parse_rules(random_rules(rng, gens, n_rules), spec)
    order = None
    if permute:
        order = [g.qname for g in gens]
        rng.shuffle(order)
    c = compile_rules(spec, rules, order, static=static)
    if static:
        assert [s.field.name for s in c.stages] == (order or [g.qname for g in gens])
        assert [s.match_kind for s in c.stages] == [spec.query_fields[s.field.name].kind
                                                     for s in c.stages]
    tables = c.tables()
    for _ in range(n_messages):
        msg = random_message(rng, gens)
        assert tables.ports(c.application, msg) == evaluate(rules, msg), (seed, msg)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 12))
def test_small_rule_sets(seed, n_rules):
    check(seed, n_rules)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 500))
def test_large_rule_sets(seed, n_rules):
    check(seed, n_rules, n_messages=300)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 40))
def test_any_field_order_is_correct(seed, n_rules):
    check(seed, n_rules, permute=True)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 40), permute=st.booleans())
def test_static_pipeline_is_correct(seed, n_rules, permute):
    """Every query field staged with its declared kind, tested or not."""
    check(seed, n_rules, permute=permute, static=True)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_every_boundary_value(seed):
    """Every constant, its neighbours and the domain ends, for every field at once."""
    rng = random.Random(seed)
    spec, gens = random_spec(rng, n_fields=2)
    rules = parse_rules(random_rules(rng, gens, rng.randint(1, 30)), spec)
    c = compile_rules(spec, rules)
    tables = c.tables()
    a, b = gens
    for va in {min(max(v + d, 0), (1 << a.width) - 1) for v in a.pool for d in (-1, 0, 1)}:
        for vb in {min(max(v + d, 0), (1 << b.width) - 1) for v in b.pool for d in (-1, 0, 1)}:
            msg = {a.qname: va, b.qname: vb}
            assert tables.ports(c.application, msg) == evaluate(rules, msg), (seed, msg)
