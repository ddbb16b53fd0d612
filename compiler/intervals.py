"""Interval sets over a field's domain [0, 2^w - 1].

An interval set is a tuple of inclusive `(lo, hi)` pairs, sorted, disjoint and never
adjacent (adjacent pairs are merged), so equal sets are equal tuples and hash alike: the
decision diagram relies on that for sharing states.
"""

from __future__ import annotations

from collections.abc import Iterable

from compiler.ast import Atom

IntervalSet = tuple[tuple[int, int], ...]


def normalize(pairs: Iterable[tuple[int, int]]) -> IntervalSet:
    out: list[list[int]] = []
    for lo, hi in sorted(p for p in pairs if p[0] <= p[1]):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def full(max_value: int) -> IntervalSet:
    return ((0, max_value),)


def of_atom(a: Atom) -> IntervalSet:
    top = a.field.max_value
    v = a.value
    if a.prefix_len is not None:
        span = (1 << (a.field.width - a.prefix_len)) - 1
        block = ((v, v | span),)
        return block if a.op == "==" else complement(block, top)
    if a.op == "==":
        return ((v, v),)
    if a.op == "!=":
        return normalize(((0, v - 1), (v + 1, top)))
    if a.op == "<":
        return ((0, v - 1),) if v > 0 else ()
    if a.op == "<=":
        return ((0, v),)
    if a.op == ">":
        return ((v + 1, top),) if v < top else ()
    if a.op == ">=":
        return ((v, top),)
    raise ValueError(a.op)


def complement(s: IntervalSet, top: int) -> IntervalSet:
    out, nxt = [], 0
    for lo, hi in s:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= top:
        out.append((nxt, top))
    return tuple(out)


def intersect(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def union(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    return normalize(a + b)


def contains(outer: IntervalSet, inner: IntervalSet) -> bool:
    return intersect(outer, inner) == inner

