"""Incremental compilation: a compiled rule set that takes one rule change at a time and
answers with the entry writes it needs, in time proportional to what changed.

Theory of operation. The decision diagram (diagram.py) is a function of the rule set: a state
is a canonical content (G, {residual: ports}), its split is a function of its content, and
canonicalisation works port by port. For a port p, what a state's successor at value x holds
of p depends only on the state's own pairs (residual, p): p is guaranteed there if some pair
with p completes at x (or p is already guaranteed), else p rides with the next residual of
every pair with p that holds at x, and with every pair that tests a later field. So a rule
change, which changes the start state's pairs for the rule's ports only, changes a successor
only for those ports and only over the intervals of the changed pairs; the successor's new
content is its old content with those ports placed anew, and its split is the old split
patched the same way, recursively. States are hash-consed and immutable (except the start
state, edited in place) and counted by reference: a change creates the states on the paths it
alters and frees those no path reaches any more.

On top of the raw states sits the reduced diagram that `diagram._bypass_redundant` makes: a
state whose split goes one way is its successor, and states whose splits lead to the same
places over the same intervals are one *node*, represented (as there) by the start state or
else the member with the smallest canonical text. Nodes are keyed by what they mean (stage and
intervals over successor nodes), so a node's entries change only when its own id or a
successor's id changes (a leaf's action, `fwd` or `mcast` with its port bitmap, depends on
its ports alone). The application's one multicast group reaches every port a leaf names: it
is written again when that set changes. State ids are as wide as a from-scratch compile makes
them (`tables.state_bits` of the number of states); when a change moves that width, which is
rare, every id is derived again and every entry rewritten (`Step.resized`). Ids come from
`IdSpace`, which keeps exactly the ids `tables.stable_ids` would give the current set. The document (`entries()`) is therefore the
one a from-scratch `compile_rules` of the same rules writes, byte for byte; the property
tests check that, and `compiler.semantics`, after every change.

What is not incremental: a change that alters the field order or a field's match kind (the
default heuristics pick both from the rules; `--field-order` and `static=True` fix them)
changes the pipeline, and is compiled from scratch and diffed (`Step.rebuilt`).

Stateful rules (`compiler.stateful`) enter as their pseudo-rules, whose ports are markers; a
leaf holding markers decides `stateful(ctx)`, its context's id kept by an `IdSpace` as state
ids are, and each context's bind and decide entries come and go with it. A stateful rule's
banks and cells are given when it is added and kept while it lives (`Step.reset_cells` zeroes
cells a new rule takes over from a removed one); a change that would need more banks than
declared is refused and undone. So the state tables may place instances elsewhere than a
from-scratch compile of the same rules, whose allocation follows rule order; everything else
is the same, byte for byte.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compiler import intervals as iv
from compiler import lowering, order
from compiler import stateful as stateful_mod
from compiler.ast import And, Atom, Not, Or, Rule
from compiler.diagram import _Builder, port_list
from compiler.errors import CamusError, RuleError, StateError
from compiler.formula import FORMULA_AT, Wide, conjunctions
from compiler.id_space import IdSpace
from compiler.rules import deep_recursion
from compiler.spec import QueryField, Spec
from compiler.state import check_slots
from compiler.tables import (decision, default_entry, default_successor, interval_entries,
                             state_bits)
from p4rt.entry_key import entry_key
from pipeline import entries as entries_json
from pipeline.changes import Changes
from pipeline.match_kinds import MATCH_KINDS
from pipeline.model import CTX_WIDTH, MAX_PORTS_WIDTH

ROOT = 0
# A node's key: ("L", leaf state), ("root", G) for a start state that is a leaf, or
# (stage, ((lo, hi, successor node number), ...)).


@dataclass
class Step(Changes):
    """The writes one change needs, and what else it did."""

    rebuilt: bool = False  # the pipeline changed: compiled from scratch
    # The state ids' width (every id derived again) or the port bitmaps' width changed, and
    # with them the pipeline (only for a compile sized to its rules, not a static one).
    resized: bool = False
    seconds: float = 0.0


class _Raw(_Builder):
    """The unreduced diagram, hash-consed, built eagerly and patched by changes."""

    def __init__(self, fields: Sequence[QueryField]):
        super().__init__(fields)
        self.split_of: dict[int, tuple[int, list]] = {}
        self.refs: dict[int, int] = {}
        self.items_of: dict[int, dict] = {}  # rid -> ports, made on demand
        self.by_port_of: dict[int, dict] = {}  # port -> frozenset of rids, made on demand
        # Nodes of the reduced diagram, numbered; a state's node (bypassed states: their
        # successor's). Keys name successors by node number, so hashing a key is flat.
        self.cls: dict[int, int] = {}
        self.nid_of: dict[tuple, int] = {}
        self.key_of: dict[int, tuple] = {}
        self._next_nid = 0
        self.members: dict[int, set[int]] = {}
        self.touched: set[int] = set()
        self.unref: set[int] = set()
        # The start state, edited in place: G, rid -> ports, port -> rids, heads' counts.
        self.root_g: set[int] = set()
        self.root_items: dict[int, frozenset] = {}
        self.root_by_port: dict[int, set[int]] = defaultdict(set)
        self.root_heads: Counter = Counter()
        # The start state's pairs per port grouped by (head stage, its intervals): a change
        # reads a port's residuals that hold at a value by group, not one by one (100K rules
        # of the ITCH shape are 100 groups per port, one per symbol).
        self.root_idx: dict[int, dict[tuple, set[int]]] = defaultdict(dict)
        self.d.contents.append(None)  # index 0 is the start state; its content lives above
        self.refs[ROOT] = 1

    # --- states -------------------------------------------------------------------------

    def state(self, g: frozenset, groups: dict) -> int:
        """The full sweep's successor (see _Builder.split): canonical, then interned."""
        return self._intern(*self.canonical(g, groups))

    def _intern(self, g: frozenset, items: frozenset, items_dict: dict | None = None,
                by_port: dict | None = None, hint: int | None = None,
                changed: dict | None = None) -> int:
        content = (g, items)
        s = self.state_of.get(content)
        if s is not None:
            return s
        s = len(self.d.contents)
        self.state_of[content] = s
        self.d.contents.append(content)
        self.refs[s] = 0
        self.unref.add(s)
        if items_dict is not None:
            self.items_of[s] = items_dict
        if by_port is not None:
            self.by_port_of[s] = by_port
        if items:
            head = self.res_head
            k = min([head[r] for r, _ in items])
            old = self.split_of.get(hint) if hint is not None else None
            if old is not None and old[0] == k and changed is not None:
                ivs = self._patch(s, k, old[1], changed)
            else:
                ivs = self.split(s, k).intervals
            self._set_split(s, k, ivs)
        self._classify(s)
        return s

    def _set_split(self, s: int, k: int, ivs: list) -> None:
        old = self.split_of.get(s)
        for t in {t for _, _, t in ivs}:
            self.refs[t] += 1
            self.unref.discard(t)
        self.split_of[s] = (k, ivs)
        if old is not None:
            self._drop({t for _, _, t in old[1]})

    def _drop(self, targets: Iterable[int]) -> None:
        for t in targets:
            self.refs[t] -= 1
            if not self.refs[t]:
                self.unref.add(t)

    def collect(self) -> None:
        """Free the states no split reaches any more (and what only they reached)."""
        while self.unref:
            s = self.unref.pop()
            if self.refs.get(s, 1) or s == ROOT:
                continue
            del self.refs[s]
            content = self.d.contents[s]
            del self.state_of[content]
            self.d.contents[s] = None
            self.items_of.pop(s, None)
            self.by_port_of.pop(s, None)
            self._unclassify(s)
            split = self.split_of.pop(s, None)
            if split is not None:
                self._drop({t for _, _, t in split[1]})

    def view(self, s: int) -> tuple:
        """(G, rid -> ports, port -> rids) of a state."""
        if s == ROOT:
            return self.root_g, self.root_items, self.root_by_port
        items = self.items_of.get(s)
        g, fs = self.d.contents[s]
        if items is None:
            items = self.items_of[s] = dict(fs)
        by_port = self.by_port_of.get(s)
        if by_port is None:
            acc: dict[int, list] = defaultdict(list)
            for r, ports in items.items():
                for p in ports:
                    acc[p].append(r)
            by_port = self.by_port_of[s] = {p: frozenset(rs) for p, rs in acc.items()}
        return g, items, by_port

    def root_place(self, p: int, r: int) -> None:
        """Pair residual r with port p in the start state."""
        self.root_by_port[p].add(r)
        ps = self.root_items.get(r)
        if ps is None:
            self.root_heads[self.res_head[r]] += 1
            ps = frozenset()
        self.root_items[r] = ps | {p}
        self.root_idx[p].setdefault((self.res_head[r], self.res_ivs[r]), set()).add(r)

    def root_unplace(self, p: int, r: int) -> None:
        """Take residual r's pair with port p out of the start state."""
        have = self.root_by_port[p]
        have.discard(r)
        if not have:
            del self.root_by_port[p]
        ps = self.root_items[r] - {p}
        if ps:
            self.root_items[r] = ps
        else:
            del self.root_items[r]
            self.root_heads[self.res_head[r]] -= 1
        idx = self.root_idx[p]
        key = (self.res_head[r], self.res_ivs[r])
        idx[key].discard(r)
        if not idx[key]:
            del idx[key]
            if not idx:
                del self.root_idx[p]

    def _grouped(self, s: int, ports, by_port: dict) -> dict[int, dict[tuple, set[int]]]:
        """Per port of `ports`, state s's residuals paired with it, by (head, intervals)."""
        if s == ROOT:
            return self.root_idx
        head, res_ivs = self.res_head, self.res_ivs
        out: dict[int, dict[tuple, set[int]]] = {}
        for p in ports:
            groups: dict[tuple, set[int]] = {}
            for r in by_port.get(p, ()):
                groups.setdefault((head[r], res_ivs[r]), set()).add(r)
            out[p] = groups
        return out

    # --- nodes (the reduced diagram) --------------------------------------------------------

    def _classify(self, s: int) -> None:
        split = self.split_of.get(s)
        if split is None:
            key: tuple = ("L", s) if s != ROOT else ("root", frozenset(self.root_g))
        else:
            k, ivs = split
            cls = self.cls
            merged: list = []
            for lo, hi, t in ivs:
                c = cls[t]
                if merged and merged[-1][2] == c:
                    merged[-1] = (merged[-1][0], hi, c)
                else:
                    merged.append((lo, hi, c))
            if len(merged) == 1 and s != ROOT:  # redundant: the state is its successor
                self.cls[s] = merged[0][2]
                return
            key = (k, tuple(merged))
        n = self.nid_of.get(key)
        if n is None:
            n = self.nid_of[key] = self._next_nid
            self._next_nid += 1
            self.key_of[n] = key
        self.cls[s] = n
        self.members.setdefault(n, set()).add(s)
        self.touched.add(n)

    def _unclassify(self, s: int) -> None:
        n = self.cls.pop(s)
        members = self.members.get(n)
        if members is not None and s in members:
            members.discard(s)
            self.touched.add(n)

    def forget(self, n: int) -> None:
        """Node `n` has no member left (checked at the end of a change, so that a node
        that loses its last member and gains one within a change keeps its number)."""
        del self.members[n]
        del self.nid_of[self.key_of.pop(n)]

    # --- patching a split ---------------------------------------------------------------

    def _patch(self, s: int, k: int, old: list, changed: dict[int, set[int]]) -> list:
        """The split of state `s` (stage k), from `old`, the split of a state that differs
        from `s` only in where the ports of `changed` are ({port: rids whose pair with the
        port appeared or went, 0 for G})."""
        g, _, by_port = self.view(s)
        grouped = self._grouped(s, changed, by_port)
        top = self.order[k].max_value
        head, nxt, res_ivs = self.res_head, self.res_next, self.res_ivs
        regions: dict[int, tuple] = {}
        for p, rids in changed.items():
            pairs: list = []
            for r in rids:
                if r == 0 or head[r] != k:
                    pairs = [(0, top)]
                    break
                pairs.extend(res_ivs[r])
            regions[p] = iv.normalize(pairs)
        affected = iv.normalize([pair for reg in regions.values() for pair in reg])
        starts = [lo for lo, _, _ in old]
        cuts: set[int] = set()
        for lo, hi in affected:
            i = bisect_right(starts, lo) - 1
            while i < len(old) and old[i][0] <= hi:
                cuts.add(old[i][0])
                i += 1
        for p in changed:
            for h, ivs_ in grouped.get(p, ()):
                if h == k:
                    for lo, hi in ivs_:
                        cuts.add(lo)
                        cuts.add(hi + 1)
        ordered = sorted(cuts)
        pieces: list = []
        memo: dict = {}
        for a_lo, a_hi in affected:
            points = [a_lo] + [c for c in ordered[bisect_right(ordered, a_lo):]
                               if c <= a_hi] if ordered else [a_lo]
            for j, lo in enumerate(points):
                hi = points[j + 1] - 1 if j + 1 < len(points) else a_hi
                t = old[bisect_right(starts, lo) - 1][2]
                places = []
                for p, reg in regions.items():
                    if not _holds(reg, lo):
                        continue
                    if p in g:
                        places.append((p, (0,)))
                        continue
                    here = set()
                    for (h, ivs_), rs in grouped.get(p, {}).items():
                        if h != k:
                            here.update(rs)
                        elif _holds(ivs_, lo):
                            here.update([nxt[r] for r in rs])
                    if len(here) > 1:
                        here = self.merge_rids(here)
                    places.append((p, (0,) if 0 in here else tuple(sorted(here))))
                mkey = (t, tuple(places))
                succ = memo.get(mkey)
                if succ is None:
                    succ = memo[mkey] = self._derive(t, places)
                pieces.append((lo, hi, succ))
        # The old split outside the affected intervals, the pieces inside, merged.
        out: list = []
        a_starts = [lo for lo, _ in affected]
        for lo, hi, t in old:
            j = bisect_right(a_starts, hi) - 1  # the last affected interval starting by hi
            if j < 0 or affected[j][1] < lo:  # (those before it end before it starts)
                out.append((lo, hi, t))
                continue
            for c_lo, c_hi in iv.intersect(((lo, hi),), iv.complement(affected, top)):
                out.append((c_lo, c_hi, t))
        out += pieces
        out.sort()
        merged: list = []
        for lo, hi, t in out:
            if merged and merged[-1][2] == t:
                merged[-1] = (merged[-1][0], hi, t)
            else:
                merged.append((lo, hi, t))
        return merged

    def _derive(self, t: int, places: list) -> int:
        """State `t` with each (port, rids) of `places` placed anew: with G if rids is (0,),
        else with exactly those residuals."""
        gt, items_t, byp_t = self.view(t)
        changed: dict[int, set[int]] = {}
        for p, rids in places:
            old = {0} if p in gt else set(byp_t.get(p, ()))
            delta = old.symmetric_difference(rids)
            if delta:
                changed[p] = delta
        if not changed:
            return t
        g = set(gt)
        items = dict(items_t)
        by_port = dict(byp_t)
        for p, _ in places:
            if p not in changed:
                continue
            g.discard(p)
            for r in byp_t.get(p, ()):
                ps = items[r] - {p}
                if ps:
                    items[r] = ps
                else:
                    del items[r]
            by_port.pop(p, None)
        for p, rids in places:
            if p not in changed:
                continue
            if rids == (0,):
                g.add(p)
            else:
                for r in rids:
                    items[r] = items.get(r, frozenset()) | {p}
                by_port[p] = frozenset(rids)
        return self._intern(frozenset(g), frozenset(items.items()), items, by_port, t, changed)


