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
in G are removed from pairs, and pairs left with no ports are dropped; port by port, the
residuals that test one last field are one residual per field (the union of their intervals;
`canonical`). Canonical states are
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from compiler import formula
from compiler.formula import Formulas, Wide
from compiler.intervals import IntervalSet, normalize
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
    # Residual id -> (field name, intervals, next residual id); id 0 is the empty residual.
    # Their texts are made on demand: most residuals only ever appear in the root state.
    residuals: list[tuple[str, tuple, int]] = field(default_factory=lambda: [("", (), 0)])
    _texts: dict[int, str] = field(default_factory=lambda: {0: ""}, repr=False)

    @property
    def residual_text(self) -> list[str]:
        """Every residual's canonical text, by id."""
        return [self.residual_str(r) for r in range(len(self.residuals))]

    def residual_str(self, r: int) -> str:
        text = self._texts.get(r)
        if text is None:
            qname, ivs, nxt = self.residuals[r]
            text = f"{qname}{list(ivs)}"
            tail = self.residual_str(nxt)
            text = self._texts[r] = f"{text}&{tail}" if tail else text
        return text

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

    def describe(self, s: int, port_texts: dict | None = None) -> str:
        """A canonical text of a state's meaning (used to derive stable ids). `port_texts`,
        if given, remembers the text of each port set it meets (see port_list)."""
        g, items = self.contents[s]
        texts = {} if port_texts is None else port_texts
        parts = sorted([f"{self.residual_str(r)}->{port_list(p, texts)}" for r, p in items])
        return "G=" + port_list(g, texts) + "|" + "|".join(parts)


_PORT_TEXT = [str(p) for p in range(1024)]


def port_list(ports: frozenset[int], memo: dict | None = None) -> str:
    """`1,2,10`: a port set's canonical text. `memo`, if given, remembers each set's
    sorted ports and text (see sorted_ports)."""
    if memo is None:
        return _port_list(sorted(ports))
    known = memo.get(ports)
    if known is None:
        order = sorted(ports)
        known = memo[ports] = (order, _port_list(order))
    return known[1]


def sorted_ports(ports: frozenset[int], memo: dict) -> list[int]:
    """The ports in order, from `memo` if port_list or this has sorted them already."""
    known = memo.get(ports)
    if known is None:
        port_list(ports, memo)
        known = memo[ports]
    return known[0]


def _port_list(order: list[int]) -> str:
    try:
        return ",".join([_PORT_TEXT[p] for p in order])
    except (IndexError, TypeError):  # not port numbers (the diagram itself never makes any)
        return ",".join(map(str, order))


def _first(t: tuple):
    return t[0]


