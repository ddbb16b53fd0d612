"""JSON messages as field values: what `camus eval` reads, checked against an application.

A message is a JSON object whose keys are `header.field` or a bare unique field name and
whose values are integers or strings (space-padded ASCII). `message_values` turns one into
the query fields' values, which `pipeline.interpreter.Tables.ports` evaluates.
"""

from __future__ import annotations

from compiler.spec import QueryField
from pipeline.model import Application


def query_fields(app: Application) -> dict[str, QueryField]:
    # framing dns: the question's name field takes a DNS name ("h105"), as rules write it
    name = None
    if app.framing == "dns":
        question = app.message.headers[1]
        name = f"{question.name}.{question.fields[0].name}"
    return {q: QueryField(q, f.width, f.bit_offset, f.declared, f.ascii, q == name)
            for q, f in app.fields.items()}


def message_values(app: Application, message: dict) -> dict[str, int] | None:
    """Field values from a JSON message (`camus eval`'s input), or None if the message's
    type is not a subscription message type.

    A field the message does not give takes its default. The message type field is checked
    only when the message gives it. Declared fields that are not query fields (a whole
    message's other fields) are checked to fit their width and ignored.
    """
    fields = query_fields(app)
    by_name: dict[str, list[str]] = {}
    for q in fields:
        by_name.setdefault(q.split(".", 1)[1], []).append(q)
    values = {q: f.default for q, f in fields.items()}
    others = _other_fields(app, fields)  # given by whole messages: accepted, ignored
    type_field = app.type_field
    for key, raw in message.items():
        if type_field is not None and (key == type_field.name or type_field.name.endswith("." + key)):
            v = raw.encode("ascii") if isinstance(raw, str) else raw
            if isinstance(v, bytes):
                v = int.from_bytes(v, "big") if len(v) * 8 == type_field.width else -1
            if v not in app.types:
                return None
            if type_field.name not in fields:
                continue
            key = type_field.name  # rules test it too: its value counts like any field's
        q = key if key in fields else None
        if q is None:
            names = by_name.get(key, [])
            if not names and key in others:
                others[key].encode(raw)  # a declared field no rule can test: checked, unused
                continue
            if len(names) != 1:
                raise ValueError(f"unknown field {key!r}" if not names
                                 else f"ambiguous field {key!r}: {', '.join(names)}")
            q = names[0]
        values[q] = fields[q].encode(raw)
    return values


def _other_fields(app: Application, fields: dict[str, QueryField]) -> dict[str, QueryField]:
    """The declared message and packet-header fields that are not query fields, by
    `header.field` and by bare name when that is unique among them."""
    declared = [(h.name, f) for h in app.message.headers for f in h.fields]
    if app.packet_header:
        declared += [(app.packet_header.name, f) for f in app.packet_header.fields]
    out: dict[str, QueryField] = {}
    bare: dict[str, list[QueryField]] = {}
    for header, f in declared:
        qname = f"{header}.{f.name}"
        if qname in fields:
            continue
        out[qname] = QueryField(qname, f.width, f.bit_offset, "range")
        bare.setdefault(f.name, []).append(out[qname])
    out.update((name, qs[0]) for name, qs in bare.items() if len(qs) == 1 and name not in out)
    return out