def _holds(ivs: tuple, x: int) -> bool:
    for lo, hi in ivs:
        if x < lo:
            return False
        if x <= hi:
            return True
    return False


def ranged_fields(f) -> set[str]:
    """The fields a filter tests with more than full-width equality (see match_kinds)."""
    out: set[str] = set()
    todo = [f]
    while todo:
        f = todo.pop()
        if isinstance(f, Atom):
            if f.prefix_len is not None or f.op not in ("==", "!="):
                out.add(f.field.qname)
        elif isinstance(f, (And, Or)):
            todo.extend(f.items)
        elif isinstance(f, Not):
            todo.append(f.item)
    return out


def _conjunctions(rule: Rule) -> list:
    """The rule's normal form; RuleError for a filter too wide for one, which only a
    from-scratch compile takes (as a formula, `compiler.formula`): this compiler patches
    states made of conjunctions."""
    conjs = conjunctions(rule.filter, rule.line)
    if conjs and type(conjs[0]) is Wide:
        raise RuleError(f"this filter may have more than {FORMULA_AT} alternatives in normal "
                        "form: the incremental compiler takes only filters below that (a "
                        "from-scratch compile takes it; or split it into several rules)",
                        rule.line or None, 1)
    return conjs


def rule_key(rule: Rule) -> tuple:
    """What a rule means (its filter and ports), whatever its line and text."""
    return rule.filter, rule.ports


