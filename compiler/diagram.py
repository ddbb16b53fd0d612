"""The field-ordered decision diagram: the heart of the compiler.

Theory of operation. Every rule is first normalised into conjunctions (normalize.py); a
conjunction constrains some fields, each to an interval set, and carries the rule's ports.
With the fields in a fixed order f0, f1, ..., a conjunction is a chain of constraints
("residual") ordered by field. A *state* of the diagram is what is still to be decided about
a message after some fields were read:

    state = (G, {(residual, ports)})

G is the set of ports already guaranteed (conjunctions whose every constraint held), and each
pair is a residual conjunction still to be checked with the ports it would add. States are
kept canonical: pairs with the same residual are merged (their ports united), ports already
in G are removed from pairs, and pairs left with no ports are dropped. Canonical states are
hash-consed, so two paths that leave the same work to do share one state; this is the BDD's
isomorphism reduction, and since a state does not mention fields it no longer tests, a
state that does not test field k simply passes through k's table unchanged (no entry).

A state is split at the first field any of its residuals tests: the field's domain is cut
at every interval endpoint those residuals use, a sweep over the cuts keeps the set of
residuals satisfied by each elementary interval, and each interval leads to the canonical
state of what remains. Adjacent intervals leading to the same state are merged (a test
that changes nothing is never split), and a state whose split leads everywhere to one
successor is bypassed altogether (the BDD's redundant-node removal). A last bottom-up pass
also merges states whose splits came out identical though their residual sets differ in
writing (isomorphism on meaning, which hash-consing alone misses). A state with no
residual left is a leaf: G is its action set.

Correctness does not depend on the order of fields, only size does; the order heuristic
lives in order.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.intervals import IntervalSet
from compiler.normalize import Conjunction
from compiler.spec import QueryField

NO_FIELD = 1 << 30  # the "head" of the empty residual: it tests no field
Content = tuple[frozenset, frozenset]  # (G, frozenset of (residual id, ports))


@dataclass
class Split:
    stage: int
    intervals: list[tuple[int, int, int]]  # (lo, hi, successor state index), covering the domain


@dataclass
class Diagram:
    order: list[QueryField]
    contents: list[Content] = field(default_factory=list)
    splits: dict[int, Split] = field(default_factory=dict)
    residual_text: list[str] = field(default_factory=list)

    @property
    def root(self) -> int:
        return 0

    def leaves(self) -> dict[int, frozenset[int]]:
        """Reachable item-less states with their port sets (empty sets included)."""
        return {s: self.contents[s][0] for s in self.reachable() if not self.contents[s][1]}

    def reachable(self) -> list[int]:
        seen, stack = {self.root}, [self.root]
        while stack:
            s = stack.pop()
            split = self.splits.get(s)
            if split:
                for _, _, t in split.intervals:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
        return sorted(seen)

    def describe(self, s: int) -> str:
        """A canonical text of a state's meaning (used to derive stable ids)."""
        g, items = self.contents[s]
        parts = sorted(f"{self.residual_text[r]}->{','.join(map(str, sorted(p)))}"
                       for r, p in items)
        return "G=" + ",".join(map(str, sorted(g))) + "|" + "|".join(parts)


