"""`normalize.size_bound` is an upper bound on the disjunctive normal form it stands for:
views are refused on it (shim.subscriptions.check_compilable), so it must never undercount."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_a_rule_that_may_expand_too_far_is_refused_at_parse_time_with_its_position():
    spec = parse_spec("header msg { bit<16> f0; bit<16> f1; }\n"
                      "@pragma query_field(msg.f0)\n@pragma query_field(msg.f1)\n", name="t")
    wide = " and ".join(f"(msg.f0 != {i} or msg.f1 != {i})" for i in range(20))
    with pytest.raises(RuleError, match=r"r:2:3: this filter may expand to more than 100000 "
                                        r"alternatives .* split it into several rules"):
        parse_rules(f"msg.f0 == 1 : fwd(1)\n  {wide} : fwd(2)\n", spec, source="r")
    # Sixteen of them (65,536 alternatives at most) still parse.
    narrow = " and ".join(f"(msg.f0 != {i} or msg.f1 != {i})" for i in range(16))
    assert len(parse_rules(f"{narrow} : fwd(2)", spec)) == 1
