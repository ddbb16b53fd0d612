"""Lanes: several small field-ordered diagrams instead of one big one, their decisions unioned.

A field-ordered decision diagram is the wrong shape for rules that test *independent* fields:
`a0 < 5 : fwd(1)` and `a3 > 9 : fwd(2)` in one diagram make every interval of a0 lead to a
state that still splits a3, so the entries grow with the product of the per-field interval
counts (the 8-attribute Siena workload: 10^9 to 10^20 estimated entries). Since a message's
port set is the *union* of the ports of the rules its fields satisfy (`compiler.semantics`),
any partition of the rules can be compiled into separate diagrams ("lanes"), each walked on
its own from state 0, and their port bitmaps OR-ed: exactly the same port set. A lane whose
rules all test the same few fields costs the product over those fields only.

`partition` chooses the lanes. Conjunctions are grouped by the set of fields they test; the
groups, largest field sets first, are merged greedily into an existing lane sharing a field
with them when the estimate (`compiler.estimate`) of the merged lane is no more than the two
apart, else start a lane of their own. A cap on the lanes (`--lanes N`) then merges the pair
whose merge costs least until it holds. The caller keeps one diagram unless the lanes'
estimated total is well under it (`worth_it`): lanes cost pipeline stages, one walk each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from compiler import estimate
from compiler.errors import CamusError
from compiler.normalize import Conjunction
from compiler.spec import QueryField

Item = tuple[Conjunction, frozenset[int]]

# One diagram is kept when its estimate is at most this many entries (lanes then save little
# and every lane adds a walk and tables), or when the lanes' total is not under half of it.
SMALL_ENOUGH = 1_000
# At most this many lanes when choosing automatically: each is a chain of two tables per field
# it tests. Lanes do not depend on each other, so a target may place them side by side in the
# same physical stages; its table count (a few hundred logical tables) is the limit.
AUTO_MAX_LANES = 64


@dataclass
class Lane:
    items: list[Item]
    fields: frozenset[QueryField]
    entries: int  # its estimate


def parse_lanes(text: str | int) -> str | int:
    """`--lanes`: "auto" or a positive number of lanes."""
    if text == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise CamusError(f"--lanes takes 'auto' or a positive number of lanes, not {text!r}")
    return n


def partition(items: Sequence[Item], order_of: Callable[[list[Conjunction]], list[QueryField]],
              max_lanes: int) -> list[Lane]:
    """The rules' conjunctions split into at most `max_lanes` lanes (see the module's text).
    `order_of(conjunctions)` is the field order the compiler would test them in."""
    def cost(members: list[Item]) -> int:
        conj = [c for c, _ in members]
        return estimate.estimate(conj, order_of(conj)).entries

    by_fields: dict[frozenset, list[Item]] = {}
    for item in items:
        by_fields.setdefault(frozenset(item[0]), []).append(item)
    always = by_fields.pop(frozenset(), [])  # true for every message: any lane may hold them
    groups = sorted(by_fields.items(), key=lambda g: (-len(g[0]), -len(g[1]),
                                                      sorted(q.qname for q in g[0])))
    lanes: list[Lane] = []
    for fields, members in groups:
        own = cost(members)
        best = None
        for lane in lanes:
            if not fields & lane.fields:
                continue  # independent fields: merging is the product this module avoids
            merged = cost(lane.items + members)
            if merged <= lane.entries + own and (best is None or merged - lane.entries < best[0]):
                best = (merged - lane.entries, lane, merged)
        if best is None:
            lanes.append(Lane(list(members), fields, own))
        else:
            _, lane, merged = best
            lane.items += members
            lane.fields |= fields
            lane.entries = merged
    if len(lanes) > max_lanes:
        lanes = _merge_down(lanes, max_lanes, cost)
    if always:
        if not lanes:
            return [Lane(list(always), frozenset(), cost(always))]
        lanes[0].items += always  # folded into every leaf of the first lane's diagram
        lanes[0].entries = cost(lanes[0].items)
    return lanes


def _merge_down(lanes: list[Lane], max_lanes: int, cost) -> list[Lane]:
    """Merge the pair of lanes whose merge adds the fewest estimated entries until at most
    `max_lanes` are left (pair costs are kept, and recomputed only for a merged lane)."""
    alive = dict(enumerate(lanes))
    pair: dict[tuple[int, int], int] = {}
    for i in alive:
        for j in alive:
            if i < j:
                pair[i, j] = cost(alive[i].items + alive[j].items)
    fresh = len(lanes)
    while len(alive) > max_lanes:
        (i, j), merged = min(pair.items(), key=lambda kv: (kv[1] - alive[kv[0][0]].entries
                                                           - alive[kv[0][1]].entries, kv[0]))
        a, b = alive.pop(i), alive.pop(j)
        pair = {k: v for k, v in pair.items() if i not in k and j not in k}
        joined = Lane(a.items + b.items, a.fields | b.fields, merged)
        for k, other in alive.items():
            pair[k, fresh] = cost(other.items + joined.items)
        alive[fresh] = joined
        fresh += 1
    return list(alive.values())


def worth_it(single: int, lanes: Sequence[Lane]) -> bool:
    """Whether lanes estimated at `lanes` beat one diagram estimated at `single` entries."""
    total = sum(lane.entries for lane in lanes)
    return len(lanes) > 1 and single > SMALL_ENOUGH and 2 * total <= single
