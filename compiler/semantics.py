"""The reference evaluator: what a set of rules means, by direct evaluation.

This module is the definition of correct for every other piece of camus. For a message
(a mapping from `header.field` to its unsigned integer value), the port set is the union of
the ports of every rule whose filter is true; never first-match. A field the message does not
give takes its default (0, or spaces for ascii fields).

It deliberately shares no code with the compiler's normal forms or interval arithmetic:
it compares integers, nothing more, so that a bug there cannot hide here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from compiler.ast import And, Atom, Const, Filter, Not, Or, Rule


def evaluate(rules: Iterable[Rule], values: Mapping[str, int]) -> set[int]:
    ports: set[int] = set()
    for rule in rules:
        if not rule.ports <= ports and holds(rule.filter, values):
            ports |= rule.ports
    return ports


def holds(f: Filter, values: Mapping[str, int]) -> bool:
    if isinstance(f, Atom):
        return _atom(f, values.get(f.field.qname, f.field.default))
    if isinstance(f, And):
        return all(holds(i, values) for i in f.items)
    if isinstance(f, Or):
        return any(holds(i, values) for i in f.items)
    if isinstance(f, Not):
        return not holds(f.item, values)
    if isinstance(f, Const):
        return f.value
    raise TypeError(f"not a filter: {f!r}")


def _atom(a: Atom, v: int) -> bool:
    if a.prefix_len is not None:
        shift = a.field.width - a.prefix_len
        same = (v >> shift) == (a.value >> shift)
        return same if a.op == "==" else not same
    if a.op == "==":
        return v == a.value
    if a.op == "!=":
        return v != a.value
    if a.op == "<":
        return v < a.value
    if a.op == "<=":
        return v <= a.value
    if a.op == ">":
        return v > a.value
    if a.op == ">=":
        return v >= a.value
    raise ValueError(f"unknown operator {a.op!r}")
