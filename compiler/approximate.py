"""Approximate filters (the paper's §IV-C): numeric constants rounded to multiples of α.

`approximate(f, alpha)` is a filter that holds wherever `f` holds (a superset) and whose
numeric comparisons only cut their field's domain at multiples of α, so that the filters
of many subscribers share cut points and the decision diagram needs fewer states and
entries. A switch port that leads to other switches can carry the approximation (whoever
is behind it filters again, exactly, at the host-facing port); a host-facing port never
does.

The rounding, for a field that is neither ASCII nor tested by prefix (`q = ⌊v/α⌋·α`):
  x >= v  becomes  x >= ⌊v/α⌋·α          (round down)
  x >  v  becomes  x >= ⌊(v+1)/α⌋·α      (x > v is x >= v+1; round down)
  x <= v  becomes  x <  ⌈(v+1)/α⌉·α      (x <= v is x < v+1; round up)
  x <  v  becomes  x <  ⌈v/α⌉·α          (round up)
A bound rounded past the field's top becomes `x <= top` (always true). So every cut point
the rounded filter makes is a multiple of α, and `>`/`>=` only loosen down, `<`/`<=` only
up. `==` and `!=` are kept exactly: an equality is one value whatever α is, and widening it
to its enclosing α-range would turn an exact-match field into a range one (entries per
value, not fewer) for no saving in the cases the paper measures (prices compared by
inequality). ASCII fields (stock symbols) and prefix tests are kept as they are.

Negation is pushed onto the atoms first (`not (x > 5)` is `x <= 5`, De Morgan for
`and`/`or`), because rounding under a `not` would shrink the filter instead of growing it.
The function is pure: rules and atoms are never changed in place, and α = 1 returns an
equivalent filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compiler.ast import NEGATED, And, Atom, Const, Filter, Not, Or, Rule
from compiler.errors import CamusError


def approximate(f: Filter, alpha: int | Mapping[str, int]) -> Filter:
    """A superset of `f` whose numeric range bounds are multiples of `alpha` (see above); a
    mapping gives each field (`header.field`) its own α, 1 (exact) for fields it leaves out."""
    if not isinstance(alpha, int):
        return _walk(f, alpha, False)
    if alpha < 1:
        raise ValueError(f"alpha must be a positive integer, not {alpha}")
    if alpha == 1:
        return f
    return _walk(f, alpha, False)


def approximate_rules(rules: Sequence[Rule], alpha: int | Mapping[str, int]) -> list[Rule]:
    """Every rule with its filter approximated (a single switch's `--alpha`, or the broker's
    per-field fit); unchanged under α 1 or an empty mapping."""
    if alpha == 1 or not alpha:
        return list(rules)
    acting = next((r for r in rules if r.verdict is not None), None)
    if acting is not None:
        # A widened filter matches packets the rule does not: harmless for fwd (a
        # subscriber filters them), not for a drop or an answer (docs/actions.md).
        raise CamusError(f"'{acting.text or acting.verdict}': approximation widens filters, "
                         f"so a rule naming drop or an action would act on packets it does "
                         f"not match; compile rules with actions without --alpha",
                         acting.line or None)
    return [Rule(approximate(r.filter, alpha), r.ports, r.line, r.text) for r in rules]


def _walk(f: Filter, alpha: int, negated: bool) -> Filter:
    if isinstance(f, Atom):
        if negated:
            f = Atom(f.field, NEGATED[f.op], f.value, f.prefix_len, f.line, f.column)
        return _round(f, alpha)
    if isinstance(f, Not):
        return _walk(f.item, alpha, not negated)
    if isinstance(f, (And, Or)):
        cls = type(f) if not negated else (Or if isinstance(f, And) else And)
        return cls(tuple(_walk(i, alpha, negated) for i in f.items))
    if isinstance(f, Const):
        return Const(f.value != negated)
    raise TypeError(f"not a filter: {f!r}")


def _round(a: Atom, alpha: int | Mapping[str, int]) -> Filter:
    q = a.field
    if not isinstance(alpha, int):
        alpha = alpha.get(q.qname, 1)
    if q.ascii or a.prefix_len is not None or a.op in ("==", "!="):
        return a
    top = q.max_value
    if a.op in (">", ">="):
        bound = a.value + 1 if a.op == ">" else a.value  # x >= bound
        low = bound // alpha * alpha
        if low > top:  # x > top: never true, and nothing smaller is a superset to round to
            return a
        return Atom(q, ">=", low, None, a.line, a.column)
    bound = a.value + 1 if a.op == "<=" else a.value  # x < bound
    high = -(-bound // alpha) * alpha
    if high > top:
        return Atom(q, "<=", top, None, a.line, a.column)
    return Atom(q, "<", high, None, a.line, a.column)