class _Builder:
    def __init__(self, order: Sequence[QueryField]):
        self.order = list(order)
        self.index = {q: k for k, q in enumerate(self.order)}
        # Residuals are interned as linked lists: id -> (head stage, intervals, next id).
        self.res_key: dict[tuple, int] = {(): 0}
        self.res_head = [NO_FIELD]
        self.res_ivs: list[IntervalSet] = [()]
        self.res_next = [0]
        self.d = Diagram(self.order, residual_text=[""])
        self.state_of: dict[Content, int] = {}
        self.todo: dict[int, list[int]] = defaultdict(list)

    def residual(self, conj: Conjunction) -> int:
        rid = 0
        for q, ivs in sorted(conj.items(), key=lambda kv: -self.index[kv[0]]):
            key = (self.index[q], ivs, rid)
            nxt = self.res_key.get(key)
            if nxt is None:
                nxt = len(self.res_head)
                self.res_key[key] = nxt
                self.res_head.append(self.index[q])
                self.res_ivs.append(ivs)
                self.res_next.append(rid)
                tail = self.d.residual_text[rid]
                text = f"{q.qname}{list(ivs)}"
                self.d.residual_text.append(f"{text}&{tail}" if tail else text)
            rid = nxt
        return rid

    def state(self, g: frozenset, groups: dict[int, set]) -> int:
        g = g | frozenset(groups.pop(0, ()))
        items = frozenset((r, frozenset(p - g)) for r, p in groups.items() if not p <= g)
        content = (g, items)
        s = self.state_of.get(content)
        if s is None:
            s = len(self.d.contents)
            self.state_of[content] = s
            self.d.contents.append(content)
            if items:
                self.todo[min(self.res_head[r] for r, _ in items)].append(s)
        return s

    def split(self, s: int, k: int) -> Split:
        g, items = self.d.contents[s]
        top = self.order[k].max_value
        base: dict[int, frozenset] = {}
        events: dict[int, list] = defaultdict(list)
        for rid, ports in items:
            if self.res_head[rid] == k:
                nxt = self.res_next[rid]
                for lo, hi in self.res_ivs[rid]:
                    events[lo].append((nxt, ports, 1))
                    if hi < top:
                        events[hi + 1].append((nxt, ports, -1))
            else:
                base[rid] = ports
        cuts = sorted(events)
        if cuts[0] != 0:
            cuts.insert(0, 0)
        # For each residual that follows, how many active items give each port. Only a port
        # appearing or disappearing can change the successor, so only then is it rebuilt.
        active: dict[int, dict[int, int]] = {}
        out: list[tuple[int, int, int]] = []
        succ = -1
        for j, lo in enumerate(cuts):
            changed = succ < 0
            for nxt, ports, delta in events.get(lo, ()):
                counts = active.get(nxt)
                if counts is None:
                    counts = active[nxt] = {}
                for port in ports:
                    c = counts.get(port, 0) + delta
                    if c:
                        counts[port] = c
                        if c == 1 and delta == 1:
                            changed = True
                    else:
                        del counts[port]
                        changed = True
            if changed:
                groups = {r: set(p) for r, p in base.items()}
                for r, counts in active.items():
                    if counts:
                        if r in groups:
                            groups[r].update(counts)
                        else:
                            groups[r] = set(counts)
                succ = self.state(g, groups)
            hi = cuts[j + 1] - 1 if j + 1 < len(cuts) else top
            if out and out[-1][2] == succ:
                out[-1] = (out[-1][0], hi, succ)
            else:
                out.append((lo, hi, succ))
        return Split(k, out)


def build(items: Sequence[tuple[Conjunction, frozenset[int]]], order: Sequence[QueryField],
          progress=None) -> Diagram:
    """The reduced diagram for conjunctions with ports, fields tested in `order`.

    `progress`, if given, is called with (stage, states split so far) now and then.
    """
    b = _Builder(order)
    groups: dict[int, set] = {}
    for conj, ports in items:
        groups.setdefault(b.residual(conj), set()).update(ports)
    root = b.state(frozenset(), groups)
    assert root == 0
    for k in range(len(b.order)):
        for n, s in enumerate(b.todo.pop(k, ())):
            b.d.splits[s] = b.split(s, k)
            if progress and n % 256 == 0:
                progress(k, n)
    _bypass_redundant(b.d)
    return b.d


def _bypass_redundant(d: Diagram) -> None:
    """Reduce the diagram bottom-up, from the last stage to the first.

    At each stage, every reference is first pointed at its successor's representative and
    neighbouring intervals with one successor are merged; then a state whose split goes one
    way is replaced by its successor (redundant-node removal), and states whose splits are
    now identical are replaced by one of them: the isomorphism reduction on meaning, which
    hash-consing on residual sets misses when two sets are written differently but decide
    every message alike (`b < 5 and c == 1 | b >= 5 and c == 1` against `c == 1`). The
    representative is the state with the smallest canonical text, so that ids never depend
    on discovery order. A split only leads to later stages, so one pass reaches the fixed
    point. The root stays (its id is fixed at 0).
    """
    alias: dict[int, int] = {}

    def resolve(t: int) -> int:
        while t in alias:
            t = alias[t]
        return t

    by_stage: dict[int, list[int]] = defaultdict(list)
    for s, split in d.splits.items():
        by_stage[split.stage].append(s)
    for k in sorted(by_stage, reverse=True):
        same: dict[tuple, list[int]] = defaultdict(list)
        for s in by_stage[k]:
            split = d.splits[s]
            merged: list[tuple[int, int, int]] = []
            for lo, hi, t in split.intervals:
                t = resolve(t)
                if merged and merged[-1][2] == t:
                    merged[-1] = (merged[-1][0], hi, t)
                else:
                    merged.append((lo, hi, t))
            split.intervals = merged
            if len(merged) == 1 and s != d.root:
                alias[s] = merged[0][2]
            else:
                same[tuple(merged)].append(s)
        for members in same.values():
            if len(members) > 1:
                rep = d.root if d.root in members else min(members, key=d.describe)
                for s in members:
                    if s != rep:
                        alias[s] = rep
    for s in alias:
        del d.splits[s]
