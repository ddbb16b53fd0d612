"""Filters as JSON, so a broker can hand its subscriptions to the fabric's controller.

A filter travels as nested lists: `["atom", FIELD, OP, VALUE, PREFIX_LEN]` (FIELD the query
field's qualified name, PREFIX_LEN null unless the atom is a prefix), `["and", [...]]`,
`["or", [...]]`, `["not", F]`, `["const", true|false]`. Both ends resolve field names against
the same spec (the Kafka spec), so a filter read back compares equal to the one written:
equal filters from two brokers are one filter on a port, and a removal finds its addition.
"""

from __future__ import annotations

from compiler.ast import OPS, And, Atom, Const, Filter, Not, Or
from compiler.spec import Spec


def to_json(f: Filter) -> list:
    if isinstance(f, Atom):
        return ["atom", f.field.qname, f.op, f.value, f.prefix_len]
    if isinstance(f, And):
        return ["and", [to_json(i) for i in f.items]]
    if isinstance(f, Or):
        return ["or", [to_json(i) for i in f.items]]
    if isinstance(f, Not):
        return ["not", to_json(f.item)]
    if isinstance(f, Const):
        return ["const", bool(f.value)]
    raise TypeError(f"not a filter: {f!r}")


def from_json(doc, spec: Spec) -> Filter:
    """The filter `to_json` wrote; ValueError naming what is wrong with a malformed one."""
    if not isinstance(doc, list) or not doc:
        raise ValueError(f"expected a filter list, got {doc!r}")
    kind = doc[0]
    if kind == "atom" and len(doc) == 5:
        _, name, op, value, prefix_len = doc
        field = spec.query_fields.get(name)
        if field is None:
            raise ValueError(f"unknown field {name!r} (spec {spec.name})")
        if op not in OPS or not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"bad atom {doc!r}")
        if not 0 <= value < (1 << field.width):
            raise ValueError(f"{name}: value {value} does not fit {field.width} bits")
        if prefix_len is not None and (not isinstance(prefix_len, int)
                                       or not 0 <= prefix_len <= field.width):
            raise ValueError(f"bad prefix length in {doc!r}")
        return Atom(field, op, value, prefix_len)
    if kind in ("and", "or") and len(doc) == 2 and isinstance(doc[1], list):
        return (And if kind == "and" else Or)(tuple(from_json(i, spec) for i in doc[1]))
    if kind == "not" and len(doc) == 2:
        return Not(from_json(doc[1], spec))
    if kind == "const" and len(doc) == 2 and isinstance(doc[1], bool):
        return Const(doc[1])
    raise ValueError(f"bad filter {doc!r}")
