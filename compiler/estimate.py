"""Sizes known before they are paid: a cheap estimate of a compile's entries and states.

The decision diagram's size is fixed by the field order and the constants the rules use, and
building it can take minutes and gigabytes when it is large (three range-ish fields over
100K rules). `estimate` predicts it from the conjunctions alone, in time linear in the
rules for each field, without building a state:

* an exact field whose tests are all equalities partitions the conjunctions by constant:
  one entry per constant, and each constant's conjunctions (with those that do not test the
  field) are estimated on their own, recursively, as the diagram would;
* any other field (ranges, lpm, `!=`) cuts its domain at every distinct endpoint its
  conjunctions use: one entry per elementary interval, and every interval may lead to a
  state of its own that holds, at worst, all the conjunctions still live, so the fields
  after it multiply (the product that makes independent range fields expensive).

It errs on the large side (the real diagram merges neighbouring intervals whose port sets
agree, which the estimate cannot see without building them: the 100K-rule ITCH workload is
estimated at about four times its 15,906 entries, 20,000 mixed ITCH rules, `tests/compiler/
gen.py`'s itch_mix, at 187 times their 8,007). So an estimate within the budget lets a compile
go ahead unwatched, and one over it only puts the build on trial (`compiler.compile.Trial`,
`compile_rules(max_entries=...)`, `camus compile --max-entries`), which counts real entries.
`explain` turns a size over budget into the message the user reads:
the field order, the field whose constants drive the size and the rules that use them,
the estimate of other orders, and the approximation that would bring it under.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.normalize import Conjunction
from compiler.spec import QueryField

# `camus compile`'s default budget: about what the tables of one switch pipeline hold (the
# generated program declares 65,536 entries per table, and a rule set's entries spread over
# a few tables); `--max-entries` changes it, 0 turns the check off.
DEFAULT_MAX_ENTRIES = 1_000_000

# Copying the conjunctions that do not test an exact field into every constant's group costs
# groups x those conjunctions; past this, such a field is estimated like a range field.
_PARTITION_WORK = 2_000_000


@dataclass
class Estimate:
    """A compile's predicted size for one field order."""

    order: list[QueryField]
    entries: int
    states: int  # every state, leaves included
    splits: int = 0  # the states that test a field (what the builder's progress counts)
    cuts: dict[str, int] = field(default_factory=dict)  # per field: most intervals in one state
    alpha: int = 1  # the approximation it was made under (`compiler.approximate`)

    def __str__(self) -> str:
        return f"about {self.entries:,} entries and {self.states:,} states"


def estimate(conjunctions: Sequence[Conjunction], order: Sequence[QueryField]) -> Estimate:
    """The predicted entries and states of compiling `conjunctions` in field `order`."""
    est = Estimate(list(order), 0, 0)
    entries, splits, leaves = _estimate(list(conjunctions), list(order), 0, est)
    if conjunctions and entries == 0:
        entries = 1  # every rule unconditionally true: the leaf table's one start-state entry
    est.entries, est.splits, est.states = entries, splits, splits + max(leaves, 1)
    return est


def _intervals(conjunctions: list[Conjunction], q: QueryField) -> int:
    """Elementary intervals the conjunctions' constraints on `q` cut its domain into."""
    cuts = {0}
    top = q.max_value
    for c in conjunctions:
        ivs = c.get(q)
        if ivs:
            for lo, hi in ivs:
                cuts.add(lo)
                if hi < top:
                    cuts.add(hi + 1)
    return len(cuts)


def _note(est: Estimate, q: QueryField, n: int) -> None:
    if n > est.cuts.get(q.qname, 0):
        est.cuts[q.qname] = n


