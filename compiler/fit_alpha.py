"""A per-field α that brings a rule set under an entry budget (the broker's fallback).

`compiler.compile` suggests one power-of-ten α for every field when a compile is refused
(`camus compile --max-entries`); a broker that must keep serving instead picks α itself, and
per field: rounding a field whose constants are few only loses precision, so α grows on the
field whose constants cut its domain most (`Estimate.cuts`), ten times per step, and the
estimate is taken again, until it fits or no field is left to round.

The fields it may round are those the rules test with a numeric range (`==`/`!=`, prefixes
and character fields are never rounded, see `compiler.approximate`); a field's α stops
growing once it passes every constant the rules compare the field with (each lower bound
is then 0, always true, and each upper bound the one cut at α: rounding further saves
nothing).

The estimate errs on the large side, so the α found may be larger than needed (more false
positives for the edge to drop, never fewer entries than the budget allows); the caller
that builds the tables checks the real count and may ask again with a smaller budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compiler.approximate import approximate_rules
from compiler.ast import Rule, atoms
from compiler.estimate import Estimate, estimate
from compiler.incremental import ranged_fields
from compiler.normalize import dnf
from compiler.rules import deep_recursion
from compiler.spec import QueryField

STEP = 10  # how much a field's α grows per step


@dataclass
class Fit:
    alpha: dict[str, int]  # field qname -> α, only the fields rounded (empty: exact)
    estimate: Estimate  # of the rules approximated with `alpha`
    fits: bool  # whether the estimate is within the budget


def size(rules: Sequence[Rule], fields: Sequence[QueryField]) -> Estimate:
    """The estimate of compiling `rules` in field order `fields`."""
    with deep_recursion():
        return estimate([c for r in rules for c in dnf(r.filter, r.line)], fields)


def alpha_to_fit(rules: Sequence[Rule], fields: Sequence[QueryField], budget: int,
                 start: Mapping[str, int] | None = None) -> Fit:
    """The per-field α (growing from `start`) under which `rules` are estimated to compile
    to at most `budget` entries; with `fits` False, the largest α tried (every field
    rounded past its range) when even that is over."""
    alpha = dict(start or {})
    by_name = {q.qname: q for q in fields}
    roundable = {name for r in rules for name in ranged_fields(r.filter)
                 if name in by_name and not by_name[name].ascii}
    largest = _largest_constants(rules)
    while True:
        est = size(approximate_rules(rules, alpha), fields)
        if est.entries <= budget:
            return Fit(alpha, est, True)
        open_fields = [n for n in roundable if alpha.get(n, 1) <= largest.get(n, 0)]
        if not open_fields:
            return Fit(alpha, est, False)
        # The field cutting its domain most; a field the estimate saw no cuts of last.
        worst = max(open_fields, key=lambda n: (est.cuts.get(n, 0), n))
        alpha[worst] = alpha.get(worst, 1) * STEP


def _largest_constants(rules: Sequence[Rule]) -> dict[str, int]:
    """Per field, the largest constant a range test of it uses."""
    out: dict[str, int] = {}
    for r in rules:
        for a in atoms(r.filter):
            if a.prefix_len is None and a.op not in ("==", "!="):
                name = a.field.qname
                out[name] = max(out.get(name, 0), a.value + 1)  # x > v cuts at v + 1
    return out