class Incremental:
    """Rules compiled once, then changed one at a time (`add`, `remove`), each change
    answered with its writes (`Step`); `entries()` is the document a from-scratch
    `compile_rules(spec, rules, field_order, static=static)` of the current rules gives."""

    def __init__(self, spec: Spec, rules: Sequence[Rule] = (),
                 field_order: Sequence[str] | None = None, static: bool = False):
        self.spec, self.field_order, self.static = spec, field_order, static
        # Stateful rules: their compiled state, and by rule key the serials of the live ones.
        self.state = stateful_mod.State(spec) if spec.state_vars else None
        self.serials: dict[tuple, list[int]] = {}
        if self.state is not None:
            check_slots(rules)
            rules = [p for r in rules for p in self._expand(r)]
        self.rules: dict[tuple, list[Rule]] = {}
        self.conjs: dict[tuple, list] = {}  # rule key -> its conjunctions (dnf)
        self.ivs_count: dict[QueryField, Counter] = defaultdict(Counter)
        self.cut_count: dict[QueryField, Counter] = defaultdict(Counter)  # distinct cut values
        self.ranged: Counter = Counter()  # field -> rules testing it with a range
        with deep_recursion():
            for r in rules:
                self._remember(r, +1)
        self._start()

    # --- the rule multiset --------------------------------------------------------------

    def _remember(self, rule: Rule, sign: int) -> list:
        key = rule_key(rule)
        conjs = self.conjs.get(key)
        if conjs is None:
            conjs = _conjunctions(rule)
        if sign > 0:
            self.rules.setdefault(key, []).append(rule)
            self.conjs[key] = conjs
        else:
            same = self.rules.get(key)
            if not same:
                raise CamusError(f"no such rule to remove: {rule.text or rule.filter}",
                                 rule.line or None)
            same.pop()
            if not same:
                del self.rules[key]
                del self.conjs[key]
        for conj in conjs:
            for q, ivs in conj.items():
                counts = self.ivs_count[q]
                n = counts[ivs] = counts[ivs] + sign
                if n == 0 or (n == 1 and sign > 0):  # a distinct interval set came or went
                    ends = self.cut_count[q]
                    for x in {x for pair in ivs for x in pair}:
                        ends[x] += sign
                        if not ends[x]:
                            del ends[x]
                    if not ends:
                        del self.cut_count[q]
                if not n:
                    del counts[ivs]
        for name in ranged_fields(rule.filter):
            self.ranged[name] += sign
        return conjs

    def _expand(self, rule: Rule) -> list[Rule]:
        """A rule as the diagram takes it: itself, or a stateful rule's pseudo-rules (the
        rule is then live in `self.state`)."""
        if self.state is None or not stateful_mod.stateful(rule):
            return [rule]
        rs = self.state.add(rule)
        self.serials.setdefault(rule_key(rule), []).append(rs.serial)
        return rs.pseudo

    def current_rules(self) -> list[Rule]:
        plain = [r for same in self.rules.values() for r in same
                 if not any(stateful_mod.is_marker(p) for p in r.ports)]
        return plain + (self.state.live_rules() if self.state is not None else [])

    def _layout(self) -> tuple[list[QueryField], dict[str, str]]:
        """The field order and match kinds compile_rules would choose for the current rules."""
        fields = order.ranked(self.spec, {q: len(c) for q, c in self.cut_count.items()},
                              self.field_order, self.static)
        if self.static:
            kinds = {q.qname: q.kind for q in fields}
        else:
            kinds = {q.qname: "exact" if q.kind == "exact" or not self.ranged[q.qname]
                     else q.kind for q in self.spec.query_fields.values()}
        return fields, {q.qname: kinds[q.qname] for q in fields}  # what the stages use

    # --- building -----------------------------------------------------------------------

    def _start(self) -> None:
        # Contexts (state): each one's id, the leaf nodes deciding it, its entries; each
        # leaf node's context and the ports it may send to.
        self.ctx_ids = IdSpace(CTX_WIDTH)
        self.ctx_members: dict = defaultdict(set)
        self.ctx_out: dict = {}
        self.ctx_node: dict[int, object] = {}
        self.ctx_of: dict[int, int] = {}  # leaf node -> its context's id
        self.leaf_real: dict[int, frozenset] = {}
        self.resets: list[tuple[str, int, int]] = []
        self.fields, self.kinds = self._layout()
        self.stages = lowering.stages_for(self.spec, self.fields, self.kinds)
        self.app = lowering.application(self.spec, self.stages)
        self.leaf_table = lowering.leaf_table(self.spec)
        raw = self.raw = _Raw(self.fields)
        self.counts: Counter = Counter()  # (rid, port) -> conjunctions giving it
        self.root_raw: dict[int, set[int]] = defaultdict(set)  # port -> rids with a count
        for key, conjs in self.conjs.items():
            n = len(self.rules[key])
            ports = key[1]
            for conj in conjs:
                rid = raw.residual(conj)
                for p in ports:
                    self.counts[rid, p] += n
                    self.root_raw[p].add(rid)
        # Per port, its residuals that test one field and nothing after it, by that field,
        # and each field's merged residual (what `merge_rids` makes of them; 0: always holds).
        self.root_last: dict[int, dict[int, set[int]]] = defaultdict(dict)
        self.root_merged: dict[int, dict[int, int]] = defaultdict(dict)
        nxt, head = raw.res_next, raw.res_head
        for p, rids in self.root_raw.items():
            last = self.root_last[p]
            for r in rids:
                if not nxt[r]:
                    last.setdefault(head[r], set()).add(r)
            merged = self.root_merged[p]
            for h, rs in last.items():
                merged[h] = self._merged(h, rs)
            for r in self._placed(p):
                if r:
                    raw.root_place(p, r)
                else:
                    raw.root_g.add(p)
        # Output: node -> id, entries; leaves' groups.
        self.ids: dict[int, int] = {}  # node -> state id
        self.rep: dict[int, int] = {}  # node -> the state that represents it
        self.key: dict[int, tuple] = {}  # node -> its key (kept until it is published gone)
        self.out: dict[int, _Out] = {}  # node -> its entries
        self.root_node: int | None = None  # the node the start state represents
        self.parents: dict[int, Counter] = defaultdict(Counter)
        self.leaves: dict[int, frozenset] = {}  # leaf nodes with ports
        self.bitmaps: dict[frozenset, int] = {}  # the leaves' mcast bitmaps (tables.bitmap)
        self.dead: set[int] = set()  # the leaf node with none
        # The application's one multicast group reaches every port a leaf names.
        self.port_leaves: Counter = Counter()  # port -> leaf nodes naming it
        self.group_ports: tuple[int, ...] = ()
        self.state_width = state_bits(1, self.static)
        self.state_space = IdSpace(self.state_width)
        self.port_texts: dict = {}
        self.pair_texts: dict = {}
        self._reroot()
        self._publish(Step())

    def _reroot(self, changed: dict[int, set[int]] | None = None) -> None:
        """The start state's split after its content changed (`changed`, or anything)."""
        raw = self.raw
        heads = [h for h, n in raw.root_heads.items() if n]
        old = raw.split_of.get(ROOT)
        raw._unclassify(ROOT) if ROOT in raw.cls else None
        if not heads:
            if old is not None:
                del raw.split_of[ROOT]
                raw._drop({t for _, _, t in old[1]})
        else:
            k = min(heads)
            if old is not None and old[0] == k and changed is not None:
                ivs = raw._patch(ROOT, k, old[1], changed)
            else:
                raw.d.contents[ROOT] = (frozenset(raw.root_g), frozenset(raw.root_items.items()))
                ivs = raw.split(ROOT, k).intervals
                raw.d.contents[ROOT] = None
            raw._set_split(ROOT, k, ivs)
        raw._classify(ROOT)
        raw.collect()

    @property
    def pipeline(self):
        """The pipeline IR `compile_rules` makes for the current rules: state ids and port
        bitmaps as wide as they need (a static pipeline: as wide as any rule set needs)."""
        ports_width = MAX_PORTS_WIDTH if self.static else 1 + max(self.group_ports, default=0)
        return lowering.pipeline([self.app], self.state_width, ports_width)

    # --- changes ------------------------------------------------------------------------

    def add(self, rule: Rule) -> Step:
        return self.change([rule], [])

    def remove(self, rule: Rule) -> Step:
        return self.change([], [rule])

    def change(self, added: Sequence[Rule], removed: Sequence[Rule]) -> Step:
        """Add and remove rules (removed: equal in filter and ports to current ones); the
        writes that take a target from the entries before to the entries after."""
        started = time.perf_counter()
        with deep_recursion():
            if self.state is not None:
                return self._stateful_change(added, removed, started)
            return self._change(added, removed, started)

    def _stateful_change(self, added: Sequence[Rule], removed: Sequence[Rule],
                         started: float) -> Step:
        """`change` with state: stateful rules as their pseudo-rules; undone, and refused,
        when the state stages cannot hold the result."""
        state = self.state
        taken: dict[tuple, int] = {}
        gone_serials, plain_removed = [], []
        for r in removed:  # the most recently added live instance equal to each
            key = rule_key(r)
            if stateful_mod.stateful(r):
                live = self.serials.get(key, [])
                if len(live) <= taken.get(key, 0):
                    raise CamusError(f"no such rule to remove: {r.text or r.filter}",
                                     r.line or None)
                taken[key] = taken.get(key, 0) + 1
                gone_serials.append(live[-taken[key]])
            else:
                plain_removed.append(r)
        survivors = [rs.rule for s, rs in state.rules.items() if s not in gone_serials]
        check_slots(survivors + [r for r in added if stateful_mod.stateful(r)])
        snapshot = state.snapshot(), {k: list(v) for k, v in self.serials.items()}
        try:
            pseudo_removed = list(plain_removed)
            for s in gone_serials:
                rs = state.remove(s)
                self.serials[rule_key(rs.rule)].remove(s)
                pseudo_removed += rs.pseudo
            pseudo_added = [p for r in added for p in self._expand(r)]
            for r in pseudo_removed:
                if rule_key(r) not in self.rules:
                    raise CamusError(f"no such rule to remove: {r.text or r.filter}",
                                     r.line or None)
            for r in pseudo_added:
                _conjunctions(r)
        except CamusError:  # nothing applied yet (a rule over the thresholds or
            state.restore(snapshot[0])  # combinations, a filter too wide, ...)
            self.serials = snapshot[1]
            raise
        self.serials = {k: v for k, v in self.serials.items() if v}
        try:
            step = self._change(pseudo_added, pseudo_removed, started)
        except StateError:
            for r in pseudo_added:  # back to the rules before the change, then rebuilt
                self._remember(r, -1)
            for r in pseudo_removed:
                self._remember(r, +1)
            state.restore(snapshot[0])
            self.serials = snapshot[1]
            self._start()
            raise
        return step

    def _change(self, added: Sequence[Rule], removed: Sequence[Rule], started: float) -> Step:
        for r in removed:  # check them all before changing anything
            if rule_key(r) not in self.rules:
                raise CamusError(f"no such rule to remove: {r.text or r.filter}",
                                 r.line or None)
        for r in added:
            _conjunctions(r)  # RuleError before anything changes
        edits = [(r, sign, self._remember(r, sign))
                 for rules, sign in ((removed, -1), (added, +1)) for r in rules]
        layout = self._layout()
        if layout != (self.fields, self.kinds):
            before = self.entries()
            self._start()
            step = _doc_diff(before, self.entries(), self._bind_tables())
            step.rebuilt = True
        else:
            touched: dict[int, set[int]] = defaultdict(set)  # port -> rids toggled
            counts, residual = self.counts, self.raw.residual
            for r, sign, conjs in edits:
                for conj in conjs:
                    rid = residual(conj)
                    for p in r.ports:
                        n = counts[rid, p] + sign
                        if n:
                            counts[rid, p] = n
                        else:
                            del counts[rid, p]
                        if n == 0 or (n == 1 and sign > 0):
                            touched[p].add(rid)
            step = Step()
            self._root_change(touched)
            self._publish(step)
        step.reset_cells, self.resets = self.resets, []
        step.seconds = time.perf_counter() - started
        return step

    def _bind_tables(self) -> frozenset[str]:
        """The bind tables, whose entries change by delete and insert, never modify: so
        that every stale binding is gone before cells are zeroed for new ones."""
        if self.app.state is None:
            return frozenset()
        return frozenset(t for v in self.app.state.vars for t in v.bind_tables)

    def _merged(self, h: int, rs: set[int]) -> int:
        """`merge_rids` of residuals that all test field h and nothing after it: the one,
        or the union of their intervals (0 if that is the whole field)."""
        raw = self.raw
        if len(rs) == 1:
            return next(iter(rs))
        union = iv.normalize([pair for r in rs for pair in raw.res_ivs[r]])
        if union == ((0, raw.order[h].max_value),):
            return 0
        return raw.intern(h, union, 0)

    def _placed(self, p: int) -> set[int]:
        """Where the start state places port p: {0} (guaranteed, in G) or its residuals,
        those that test one field and nothing after it merged per field."""
        merged = self.root_merged.get(p, {})
        if 0 in merged.values():
            return {0}
        nxt = self.raw.res_next
        return {r for r in self.root_raw[p] if nxt[r]} | set(merged.values())

    def _root_change(self, touched: dict[int, set[int]]) -> None:
        """The start state after the pairs (residual, port) of `touched` came or went; its
        split patched where they hold. A port's residuals are not read one by one: only the
        toggled ones, and the merged residual of a field whose last-field residuals changed."""
        raw = self.raw
        nxt, head = raw.res_next, raw.res_head
        changed: dict[int, set[int]] = {}
        for p, rids in touched.items():
            now = self.root_raw[p]
            last = self.root_last[p]
            merged = self.root_merged[p]
            was_g = p in raw.root_g
            toggled: set[int] = set()
            heads: set[int] = set()
            for r in rids:
                present = bool(self.counts.get((r, p)))
                if present == (r in now):
                    continue  # went and came back within the change
                if present:
                    now.add(r)
                else:
                    now.discard(r)
                if nxt[r]:
                    toggled.add(r)
                    continue
                rs = last.setdefault(head[r], set())
                rs.add(r) if present else rs.discard(r)
                heads.add(head[r])
            old_merged = {h: merged.get(h) for h in heads}
            for h in heads:
                if last[h]:
                    merged[h] = self._merged(h, last[h])
                else:
                    del last[h]
                    merged.pop(h, None)
            if not now:
                del self.root_raw[p]
            is_g = 0 in merged.values()
            if was_g and is_g:
                continue
            if not was_g and not is_g:
                delta = toggled
                for h, m in old_merged.items():
                    m2 = merged.get(h)
                    if m != m2:
                        delta.update(x for x in (m, m2) if x is not None)
                for r in delta:
                    if r in raw.root_by_port.get(p, ()):
                        raw.root_unplace(p, r)
                    else:
                        raw.root_place(p, r)
            else:  # p joins or leaves G: every pair of p placed anew
                old = {0} if was_g else set(raw.root_by_port.get(p, ()))
                for r in old - {0}:
                    raw.root_unplace(p, r)
                raw.root_g.discard(p)
                new = self._placed(p) if now else set()
                for r in new:
                    if r:
                        raw.root_place(p, r)
                    else:
                        raw.root_g.add(p)
                delta = old ^ new
            if delta:
                changed[p] = delta
        if changed:
            self._reroot(changed)

    # --- output -------------------------------------------------------------------------

    def _publish(self, step: Step) -> None:
        """Bring nodes, ids, groups and entries in line with the raw diagram; record the
        writes in `step`."""
        raw = self.raw
        touched = raw.touched
        new_contexts = self._new_contexts(touched) if self.state is not None else {}
        raw.touched = set()
        # The start state's stage before the change (its node's key goes with the node).
        root_stage = self.key[self.root_node][0] if self.root_node in self.key else None
        describe, texts = self._describe, self.port_texts
        gone_nodes, new_nodes, id_added, id_removed = [], [], {}, []
        port_leaves, ports_moved = self.port_leaves, False
        for n in touched:
            members = raw.members.get(n)
            if not members:
                if members is not None:
                    raw.forget(n)
                rep = self.rep.pop(n, None)
                if rep is not None:
                    gone_nodes.append(n)
                    if rep != ROOT:
                        id_removed.append(n)
                continue
            if ROOT in members:
                rep = ROOT
            elif len(members) == 1:
                rep = next(iter(members))
            else:
                rep = min(members, key=lambda s: describe(s, texts))
            old_rep = self.rep.get(n)
            if old_rep == rep:
                continue
            self.rep[n] = rep
            if old_rep is None:
                new_nodes.append(n)
            elif old_rep != ROOT:
                id_removed.append(n)
            if rep != ROOT:
                id_added[n] = describe(rep, texts)
        for n in gone_nodes:
            key = self.key[n]
            if key[0] in ("L", "root"):
                ports = self.leaves.pop(n, None)
                self.dead.discard(n)
                ctx = self.ctx_node.pop(n, None)
                if ctx is not None:
                    self.ctx_members[ctx].discard(n)
                    self.ctx_of.pop(n, None)
                if ports is not None:
                    self.bitmaps.pop(ports, None)
                    for p in self.leaf_real.pop(n, ports):
                        port_leaves[p] -= 1
                        if not port_leaves[p]:
                            del port_leaves[p]
                            ports_moved = True
            else:
                for t in {t for _, _, t in key[1]}:
                    self.parents[t][n] -= 1
                    if not self.parents[t][n]:
                        del self.parents[t][n]
        for n in new_nodes:
            key = self.key[n] = raw.key_of[n]
            if key[0] in ("L", "root"):
                ports = key[1] if key[0] == "root" else raw.d.contents[key[1]][0]
                if ports:
                    self.leaves[n] = ports
                    real = ports
                    if self.state is not None:
                        ctx = self.state.context(ports)
                        if ctx is not None:
                            self.ctx_node[n] = ctx
                            self.ctx_members[ctx].add(n)
                            real = self.leaf_real[n] = self.state.real_ports(ports)
                    for p in real:
                        port_leaves[p] += 1
                        ports_moved |= port_leaves[p] == 1
                else:
                    self.dead.add(n)
            else:
                for t in {t for _, _, t in key[1]}:
                    self.parents[t][n] += 1
        for n in gone_nodes:
            self.key.pop(n)
        out_changed: set[int] = set()  # nodes whose id is new or changed
        # A compile sized to its rules numbers the states with `state_bits(states)` bits:
        # when the count crosses a byte boundary (rare), every id is derived again.
        width = state_bits(len(self.rep), self.static)
        if width != self.state_width:
            gone_ids = set(id_removed)
            texts_now = {k: text for k, (_, text) in self.state_space.hashed.items()
                         if k not in gone_ids}
            texts_now.update(id_added)
            self.state_width, self.state_space = width, IdSpace(width)
            moved = self.state_space.update(texts_now, ())
            new_nodes = list(self.rep)  # every node's entries made anew
            step.resized = True
        else:
            moved = self.state_space.update(id_added, id_removed)
        for n in id_removed:
            if n not in self.state_space.slot:
                self.ids.pop(n, None)
        for n in moved:
            self.ids[n] = self.state_space.slot[n]
        out_changed.update(moved)
        for n in touched:
            if self.rep.get(n) == ROOT and self.ids.get(n) != 0:
                self.ids[n] = 0
                out_changed.add(n)
        ctx_gone: dict[tuple, dict] = {}
        ctx_came: dict[tuple, dict] = {}
        if self.state is not None:
            out_changed |= self._contexts(new_contexts, ctx_gone, ctx_came)
        if ports_moved:
            used = tuple(sorted(port_leaves))
            if used != self.group_ports:
                gid = self.app.multicast_group
                if used:
                    step.set_groups[gid] = tuple((p, 0) for p in used)
                else:
                    step.delete_groups = [gid]
                if not self.static and max(used, default=0) != max(self.group_ports, default=0):
                    step.resized = True  # the port bitmaps' width follows the highest port
                self.group_ports = used
        # Entries: in full for new nodes and nodes with a new id; for the parents of nodes
        # whose id or group changed, only the entries leading there (if the default stays).
        gone: dict[tuple, dict] = {}
        came: dict[tuple, dict] = {}
        full = {n for n in new_nodes if n in self.rep}
        full.update(n for n in out_changed if n in self.rep)
        partial: dict[int, set[int]] = defaultdict(set)
        for t in out_changed:
            for n in self.parents.get(t, ()):
                if n not in full:
                    partial[n].add(t)
        # The start state's node changes key with nearly every change, but mostly keeps its
        # entries: the new one starts from the old one's, if it splits at the same stage
        # (entries of another stage's tables are not its own, whatever their intervals).
        base = None
        root = next((n for n in full if self.rep[n] == ROOT), None)
        if root is not None and self.root_node in gone_nodes and self.key[root][0] == root_stage:
            base = self.out.pop(self.root_node, None)
        if root is not None:
            self.root_node = root
        for n in gone_nodes:
            _drop_out(self.out.pop(n, None), gone)
        for n in full:
            _drop_out(self.out.get(n), gone)
            self.out[n] = self._emit(n, came, gone, base if n == root else None, out_changed)
        for n, succs in partial.items():
            self._repoint(n, succs, gone, came)
        _settle(gone, came, step)
        _settle(ctx_gone, ctx_came, step, self._bind_tables())

    def _new_contexts(self, touched: set[int]) -> dict:
        """The contexts that the leaf nodes a change brings need and that are not in use
        yet, checked and with their new rules placed in banks and cells (StateError, before
        anything is published, when they cannot be)."""
        raw, out = self.raw, {}
        for n in touched:
            if not raw.members.get(n) or n in self.key:
                continue
            key = raw.key_of[n]
            if key[0] not in ("L", "root"):
                continue
            ports = key[1] if key[0] == "root" else raw.d.contents[key[1]][0]
            ctx = self.state.context(ports)
            if ctx is not None and ctx not in self.ctx_ids.slot:
                out[ctx] = ctx.text()
        for ctx in out:
            self.state.check(ctx)
        for var, bank, first, count in self.state.allocate(out):
            registers = self.app.state.vars[self.state.vars.index(var)].registers
            self.resets.append((registers[bank], first, count))
        return out

    def _contexts(self, new: dict, gone: dict, came: dict) -> set[int]:
        """Bring the contexts in line with the leaf nodes: ids (an `IdSpace`, so the ids a
        from-scratch compile gives these contexts), entries into `gone` and `came`; the leaf
        nodes whose context id is new or changed (their parents' entries name it)."""
        dropped = [c for c in self.ctx_out if not self.ctx_members.get(c)]
        for c in dropped:
            self.ctx_members.pop(c, None)
        moved = self.ctx_ids.update(new, dropped)
        for c in dropped:
            for e in self.ctx_out.pop(c):
                gone[_key(e)] = e
        names = stateful_mod.tables_for(self.spec, self.app.state)
        nodes: set[int] = set()
        for c in moved:
            cid = self.ctx_ids.slot[c]
            for e in self.ctx_out.get(c, ()):
                gone[_key(e)] = e
            self.ctx_out[c] = self.state.entries(c, cid, names)
            for e in self.ctx_out[c]:
                came[_key(e)] = e
            for n in self.ctx_members[c]:
                self.ctx_of[n] = cid
                nodes.add(n)
        return nodes

    def _describe(self, s: int, texts: dict) -> str:
        """`Diagram.describe(s)`, with each (residual, ports) text made once: a changed
        state mostly holds the pairs of the state it was derived from."""
        g, items = self.raw.d.contents[s]
        memo, residual_str = self.pair_texts, self.raw.d.residual_str
        parts = []
        for pair in items:
            text = memo.get(pair)
            if text is None:
                text = memo[pair] = f"{residual_str(pair[0])}->{port_list(pair[1], texts)}"
            parts.append(text)
        parts.sort()
        return "G=" + port_list(g, texts) + "|" + "|".join(parts)

    def _action(self, t: int) -> tuple[str, dict]:
        return decision(t, self.ids, self.leaves, self.bitmaps, self.ctx_of)

    def _emit(self, n: int, came: dict, gone: dict, base: _Out | None = None,
              changed: set[int] = frozenset()) -> _Out:
        """Node n's entries. With `base` (the entries of a node with the same id that this
        one replaces), the entries of intervals both have, to successors in `changed`
        excepted, are kept rather than made again."""
        key = self.key[n]
        out = _Out()
        if key[0] == "L":
            return out
        if key[0] == "root":
            if n in self.leaves:
                name, params = self._action(n)
                e = {"table": self.leaf_table, "match": {"state": {"exact": 0}},
                     "action": name, "params": params}
                out.fixed.append((_key(e), e))
                came[out.fixed[0][0]] = e
            _drop_out(base, gone)
            return out
        k, merged = key
        stage, sid = self.stages[k], self.ids[n]
        for lo, hi, t in merged:
            out.succ_ivs[t].append((lo, hi))
        default = out.default = default_successor(stage, merged, self.dead, self.ids)
        if base is not None and base.default != default:
            _drop_out(base, gone)
            base = None
        if base is not None and default not in changed:
            out.fixed = base.fixed
        else:
            if base is not None:
                for ek, e in base.fixed:
                    gone[ek] = e
            if default not in self.dead:
                e = default_entry(stage, sid, self._action(default))
                out.fixed.append((_key(e), e))
                came[out.fixed[0][0]] = e
        old = base.by_iv if base is not None else {}
        for iv_ in merged:
            t = iv_[2]
            if t == default:
                continue
            pairs = old.pop(iv_, None)
            if pairs is not None and t not in changed:
                out.by_iv[iv_] = pairs
                continue
            if pairs is not None:
                for ek, e in pairs:
                    gone[ek] = e
            pairs = out.by_iv[iv_] = []
            for e in interval_entries(stage, sid, iv_[0], iv_[1], self._action(t)):
                pairs.append((_key(e), e))
                came[pairs[-1][0]] = e
        for pairs in old.values():
            for ek, e in pairs:
                gone[ek] = e
        return out

    def _repoint(self, n: int, succs: set[int], gone: dict, came: dict) -> None:
        """Node n's successors `succs` changed id or group: rewrite the entries to them."""
        k, merged = self.key[n]
        stage, sid = self.stages[k], self.ids[n]
        out = self.out[n]
        if out.default in succs or self._may_tie(stage, out, succs):
            _drop_out(out, gone)
            self.out[n] = self._emit(n, came, gone)
            return
        for t in succs:
            action = self._action(t)
            for lo, hi in out.succ_ivs.get(t, ()):
                for ek, e in out.by_iv[lo, hi, t]:
                    gone[ek] = e
                pairs = out.by_iv[lo, hi, t] = []
                for e in interval_entries(stage, sid, lo, hi, action):
                    pairs.append((_key(e), e))
                    came[pairs[-1][0]] = e

    def _may_tie(self, stage, out: _Out, succs: set[int]) -> bool:
        """Whether a new id of `succs` may change which successor is the default: only if
        one of them ties with it on everything but the id (see tables._default_successor)."""
        per_value = MATCH_KINDS[stage.match_kind].per_value

        def score(t):
            ivs = out.succ_ivs[t]
            span = sum(hi - lo + 1 for lo, hi in ivs)
            return span if per_value else (len(ivs) + (t in self.dead), span)
        best = score(out.default)
        return any(score(t) == best for t in succs if t in out.succ_ivs)

    # --- the document -------------------------------------------------------------------

    def entries(self) -> dict:
        """entries.json for the current rules: the nodes' entries, in the order
        `tables.emit` writes them (states by id; a state's default entry, then its
        intervals in order)."""
        table_entries: list[dict] = []
        out = self.out
        for n in sorted(self.rep, key=self.ids.__getitem__):
            o = out[n]
            table_entries += [e for _, e in o.fixed]
            for pairs in o.by_iv.values():
                table_entries += [e for _, e in pairs]
        groups = []
        if self.group_ports:
            groups.append({"id": self.app.multicast_group,
                           "replicas": [{"port": p, "rid": 0} for p in self.group_ports]})
        if self.state is None:
            return {"camus_entries": entries_json.ENTRIES_VERSION,
                    "table_entries": table_entries, "multicast_groups": groups}
        for c in sorted(self.ctx_out, key=self.ctx_ids.slot.__getitem__):
            table_entries += self.ctx_out[c]
        return {"camus_entries": entries_json.STATE_ENTRIES_VERSION,
                "table_entries": table_entries, "multicast_groups": groups,
                "state_instances": self.state.instances(self.app.name)}

    def stats(self) -> dict:
        per_table: dict[str, int] = {}
        total = 0
        for out in self.out.values():
            for pairs in (out.fixed, *out.by_iv.values()):
                for _, e in pairs:
                    per_table[e["table"]] = per_table.get(e["table"], 0) + 1
                    total += 1
        for entries in self.ctx_out.values():
            for e in entries:
                per_table[e["table"]] = per_table.get(e["table"], 0) + 1
                total += 1
        out = {"rules": len(self.current_rules()),
                "conjunctions": sum(len(c) * len(self.rules[k]) for k, c in self.conjs.items()),
                "fields": [s.field.name for s in self.stages],
                "entries": {"total": total, "per_table": per_table},
                "states": len(self.rep), "state_width": self.state_width,
                "multicast_groups": 1 if self.group_ports else 0}
        if self.state is not None:
            out["state"] = {"stateful_rules": len(self.state.rules),
                            "contexts": len(self.ctx_out)}
        return out