class _Builder:
    def __init__(self, order: Sequence[QueryField]):
        self.order = list(order)
        self.index = {q: k for k, q in enumerate(self.order)}
        # Residuals are interned as linked lists: id -> (head stage, intervals, next id).
        self.res_key: dict[tuple, int] = {(): 0}
        self.res_head = [NO_FIELD]
        self.res_ivs: list[IntervalSet] = [()]
        self.res_next = [0]
        self.backwards: dict[tuple, list[tuple[int, QueryField]]] = {}
        self.d = Diagram(self.order)
        self.state_of: dict[Content, int] = {}
        self.todo: dict[int, list[int]] = defaultdict(list)
        # Wide filters (compiler.formula): hash-consed formulas, made on the first one. A
        # formula residual has next -1 (it is never a conjunction's last field).
        self.formulas: Formulas | None = None
        self.formula_of: dict[int, int] = {}  # residual id -> formula node
        self.formula_splits: dict[int, list[tuple[int, int, int]]] = {}
        self.wide_lines: list[int | None] = []  # the wide filters' rule lines
        # A build on trial (`build(watch=...)`): `watch(floor)` is called every 64 states
        # asked for, with `floor` the entries the finished diagram holds at least (see
        # `split`); it may raise to stop the build.
        self.watch = None
        self.asked = 0
        self.floor = 0

    def wide_residuals(self, f: Wide) -> list[int]:
        """The residuals of a wide filter: one per disjunct (none if it never holds)."""
        if self.formulas is None:
            self.formulas = Formulas(self.order)
        self.wide_lines.append(f.line)
        return self.of_node(self.formulas.of_filter(f.filter))

    def of_node(self, n: int) -> list[int]:
        """Residuals whose disjunction is formula node `n`: an `or` is one residual per
        disjunct (so that, port by port, its one-field disjuncts merge with the state's
        other one-field residuals as a normal form's would); a conjunction is a conjunction
        residual, [0] is TRUE, [] FALSE; any other formula is a formula residual."""
        forms = self.formulas
        if n < 0:
            return [0] if n == -1 else []
        if forms.kind[n] == "O":
            return [r for c in forms.arg[n] for r in self.of_node(c)]
        conj = forms.conjunction(n)
        if conj is not None:
            rid = 0
            for k, ivs in sorted(conj, reverse=True):
                rid = self.intern(k, ivs, rid)
            return [rid]
        key = ("F", n)
        rid = self.res_key.get(key)
        if rid is None:
            rid = self.res_key[key] = len(self.res_head)
            self.res_head.append(forms.head(n))
            self.res_ivs.append(())
            self.res_next.append(-1)
            self.d.residuals.append(("", (), 0))
            self.d._texts[rid] = "{" + forms.text(n) + "}"
            self.formula_of[rid] = n
        return [rid]

    def formula_split(self, rid: int) -> list[tuple[int, int, list[int]]]:
        """A formula residual's (lo, hi, next residuals) at its first field, where it may
        still hold."""
        out = self.formula_splits.get(rid)
        if out is None:
            if len(self.formula_splits) >= formula.MAX_FORMULA_STATES * len(self.wide_lines):
                raise formula.too_many(self.wide_lines, len(self.formula_splits))
            out = self.formula_splits[rid] = [
                (lo, hi, nxt) for lo, hi, n in self.formulas.expand(self.formula_of[rid])
                if (nxt := self.of_node(n))]
        return out

    def residual(self, conj: Conjunction) -> int:
        rid, res_key = 0, self.res_key
        # From the last field tested to the first; the order for a conjunction's fields
        # (in the order the conjunction lists them) is computed once.
        fields = tuple(conj)
        backwards = self.backwards.get(fields)
        if backwards is None:
            backwards = self.backwards[fields] = sorted(
                [(self.index[q], q) for q in fields], key=_first, reverse=True)
        for k, q in backwards:
            ivs = conj[q]
            key = (k, ivs, rid)
            nxt = res_key.get(key)
            if nxt is None:
                nxt = res_key[key] = len(self.res_head)
                self.res_head.append(k)
                self.res_ivs.append(ivs)
                self.res_next.append(rid)
                self.d.residuals.append((q.qname, ivs, rid))
            rid = nxt
        return rid

    def state(self, g: frozenset, groups: dict[int, Iterable[int]]) -> int:
        """The canonical state of G `g` and {residual: ports}. The port collections may be
        any iterables of ports (the sweep passes its live counters): they are only read."""
        if self.watch is not None:
            self.asked += 1
            if not self.asked & 63:
                self.watch(self.floor)
        content = self.canonical(g, groups)
        g, items = content
        s = self.state_of.get(content)
        if s is None:
            s = len(self.d.contents)
            self.state_of[content] = s
            self.d.contents.append(content)
            if items:
                head = self.res_head
                self.todo[min([head[r] for r, _ in items])].append(s)
        return s

    def canonical(self, g: frozenset, groups: dict) -> Content:
        """(G, items) of G `g` and {residual: ports}: ports guaranteed move to G, and, port by
        port, the residuals that test one field and nothing after it are one residual per
        field (the union of their intervals): `f < 5 -> p` and `f > 9 -> p` become
        `f in [0,4]|[10,..] -> p`. Without that, a filter that is an `or` of many two-field
        clauses makes a state for every combination of clauses whose first field held,
        where few distinct functions are left (issue 16 item 7)."""
        now = groups.pop(0, None)
        if now:
            g = g.union(now)
        pairs = [(r, frozenset(p).difference(g) if g else frozenset(p))
                 for r, p in groups.items() if not g.issuperset(p)]
        if len(pairs) > 1:
            nxt, head = self.res_next, self.res_head
            last = [r for r, _ in pairs if not nxt[r]]
            if len({head[r] for r in last}) < len(last):
                return self._merge(g, pairs)
        return g, frozenset(pairs)

    def _merge(self, g: frozenset, pairs: list) -> Content:
        nxt = self.res_next
        by_port: dict[int, list[int]] = defaultdict(list)
        out: dict[int, set[int]] = defaultdict(set)
        for r, ports in pairs:
            if nxt[r]:
                out[r].update(ports)
            else:
                for p in ports:
                    by_port[p].append(r)
        more = set()
        for p, rids in by_port.items():
            placed = self.merge_rids(rids) if len(rids) > 1 else rids
            if 0 in placed:
                more.add(p)
            else:
                for r in placed:
                    out[r].add(p)
        if more:  # guaranteed now: out of every item
            g = g.union(more)
            return g, frozenset([(r, frozenset(ps - more)) for r, ps in out.items()
                                 if not ps <= more])
        return g, frozenset([(r, frozenset(ps)) for r, ps in out.items()])

    def merge_rids(self, rids) -> set[int]:
        """One port's residuals with the residuals that test one field and nothing after it
        made one per field; {0} if one of those then always holds."""
        head, nxt, ivs = self.res_head, self.res_next, self.res_ivs
        same: dict[int, list[int]] = defaultdict(list)
        out: set[int] = set()
        for r in rids:
            if nxt[r]:
                out.add(r)
            else:
                same[head[r]].append(r)
        for k, rs in same.items():
            if len(rs) == 1:
                out.add(rs[0])
                continue
            union = normalize([pair for r in rs for pair in ivs[r]])
            if union == ((0, self.order[k].max_value),):
                return {0}
            out.add(self.intern(k, union, 0))
        if 0 in out:
            return {0}
        return out

    def intern(self, k: int, ivs: IntervalSet, nxt: int) -> int:
        """The residual `field k in ivs, then residual nxt`."""
        key = (k, ivs, nxt)
        rid = self.res_key.get(key)
        if rid is None:
            rid = self.res_key[key] = len(self.res_head)
            self.res_head.append(k)
            self.res_ivs.append(ivs)
            self.res_next.append(nxt)
            self.d.residuals.append((self.order[k].qname, ivs, nxt))
        return rid

    def split(self, s: int, k: int) -> Split:
        g, items = self.d.contents[s]
        top = self.order[k].max_value
        res_head, res_next, res_ivs = self.res_head, self.res_next, self.res_ivs
        base: dict[int, frozenset] = {}
        starts: dict[int, list] = defaultdict(list)  # cut -> (next residual, ports) starting
        ends: dict[int, list] = defaultdict(list)  # cut -> the same, ending just before it
        last = True  # every residual tests one field and nothing after it
        for rid, ports in items:
            if res_next[rid]:
                last = False
            if res_head[rid] == k:
                nxt = res_next[rid]
                if nxt < 0:  # a wide filter's formula: a successor residual per interval
                    for lo, hi, after in self.formula_split(rid):
                        for nxt in after:
                            starts[lo].append((nxt, ports))
                            if hi < top:
                                ends[hi + 1].append((nxt, ports))
                    continue
                for lo, hi in res_ivs[rid]:
                    starts[lo].append((nxt, ports))
                    if hi < top:
                        ends[hi + 1].append((nxt, ports))
            else:
                base[rid] = ports
        cuts = sorted(starts.keys() | ends.keys())
        if not cuts or cuts[0] != 0:  # none: a formula false wherever this field leads
            cuts.insert(0, 0)
        # For each residual that follows, how many active items give each port. Only a port
        # appearing or disappearing can change the successor, so only then is it rebuilt.
        active: dict[int, dict[int, int]] = {}
        out: list[tuple[int, int, int]] = []
        succ = -1
        no_events: list = []
        get_starts, get_ends = starts.get, ends.get
        for j, lo in enumerate(cuts):
            changed = succ < 0
            for nxt, ports in get_ends(lo, no_events):
                counts = active[nxt]
                for port in ports:
                    c = counts[port] - 1
                    if c:
                        counts[port] = c
                    else:
                        del counts[port]
                        changed = True
                if not counts:
                    del active[nxt]
            for nxt, ports in get_starts(lo, no_events):
                counts = active.get(nxt)
                if counts is None:
                    counts = active[nxt] = {}
                for port in ports:
                    c = counts.get(port)
                    if c is None:
                        counts[port] = 1
                        changed = True
                    else:
                        counts[port] = c + 1
            if changed:
                if base:
                    groups = {r: set(p) for r, p in base.items()}
                    for r, counts in active.items():
                        if r in groups:
                            groups[r].update(counts)
                        else:
                            groups[r] = counts
                else:
                    groups = dict(active)
                succ = self.state(g, groups)
            hi = cuts[j + 1] - 1 if j + 1 < len(cuts) else top
            if out and out[-1][2] == succ:
                out[-1] = (out[-1][0], hi, succ)
            else:
                out.append((lo, hi, succ))
        if self.watch is not None and last:
            self.floor += _final_entries_at_least(out)
        return Split(k, out)


