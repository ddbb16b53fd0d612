"""Filters to disjunctive normal form over per-field interval sets.

A conjunction is a dict `{QueryField: IntervalSet}`; a field it does not mention is
unconstrained. Negation is pushed onto atoms as interval complement, so `not` never
survives. Disjuncts that constrain one and the same single field are merged into one
interval set (so `stock in {A, B, C}` stays one conjunction), duplicates are removed, and a
rule whose DNF is still absurdly large is rejected rather than compiled for minutes.
"""

from __future__ import annotations

import functools

from compiler import intervals as iv
from compiler.ast import And, Atom, Const, Filter, Not, Or
from compiler.errors import RuleError
from compiler.spec import QueryField

Conjunction = dict[QueryField, iv.IntervalSet]
MAX_DISJUNCTS = 100_000


def dnf(f: Filter, line: int | None = None) -> list[Conjunction]:
    conj = plain_conjunction(f)
    if conj is not None:
        return conj
    return _dnf(f, False, line)


def plain_conjunction(f: Filter) -> list[Conjunction] | None:
    """dnf(f) for the most common filter, an `and` of atoms, straight; None for any other."""
    if type(f) is And:
        return _atoms_conjunction(f.items)
    return None


def _dnf(f: Filter, negated: bool, line: int | None) -> list[Conjunction]:
    if isinstance(f, Atom):
        s = _literal(f, negated)
        if s is None:
            return []
        return [{f.field: s}] if s else [{}]
    if isinstance(f, And) and not negated:
        conj = _atoms_conjunction(f.items)
        if conj is not None:
            return conj
    if isinstance(f, Const):
        return [{}] if f.value != negated else []
    if isinstance(f, Not):
        return _dnf(f.item, not negated, line)
    if isinstance(f, (And, Or)):
        conjunctive = isinstance(f, And) != negated  # De Morgan
        parts = [_dnf(i, negated, line) for i in f.items]
        if not conjunctive:
            return _simplify([c for p in parts for c in p])
        if all(len(p) == 1 for p in parts):  # the common case: a conjunction of atoms
            acc: Conjunction | None = {}
            for (c,) in parts:
                acc = _meet(acc, c)
                if acc is None:
                    return []
            return [acc]
        return _product(parts, line)
    raise TypeError(f"not a filter: {f!r}")


def size_bound(f: Filter, negated: bool = False) -> int:
    """An upper bound on len(dnf(f)), computed without building it (capped just past
    MAX_DISJUNCTS): what a filter may cost, for refusing one before anything compiles it."""
    if isinstance(f, Not):
        return size_bound(f.item, not negated)
    if not isinstance(f, (And, Or)):
        return 1
    if isinstance(f, And) != negated:  # a conjunction (De Morgan): the product of its parts
        total = 1
        for item in f.items:
            total = min(total * size_bound(item, negated), MAX_DISJUNCTS + 1)
        return total
    # A disjunction: atoms on one field merge into one interval set (see `_simplify`).
    fields = {i.field for i in f.items if isinstance(i, Atom)}
    rest = sum(size_bound(i, negated) for i in f.items if not isinstance(i, Atom))
    return min(len(fields) + rest, MAX_DISJUNCTS + 1)


@functools.lru_cache(maxsize=1 << 16)
def _literal(a: Atom, negated: bool) -> iv.IntervalSet | None:
    """The atom's interval set; None if it is unsatisfiable, () if it always holds."""
    s = iv.of_atom(a)
    if negated:
        s = iv.complement(s, a.field.max_value)
    if not s:
        return None
    if s == iv.full(a.field.max_value):
        return ()
    return s


# _literal(a, False) by the atom's meaning as a plain tuple: hashing and comparing Atoms
# themselves runs dataclass-generated Python code, twice per atom of every rule.
_POSITIVE: dict[tuple, iv.IntervalSet | None] = {}


def _atoms_conjunction(atoms) -> list[Conjunction] | None:
    """The most common filter shape by far (`a == 1 and b > 2`), without list products;
    None if not every item is an atom."""
    out: Conjunction = {}
    false = False
    for a in atoms:
        if type(a) is not Atom and not isinstance(a, Atom):
            return None
        if false:
            continue
        key = (a.field, a.op, a.value, a.prefix_len)
        try:
            s = _POSITIVE[key]
        except KeyError:
            if len(_POSITIVE) >= 1 << 16:
                _POSITIVE.clear()
            s = _POSITIVE[key] = _literal(a, False)
        if s is None:
            false = True
            continue
        if not s:
            continue
        prev = out.get(a.field)
        if prev is not None:
            s = iv.intersect(prev, s)
            if not s:
                false = True
                continue
        out[a.field] = s
    return [] if false else [out]


def _product(parts: list[list[Conjunction]], line: int | None) -> list[Conjunction]:
    acc: list[Conjunction] = [{}]
    for part in sorted(parts, key=len):
        nxt = []
        for a in acc:
            for b in part:
                c = _meet(a, b)
                if c is not None:
                    nxt.append(c)
        if len(nxt) > MAX_DISJUNCTS:
            raise RuleError(f"this filter expands to more than {MAX_DISJUNCTS} alternatives in "
                            f"disjunctive normal form; split it into several rules", line, 1)
        acc = _simplify(nxt)
        if not acc:
            return []
    return acc


def _meet(a: Conjunction, b: Conjunction) -> Conjunction | None:
    if len(a) < len(b):
        a, b = b, a
    out = dict(a)
    for q, s in b.items():
        if q in out:
            s = iv.intersect(out[q], s)
            if not s:
                return None
        out[q] = s
    return out


def _simplify(conjs: list[Conjunction]) -> list[Conjunction]:
    if any(not c for c in conjs):
        return [{}]
    single: dict[QueryField, iv.IntervalSet] = {}
    rest: dict[tuple, Conjunction] = {}
    for c in conjs:
        if len(c) == 1:
            (q, s), = c.items()
            single[q] = iv.union(single[q], s) if q in single else s
            if single[q] == iv.full(q.max_value):
                return [{}]
        else:
            rest.setdefault(tuple(sorted(c.items(), key=lambda kv: kv[0].qname)), c)
    out = [{q: s} for q, s in single.items()]
    # A multi-field conjunction implied by a single-field one adds nothing.
    for c in rest.values():
        if not any(q in c and iv.contains(s, c[q]) for q, s in single.items()):
            out.append(c)
    return out
