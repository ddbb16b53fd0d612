"""The fast path for rule sets that test one field for equality only (the paper's hICN shape).

`content == ID : fwd(H)`, a million times over, is a dictionary: one exact entry per distinct
identifier, leading to the union of the ports of the rules that name it. The general path
gets there too, but through per-rule conjunctions, interned residuals and a sweep over two
million cut points (about 100 µs a rule). Here the decision diagram is written down directly,
in the form `diagram.build` gives it for such rules, and the rest of the compile (state ids,
entries, multicast group, pipeline: `compiler.compile`) is the general one. The entries are
the same by construction; tests/compiler/test_exact_only.py checks it against the general path
and the reference evaluator.

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
from collections.abc import Callable, Sequence

from compiler import estimate, lowering
from compiler.ast import Atom, Rule
from compiler.diagram import Diagram, Split
from compiler.spec import Spec


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


def diagram_for(spec: Spec, rules: Sequence[Rule], field_order: Sequence[str] | None,
                static: bool, max_entries: int | None = None,
                on_estimate: Callable[[estimate.Estimate], None] | None = None):
    """(diagram, stages, estimate or None) for an equality-only, one-field rule set; None for
    any other, and for one over `max_entries` (the general path refuses it, saying why)."""
    ports_of = _ports_by_value(rules, static, field_order)
    if ports_of is None:
        return None
    q, ports_of = ports_of
    # An exact entry per value, the miss going to the dead state, which then spans the most;
    # on a field so narrow that the values cover half of it, maybe a default entry too.
    n_entries = len(ports_of) + (2 * len(ports_of) > q.max_value)
    if max_entries and n_entries > max_entries:
        return None
    d = _diagram(q, ports_of)
    # The diagram is exact, so its size is known before any entry is built: it is the estimate
    # (the root, the leaves and the dead state are all reachable).
    predicted = estimate.Estimate([q], entries=n_entries, states=len(d.contents), splits=1) \
        if max_entries or on_estimate else None
    if on_estimate:
        on_estimate(predicted)
    # Every atom is a full-width equality, so every query field is an exact one.
    kinds = {f.qname: "exact" for f in spec.query_fields.values()}
    return d, lowering.stages_for(spec, [q], kinds), predicted


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
