"""`normalize.size_bound` is an upper bound on the disjunctive normal form it stands for:
views are refused on it (shim.subscriptions.check_compilable), so it must never undercount."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import formula
from compiler.normalize import MAX_DISJUNCTS, dnf, size_bound
from compiler.errors import RuleError
from compiler.rules import parse_filter, parse_rules
from compiler.spec import parse_spec

from .gen import random_rules, random_spec


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_size_bound_never_undercounts(seed):
    rng = random.Random(seed)
    spec, gens = random_spec(rng)
    for rule in parse_rules(random_rules(rng, gens, 10), spec):
        assert len(dnf(rule.filter)) <= size_bound(rule.filter)


def test_size_bound_counts_products_and_merges_one_field_alternatives():
    spec = parse_spec("header msg { bit<16> f0; bit<16> f1; }\n"
                      "@pragma query_field(msg.f0)\n@pragma query_field(msg.f1)\n", name="t")
    (rule,) = parse_rules("msg.f0 in {0, 1} and (msg.f0 == 0 or msg.f1 == 0) : fwd(1)", spec)
    assert size_bound(rule.filter) == 2
    text = " and ".join(f"(msg.f0 != {i} or msg.f1 != {i})" for i in range(17))
    assert size_bound(parse_filter(text, spec)) == MAX_DISJUNCTS + 1  # 2**17, capped


def test_a_rule_too_wide_even_as_a_formula_is_refused_at_parse_time_with_its_position(
        monkeypatch):
    """Past the normal form's limit a filter compiles as a formula (compiler.formula); it is
    refused when it is parsed only if its own diagram passes MAX_FORMULA_STATES."""
    spec = parse_spec("header msg { bit<16> f0; bit<16> f1; }\n"
                      "@pragma query_field(msg.f0)\n@pragma query_field(msg.f1)\n", name="t")
    wide = " and ".join(f"(msg.f0 != {i} or msg.f1 != {i})" for i in range(20))
    # 2**20 alternatives in normal form, 21 residuals after msg.f0 (msg.f1 != i, or true).
    (rule,) = parse_rules(f"{wide} : fwd(2)", spec)
    assert size_bound(rule.filter) > MAX_DISJUNCTS
    monkeypatch.setattr(formula, "MAX_FORMULA_STATES", 10)
    with pytest.raises(RuleError, match=r"r:2:3: this filter is too wide to compile: its normal "
                                        r"form may have more than 100000 alternatives, and its "
                                        r"decision diagram more than 10 states .* split it into "
                                        r"several rules"):
        parse_rules(f"msg.f0 == 1 : fwd(1)\n  {wide} : fwd(2)\n", spec, source="r")
    # Sixteen of them (65,536 alternatives at most) are still normalised, and not checked.
    narrow = " and ".join(f"(msg.f0 != {i} or msg.f1 != {i})" for i in range(16))
    assert len(parse_rules(f"{narrow} : fwd(2)", spec)) == 1