def _final_entries_at_least(intervals: list[tuple[int, int, int]]) -> int:
    """Entries that the split `intervals` of a state whose residuals each test one field and
    nothing after costs in the reduced diagram, at least.

    Such a state's canonical content is its meaning: port by port, at most one interval set
    per field, neither empty nor the whole domain (`canonical` merges them), and the port is
    selected when any of them holds, a function from which each interval set can be read
    back. Its successors are such states too (or leaves), distinct in content, so distinct
    in meaning. The final reduction, which leaves one state per meaning, therefore keeps a
    state that means the same with this very split, and keeps it reachable: the messages
    that reached this one still need that decision. Every interval but those going the
    default way costs an entry of its own."""
    ways: dict[int, int] = defaultdict(int)
    for _, _, t in intervals:
        ways[t] += 1
    return len(intervals) - max(ways.values())


def build(items: Sequence[tuple[Conjunction | Wide, frozenset[int]]], order: Sequence[QueryField],
          progress=None, watch=None) -> Diagram:
    """The reduced diagram for conjunctions with ports, fields tested in `order`; a `Wide`
    in place of a conjunction is a filter expanded as a formula (compiler.formula).

    `progress`, if given, is called with (stage, states split so far in all stages) every 64
    splits. `watch`, if given, is called every 64 states asked for with a lower bound of the
    entries the finished diagram will hold (the states split so far whose every residual
    tests one field, `_final_entries_at_least`), and may raise to stop a build that costs too
    much (`compiler.compile`'s trial of a rule set the estimate puts over budget).
    """
    b = _Builder(order)
    b.watch = watch
    groups: dict[int, set] = {}
    residual = b.residual
    for conj, ports in items:
        if type(conj) is Wide:  # a filter kept whole (compiler.formula)
            for rid in b.wide_residuals(conj):
                groups.setdefault(rid, set()).update(ports)
            continue
        rid = residual(conj)
        known = groups.get(rid)
        if known is None:
            groups[rid] = set(ports)
        else:
            known.update(ports)
    root = b.state(frozenset(), groups)
    assert root == 0
    done = 0
    for k in range(len(b.order)):
        for s in b.todo.pop(k, ()):
            b.d.splits[s] = b.split(s, k)
            done += 1
            if progress and done % 64 == 0:
                progress(k, done)
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