def _estimate(conjunctions: list[Conjunction], order: list[QueryField], k: int,
              est: Estimate) -> tuple[int, int, int]:
    """(entries, splitting states, leaves) of the sub-diagram deciding `conjunctions` from
    field k on."""
    while k < len(order) and not any(order[k] in c for c in conjunctions):
        k += 1  # a field nobody tests here passes untouched: no state, no entry
    if k == len(order) or not conjunctions:
        return 0, 0, 1
    q = order[k]
    testing = [c for c in conjunctions if q in c]
    rest = [c for c in conjunctions if q not in c]
    equalities = all(len(c[q]) == 1 and c[q][0][0] == c[q][0][1] for c in testing)
    if equalities:
        groups: dict[int, list[Conjunction]] = defaultdict(list)
        for c in testing:
            groups[c[q][0][0]].append(c)
        if len(groups) * len(rest) <= _PARTITION_WORK:
            _note(est, q, len(groups) + 1)
            entries, splits, leaves = len(groups) + 1, 1, 0
            for members in list(groups.values()) + [[]]:
                e, s, f = _estimate(members + rest, order, k + 1, est)
                entries, splits, leaves = entries + e, splits + s, leaves + f
            return entries, splits, leaves
    n = _intervals(testing, q)
    _note(est, q, n)
    e, s, f = _bound(conjunctions, order, k + 1, est)
    return n + n * e, 1 + n * s, n * f


def _bound(conjunctions: list[Conjunction], order: list[QueryField], k: int,
           est: Estimate) -> tuple[int, int, int]:
    """The product bound: every state below keeps every conjunction live."""
    entries = splits = 0
    width = 1
    for q in order[k:]:
        n = _intervals(conjunctions, q)
        if n == 1:
            continue  # not tested
        _note(est, q, n)
        splits += width
        width *= n
        entries += width
    return entries, splits, width


def alternatives(conjunctions: Sequence[Conjunction], order: Sequence[QueryField],
                 limit: int = 24) -> list[Estimate]:
    """Estimates of other orders of the same fields, smallest first (every permutation of up
    to four fields; beyond, each field moved to the front)."""
    order = list(order)
    if len(order) <= 4:
        orders = [list(p) for p in itertools.permutations(order)]
    else:
        orders = [[q] + [x for x in order if x is not q] for q in order]
    out = [estimate(conjunctions, o) for o in orders[:limit] if o != order]
    return sorted(out, key=lambda e: e.entries)


def explain(est: Estimate, budget: int, conjunctions: Sequence[Conjunction],
            lines: Sequence[int | None], others: Sequence[Estimate],
            approximated: Estimate | None = None, lead: str | None = None) -> str:
    """Why `est` is over `budget`, and what would bring it under: `others` are other field
    orders' estimates, `approximated` the estimate under an alpha that fits (if any); `lead`
    replaces the first sentence (what the estimate says) when a build counted the entries."""
    names = " -> ".join(q.qname for q in est.order)
    worst = max(est.cuts, key=est.cuts.get) if est.cuts else None
    text = [lead or f"the rules would compile to {est} with the field order {names}, "
                    f"more than the budget of {budget:,} entries (--max-entries)."]
    if worst is not None:
        users = [ln for c, ln in zip(conjunctions, lines) if any(q.qname == worst for q in c)]
        shown = ", ".join(str(x) for x in users[:5] if x is not None)
        text.append(f"The size comes from {worst}: up to {est.cuts[worst]:,} intervals in one "
                    f"state, from the constants of {len(users):,} rule(s)"
                    + (f" (lines {shown}{', ...' if len(users) > 5 else ''})" if shown else "")
                    + "; per-field intervals: "
                    + ", ".join(f"{f} {n:,}" for f, n in est.cuts.items()) + ".")
        if approximated is not None:
            text.append(f"Approximated with alpha {approximated.alpha} (numeric bounds rounded "
                        f"to multiples of it, a superset filtered exactly at the edge: "
                        f"compiler.approximate, `camus net compile --alpha`) it would be "
                        f"{approximated}, within the budget.")
        else:
            text.append("No approximation up to alpha 10^6 brings it under the budget.")
    better = [o for o in others if o.entries <= budget]
    if better:
        text.append("Another field order fits: --field-order "
                    + ",".join(q.qname for q in better[0].order) + f" ({better[0]}).")
    elif others:
        text.append("No other order of these fields fits either (the best: "
                    + " -> ".join(q.qname for q in others[0].order) + f", {others[0]}).")
    text.append("Raise --max-entries, or pass --max-entries 0 to compile regardless.")
    return " ".join(text)
