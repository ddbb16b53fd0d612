"""`normalize.size_bound` is an upper bound on the disjunctive normal form it stands for:
views are refused on it (shim.subscriptions.check_compilable), so it must never undercount."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.normalize import MAX_DISJUNCTS, dnf, size_bound
from compiler.rules import parse_rules
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
    text = " and ".join(f"(msg.f0 != {i} or msg.f1 != {i})" for i in range(17)) + " : fwd(1)"
    (rule,) = parse_rules(text, spec)
    assert size_bound(rule.filter) == MAX_DISJUNCTS + 1  # 2**17, capped