class _Out:
    """A node's entries: the default (or leaf) entry, and per non-default interval
    (lo, hi, successor) its entries, each with its key; the intervals of each successor."""

    __slots__ = ("default", "fixed", "by_iv", "succ_ivs")

    def __init__(self):
        self.default: int | None = None
        self.fixed: list[tuple[tuple, dict]] = []
        self.by_iv: dict[tuple, list[tuple[tuple, dict]]] = {}
        self.succ_ivs: dict[int, list[tuple[int, int]]] = defaultdict(list)


def _key(e: dict) -> tuple:
    """An entry's identity among the entries this module makes (which always write the
    match keys in one order): `entry_key` without its sort."""
    return (e["table"], tuple([(name, kind, tuple(v) if type(v) is list else v)
                               for name, m in e["match"].items() for kind, v in m.items()]),
            e.get("priority", 0))


def _drop_out(out: _Out | None, gone: dict) -> None:
    if out is not None:
        for pairs in (out.fixed, *out.by_iv.values()):
            for ek, e in pairs:
                gone[ek] = e


def _settle(gone: dict, came: dict, step: Step, no_modify: frozenset[str] = frozenset()
            ) -> None:
    """Entries that went and came (by key) as deletes, inserts and modifies (in the tables
    of `no_modify`, a delete and an insert)."""
    for k, e in came.items():
        old = gone.pop(k, None)
        if old is None:
            step.insert.append(e)
        elif old["action"] != e["action"] or old["params"] != e["params"]:
            if e["table"] in no_modify:
                step.delete.append(old)
                step.insert.append(e)
            else:
                step.modify.append(e)
    step.delete.extend(gone.values())


def _doc_diff(old: dict, new: dict, no_modify: frozenset[str] = frozenset()) -> Step:
    step = Step()
    gone = {entry_key(e): e for e in old["table_entries"]}
    came = {entry_key(e): e for e in new["table_entries"]}
    _settle(gone, came, step, no_modify)
    have = {g["id"]: tuple((r["port"], r["rid"]) for r in g["replicas"])
            for g in old["multicast_groups"]}
    want = {g["id"]: tuple((r["port"], r["rid"]) for r in g["replicas"])
            for g in new["multicast_groups"]}
    step.set_groups = {g: r for g, r in want.items() if have.get(g) != r}
    step.delete_groups = sorted(g for g in have if g not in want)
    return step
