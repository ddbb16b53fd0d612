"""The reference for views with state (docs/stateful.md, "Kafka views"): what a view selects
from one source partition's records, and the instances it then holds, by the reference
evaluator (`compiler.semantics.Evaluator`) over the filter as the topic's schema names it.

Independent of the broker's data path: no slots, lanes, fed packets or switch; only the
schema's reading of each record (`Schema.extract`) and the record's time as the Kafka header
carries it (milliseconds modulo 3,257 days)."""

from __future__ import annotations

from compiler.ast import Rule, rule_state
from compiler.rules import parse_filter
from compiler.semantics import Evaluator, Packet
from shim.schema import parse_schema
from shim.subscriptions import TopicSpec, kafka_spec

DAYS_3257 = 3257 * 86_400_000


def reference(filter_text: str, schema_text: str, records) -> tuple[list[int], dict]:
    """(offsets selected, {state as describe names it: (window tag, n, s)}) of a view over
    one partition's records [(offset, timestamp ms, key, value bytes, headers)] in offset
    order."""
    schema = parse_schema(schema_text)
    spec = TopicSpec(kafka_spec(), schema)
    rule = Rule(parse_filter(filter_text, spec), frozenset({1}))
    ev = Evaluator([rule])
    out = []
    for offset, ts, key, value, headers in records:
        slots = schema.extract(key, value, list(headers))
        values = {f.name: slots[f.slot] for f in schema.fields}
        values.update({f"schema.{f.name}": slots[f.slot] for f in schema.fields})
        values["kafka.timestamp"] = ts % DAYS_3257
        if ev.packet(Packet(0, values)):
            out.append(offset)
    shown = {"arrivals": "rate(arrivals)"}
    state = {shown.get(v.name, v.name): ev.instance(0, v) for v in rule_state(rule)}
    return out, state
