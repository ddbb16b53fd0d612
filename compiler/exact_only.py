"""The fast path for rule sets that test one field for equality only (the paper's hICN shape).

`content == ID : fwd(H)`, a million times over, is a dictionary: one exact entry per distinct
identifier, leading to the union of the ports of the rules that name it. The general path
gets there too, but through per-rule conjunctions, interned residuals and a sweep over two
million cut points (about 100 µs a rule). Here the decision diagram is written down directly,
in the form `diagram.build` gives it for such rules, and only when something reads it (`camus
compile --dot`, tests): the entries come straight from the {value: ports} dictionary, one per
value, the state ids from the general `tables.state_ids` over the handful of states (the root,
one leaf per port set, the dead state). The rest of the compile (pipeline, stats:
`compiler.compile`) is the general one. tests/compiler/test_exact_only.py checks entries,
diagram, pipeline and stats against the general path, and the tables against the reference
evaluator.

The diagram for rules `q == v_i : fwd(P_i)`: the root tests q; each distinct value v leads to
the leaf whose action set is the union of the P_i with v_i = v (leaves with one port set are
one state), every other value to the dead state; adjacent values with one successor share one
interval. States are numbered in the order the general sweep meets them (root, then in order
of value), because the default-entry choice breaks ties by state number.

Anything else (another operator, a second field, a prefix, a rule without ports, a static
pipeline, a field order given by hand) returns None: the general path compiles it.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable, Sequence

from compiler import estimate, lowering, tables
from compiler.ast import Atom, Rule
from compiler.diagram import Diagram, Split
from compiler.spec import QueryField, Spec
from pipeline import entries as entries_json
from pipeline.model import Stage


# Off only inside `general_only()`: what the tests and bench/hicn.py compare against.
_enabled = True


@contextlib.contextmanager
def general_only():
    """Compile through the general path inside this block."""
    global _enabled
    was, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = was


class ExactOnly:
    """An equality-only, one-field rule set ready to emit: field `q`, {value: union of ports}."""

    def __init__(self, q: QueryField, ports_of: dict[int, frozenset], stages: list[Stage],
                 predicted: estimate.Estimate | None):
        self.q, self.ports_of, self.stages, self.predicted = q, ports_of, stages, predicted
        self.with_state = False  # set by `prepare`

    def states(self) -> int:
        """The diagram's states, all reachable: the root, a leaf per port set, the dead state
        when some value is named by no rule; one leaf alone when the field folds away."""
        n, leaves = len(self.ports_of), len(set(self.ports_of.values()))
        if n > self.q.max_value and leaves == 1:
            return 1
        return 1 + leaves + (n <= self.q.max_value)

    def diagram(self) -> Diagram:
        """The decision diagram, built when first read."""
        return _OnDemand(lambda: _diagram(self.q, self.ports_of))

    def prepare(self, leaf_table: str, group: int, state_width: int,
                with_state: bool = False) -> bool:
        """Ready `document()` and `write()` to give the entries.json `tables.emit` makes from
        the diagram, when the dead state is the root's default (every wide field: it spans all
        the values no rule names); False otherwise (a field so narrow that a leaf spans more:
        the general emit, from the diagram). `with_state`: the application declares state (its
        rules use none, or they would not be here), so entries.json is version 3 with an empty
        `state_instances`."""
        self.with_state = with_state
        q, ports_of = self.q, self.ports_of
        gap = q.max_value + 1 - len(ports_of)  # values no rule names: the dead state's span
        if not gap:
            return False
        # The states as the diagram numbers them up to order (ids hash their meaning alone):
        # root 0, dead 1, then the leaves; their ids as tables.state_ids gives them.
        span = Counter(ports_of.values())
        sets = list(span)
        states = Diagram([q], [(frozenset(), frozenset())] * 2 + [(p, frozenset()) for p in sets])
        leaf_of = {p: 2 + i for i, p in enumerate(sets)}
        ids = tables.state_ids(states, list(range(len(states.contents))), bits=state_width)
        if any((span[p], -ids[leaf_of[p]]) > (gap, -ids[1]) for p in sets):
            return False
        # The dead default needs no entry: one exact entry per value, in value order, on the
        # root (id 0), deciding the value's leaf right there.
        leaves = {leaf_of[p]: p for p in sets}
        bitmaps: dict = {}
        self.actions = {p: tables.decision(leaf_of[p], ids, leaves, bitmaps) for p in sets}
        self.values = sorted(ports_of)
        used = sorted(frozenset().union(*sets))
        self.groups = [{"id": group, "replicas": [{"port": p, "rid": 0} for p in used]}]
        return True

    def per_table(self) -> dict[str, int]:
        return {self.stages[0].table: len(self.values)}

    def document(self) -> dict:
        """entries.json (after `prepare`). Entries share their state key and, per port set,
        their parameters."""
        stage, values = self.stages[0], self.values
        table, name, root = stage.table, stage.field.name, {"exact": 0}
        decided = map(self.actions.__getitem__, map(self.ports_of.__getitem__, values))
        entries = [{"table": table, "match": {"state": root, name: {"exact": v}},
                    "action": act, "params": params} for v, (act, params) in zip(values, decided)]
        doc = {"camus_entries": self._version(), "table_entries": entries,
               "multicast_groups": self.groups}
        if self.with_state:
            doc["state_instances"] = []
        return doc

    def _version(self) -> int:
        return entries_json.STATE_ENTRIES_VERSION if self.with_state else entries_json.ENTRIES_VERSION

    def write(self, fh) -> None:
        """`document()` as entries.write writes it, without building it: an entry's text
        (`json.dumps`) is the same around every value but for the action, so each line is
        put together from pieces rather than encoded."""
        stage = self.stages[0]
        head = '  {"table": %s, "match": {"state": {"exact": 0}, %s: {"exact": ' % (
            json.dumps(stage.table), json.dumps(stage.field.name))
        tails = {p: '}}, "action": %s, "params": %s}' % (json.dumps(a), json.dumps(params))
                 for p, (a, params) in self.actions.items()}
        ports_of, values = self.ports_of, self.values

        def text(start: int, stop: int) -> str:
            return ",\n".join([head + str(v) + tails[ports_of[v]] for v in values[start:stop]])

        entries_json.write_parts(self._version(), len(values), text, self.groups, fh,
                                 [] if self.with_state else None)


def diagram_for(spec: Spec, rules: Sequence[Rule], field_order: Sequence[str] | None,
                static: bool, max_entries: int | None = None,
                on_estimate: Callable[[estimate.Estimate], None] | None = None
                ) -> ExactOnly | None:
    """An ExactOnly for an equality-only, one-field rule set; None for any other, and for
    one over `max_entries` (the general path refuses it, saying why)."""
    ports_of = _ports_by_value(rules, static, field_order)
    if ports_of is None:
        return None
    q, ports_of = ports_of
    # An exact entry per value, the miss going to the dead state, which then spans the most;
    # on a field so narrow that the values cover half of it, maybe a default entry too.
    n_entries = len(ports_of) + (2 * len(ports_of) > q.max_value)
    if max_entries and n_entries > max_entries:
        return None
    # Every atom is a full-width equality, so every query field is an exact one.
    kinds = {f.qname: "exact" for f in spec.query_fields.values()}
    fast = ExactOnly(q, ports_of, lowering.stages_for(spec, [q], kinds), None)
    if max_entries or on_estimate:
        # The diagram is exact, so its size is known before any entry is built: it is the
        # estimate (the root, the leaves and the dead state are all reachable).
        fast.predicted = estimate.Estimate([q], entries=n_entries, states=fast.states(),
                                           splits=1)
        if on_estimate:
            on_estimate(fast.predicted)
    return fast


class _OnDemand(Diagram):
    """A Diagram that builds itself from `build()` the first time one of its fields is read
    (a million-value diagram costs seconds and hundreds of MB that a compile writing entries
    straight from the values never needs)."""

    def __init__(self, build: Callable[[], Diagram]):  # the fields come from build()
        self.__dict__["_build"] = build

    def __getattr__(self, name: str):
        if name.startswith("__") or "_build" not in self.__dict__:
            raise AttributeError(name)
        self.__dict__.update(vars(self.__dict__.pop("_build")()))
        return getattr(self, name)


def _ports_by_value(rules: Sequence[Rule], static: bool, field_order):
    """(the field, {value: union of ports}) when every rule is `q == v : fwd(...)` on one q."""
    if static or field_order or not rules or not _enabled:
        return None
    q = None
    ports_of: dict[int, frozenset] = {}
    get = ports_of.get
    for r in rules:
        a = r.filter
        if type(a) is not Atom or a.op != "==" or a.prefix_len is not None or not r.ports:
            return None
        if a.field is not q:
            if q is not None:
                return None
            q = a.field
        known = get(a.value)
        ports_of[a.value] = r.ports if known is None else known | r.ports
    return q, ports_of


def _diagram(q, ports_of: dict[int, frozenset]) -> Diagram:
    d = Diagram([q])
    values = sorted(ports_of)
    qname = q.qname
    d.residuals.extend([(qname, ((v, v),), 0) for v in values])  # ids 1.. in value order
    contents = d.contents
    contents.append((frozenset(), frozenset(zip(range(1, len(values) + 1),
                                                map(ports_of.__getitem__, values)))))
    leaf: dict[frozenset, int] = {}  # a port set -> its leaf state
    dead = -1
    out: list[tuple[int, int, int]] = []
    append = out.append
    nxt = 0  # the first value not yet covered
    for v in values:
        if v > nxt and dead < 0:  # the sweep meets the gap before the value after it
            dead = len(contents)
            contents.append((frozenset(), frozenset()))
        ports = ports_of[v]
        t = leaf.get(ports)
        if t is None:
            t = leaf[ports] = len(contents)
            contents.append((ports, frozenset()))
        if v > nxt:
            append((nxt, v - 1, dead))
            append((v, v, t))
        elif out and out[-1][2] == t:  # adjacent values, one successor: one interval
            out[-1] = (out[-1][0], v, t)
        else:
            append((v, v, t))
        nxt = v + 1
    if nxt <= q.max_value:
        if dead < 0:
            dead = len(contents)
            contents.append((frozenset(), frozenset()))
        append((nxt, q.max_value, dead))
    if len(out) == 1 and out[0][2] != dead:
        # One port set for every value: as in the general path's canonical form, the field
        # folds away and the start state is that leaf (no split, one leaf-table entry).
        d.contents[:] = [contents[out[0][2]]]
        return d
    d.splits[0] = Split(0, out)
    return d
