"""`compiler.approximate`: a superset of the filter, cutting only at multiples of α."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.approximate import approximate
from compiler.ast import And, Atom, Const, Not, Or
from compiler.rules import parse_filter
from compiler.semantics import holds

from .routing_helpers import ITCH, filter_text, message, seeds
from tests.switch.switch_helpers import itch_values


def atoms(f):
    return [x for x in _nodes(f) if isinstance(x, Atom)]


@settings(max_examples=200, deadline=None)
@given(seeds, st.sampled_from((1, 2, 10, 100, 1000, 7)))
def test_the_approximation_is_a_superset_and_cuts_at_multiples_of_alpha(seed, alpha):
    rng = random.Random(seed)
    f = parse_filter(filter_text(rng), ITCH)
    a = approximate(f, alpha)
    assert not any(isinstance(x, Not) for x in _nodes(a)) or alpha == 1
    for x in atoms(a):
        if alpha > 1 and not x.field.ascii and x.op in ("<", ">="):
            assert x.value % alpha == 0, x
        if alpha > 1 and not x.field.ascii and x.op == "<=":
            assert x.value == x.field.max_value, x  # only a bound rounded past the top
        assert alpha == 1 or x.op != ">"
    for _ in range(50):
        values = itch_values(message(rng))
        if holds(f, values):
            assert holds(a, values)


def _nodes(f):
    yield f
    if isinstance(f, (And, Or)):
        for i in f.items:
            yield from _nodes(i)
    elif isinstance(f, Not):
        yield from _nodes(f.item)


def test_the_rounding_directions():
    def one(text, alpha):
        return str(approximate(parse_filter(text, ITCH), alpha))

    assert one("price > 1234", 100) == "itch_order.price >= 1200"
    assert one("price > 1299", 100) == "itch_order.price >= 1300"  # x > 1299 is x >= 1300
    assert one("price >= 1234", 100) == "itch_order.price >= 1200"
    assert one("price < 1234", 100) == "itch_order.price < 1300"
    assert one("price <= 1299", 100) == "itch_order.price < 1300"
    assert one("price <= 1300", 100) == "itch_order.price < 1400"
    assert one("price == 1234", 100) == "itch_order.price == 1234"  # kept, documented
    assert one("price < 4294967295", 1000) == "itch_order.price <= 4294967295"
    assert one('stock == "GOOGL"', 100) == 'itch_order.stock == "GOOGL"'
    # Negation is pushed to the atoms before rounding: not (x > 1234) is x <= 1234 -> x < 1300.
    assert one("not price > 1234", 100) == "itch_order.price < 1300"


def test_negated_junctions_follow_de_morgan():
    f = parse_filter('not (price > 10 and stock == "IBM")', ITCH)
    a = approximate(f, 10)
    assert isinstance(a, Or)
    assert [str(x) for x in a.items] == ["itch_order.price < 20", 'itch_order.stock != "IBM"']
    assert approximate(Not(Const(True)), 10) == Const(False)


def test_alpha_must_be_positive():
    import pytest

    with pytest.raises(ValueError, match="positive"):
        approximate(Const(True), 0)
