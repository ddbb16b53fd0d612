"""`compiler.fit_alpha`: the per-field α the broker approximates with under an entry budget."""

from __future__ import annotations

import random

from compiler.compile import compile_rules
from compiler.approximate import approximate_rules
from compiler.fit_alpha import alpha_to_fit, size
from compiler.incremental import Incremental
from compiler.rules import parse_rules
from compiler.spec import parse_spec
def _spec():
    return parse_spec(open("p4/itch/itch.p4").read(), name="itch")


def _rules(spec, n: int, seed: int = 3):
    rng = random.Random(seed)
    text = "\n".join(f"price > {rng.randrange(100_000)} and shares < {rng.randrange(100_000)} "
                     f'and stock == "S{rng.randrange(4)}" : fwd({1 + i % 30})' for i in range(n))
    return parse_rules(text, spec)


def test_alpha_grows_on_the_fields_that_cut_most_until_the_estimate_fits():
    spec = _spec()
    rules = _rules(spec, 60)
    fields = Incremental(spec, rules).fields
    exact = size(rules, fields).entries
    fit = alpha_to_fit(rules, fields, exact // 20)
    assert fit.fits and fit.estimate.entries <= exact // 20
    # The character field is never rounded.
    assert set(fit.alpha) <= {"itch_order.price", "itch_order.shares"}
    assert all(a >= 10 and str(a).strip("0") == "1" for a in fit.alpha.values())
    # The estimate of the approximated rules is what `fit` says, and the real compile is
    # no larger.
    approx = approximate_rules(rules, fit.alpha)
    assert size(approx, fields).entries == fit.estimate.entries
    assert compile_rules(spec, approx).stats["entries"]["total"] <= fit.estimate.entries


def test_a_budget_already_met_needs_no_alpha_and_an_impossible_one_says_so():
    spec = _spec()
    rules = _rules(spec, 10)
    fields = Incremental(spec, rules).fields
    assert alpha_to_fit(rules, fields, 10**9).alpha == {}
    fit = alpha_to_fit(rules, fields, 1)
    assert not fit.fits
    # Every range bound was rounded past every constant: growing α further changes nothing.
    assert all(a >= 100_000 for a in fit.alpha.values()) and len(fit.alpha) == 2
    again = alpha_to_fit(rules, fields, 1, fit.alpha)
    assert again.alpha == fit.alpha
