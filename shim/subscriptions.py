"""From Kafka subscriptions to packet-subscription rules over the camus Kafka header.

A consumer's subscription (a plain topic, or a view with a filter, restricted to the
partitions its group assigned it) becomes one rule

    kafka.topic_id == T and kafka.partition in {...} and <view filter> : fwd(endpoint)

A view's filter is written with the topic's schema names (`price > 100 and side == "B"`);
it is parsed against the topic's schema, so errors point into the filter text, and then
rewritten onto the attribute slots of `p4/kafka/kafka.p4`, which is the one static pipeline
every topic shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compiler.ast import And, Atom, Const, Filter, Not, Or, Rule
from compiler.errors import RuleError, SpecError
from compiler import formula
from compiler.rules import deep_recursion, parse_filter
from compiler.spec import QueryField, Spec, load_spec
from shim.schema import Schema

KAFKA_SPEC = Path(__file__).resolve().parent.parent / "p4" / "kafka" / "kafka.p4"


def kafka_spec() -> Spec:
    return load_spec(KAFKA_SPEC)


class TopicSpec(Spec):
    """The Kafka spec seen through one topic's schema: schema names resolve to fields of
    the schema's width, named as the schema names them (so `price > 5000000000` on a u32 is
    an error that says 'price', not the slot), each standing for its slot (`slots`)."""

    def __init__(self, base: Spec, schema: Schema):
        super().__init__(base.name, base.headers, base.udp_port, base.framing,
                         base.packet_header, base.message_type_field, base.message_types,
                         dict(base.query_fields))
        self.base = base
        self.aliases: dict[str, QueryField] = {}
        self.slots: dict[QueryField, QueryField] = {}  # schema field -> its slot
        for f in schema.fields:
            slot = base.query_fields[f"kafka.slot{f.slot}"]
            alias = QueryField(f.name, f.width, slot.bit_offset, "range", f.is_string)
            self.aliases[f.name] = alias
            self.slots[alias] = slot

    def resolve(self, name, line=None, column=None, source=None) -> QueryField:
        if name in self.aliases:
            return self.aliases[name]
        known = ", ".join(self.aliases) or "none"
        raise SpecError(f"unknown field '{name}' (this topic's schema declares: {known})",
                        line, column, source)


def view_filter(base: Spec, schema: Schema | None, text: str) -> Filter:
    """A view's `camus.filter`, checked against the topic schema, over the Kafka spec's slots."""
    spec = TopicSpec(base, schema or Schema([]))
    # The rule language allows MAX_NESTING levels of parentheses; walking them takes the
    # same raised recursion limit the parser and the compiler use.
    with deep_recursion():
        return _onto(spec.slots, parse_filter(text, spec, source="camus.filter"))


def check_compilable(f: Filter) -> None:
    """RuleError if `f` is too large to compile as one subscription, by the rule the compiler
    applies to a rule file (`compiler.formula.check`): a filter whose normal form may pass
    the compiler's limit (an upper bound, computed without building it) compiles as a
    formula, unless its own decision diagram passes the formula limit. Checked where a view
    is created, so that a filter the data path could refuse is refused there
    (INVALID_CONFIG), not at every later produce."""
    with deep_recursion():
        formula.check(f, None, None, what="camus.filter")


def _onto(slots: dict[QueryField, QueryField], f: Filter) -> Filter:
    # Slot values are zero-extended, so an atom keeps its meaning on the 64-bit slot.
    if isinstance(f, Atom):
        return Atom(slots[f.field], f.op, f.value, f.prefix_len, f.line, f.column)
    if isinstance(f, (And, Or)):
        return type(f)(tuple(_onto(slots, i) for i in f.items))
    if isinstance(f, Not):
        return Not(_onto(slots, f.item))
    return f


@dataclass(frozen=True)
class Subscription:
    """One endpoint's wish: records of `topic_id` (in `partitions`, or all) that pass `filter`."""

    topic_id: int
    port: int
    partitions: frozenset[int] | None = None
    filter: Filter = Const(True)


def rules_for(base: Spec, subs: list[Subscription]) -> list[Rule]:
    topic = base.query_fields["kafka.topic_id"]
    partition = base.query_fields["kafka.partition"]
    rules = []
    for s in subs:
        parts: list[Filter] = [Atom(topic, "==", s.topic_id)]
        if s.partitions is not None:
            alts = tuple(Atom(partition, "==", p) for p in sorted(s.partitions))
            if not alts:
                parts.append(Const(False))
            else:
                parts.append(alts[0] if len(alts) == 1 else Or(alts))
        if s.filter != Const(True):
            parts.append(s.filter)
        rules.append(Rule(And(tuple(parts)), frozenset([s.port]), 0,
                          f"topic {s.topic_id} partitions {sorted(s.partitions or [])}"))
    return rules
