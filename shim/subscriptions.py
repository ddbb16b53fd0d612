"""From Kafka subscriptions to packet-subscription rules over the camus Kafka header.

A consumer's subscription (a plain topic, or a view with a filter, restricted to the
partitions its group assigned it) becomes one rule

    kafka.topic_id == T and kafka.partition in {...} and <view filter> : fwd(endpoint)

A view's filter is written with the topic's schema names (`price > 100 and side == "B"`);
it is parsed against the topic's schema, so errors point into the filter text, and then
rewritten onto the attribute slots of `p4/kafka/kafka.p4`, which is the one static pipeline
every topic shares.

A filter may read state (docs/stateful.md, "Kafka views"): the Kafka spec declares a
counter `records`, a packets meter `arrivals` and two averaged 32-bit lanes, every one with a
one-second window on the records' timestamps. A view's filter reads `avg(f)` for any numeric
schema field of at most 32 bits; the first two fields a filter averages (in the filter's
text order) are put on the lanes, and the packets fed to the view carry those fields'
values there (`View.lanes`). A view with state is its own packet stream on the switch: its
records are fed to it under the view's own topic number, one rule per source partition

    kafka.topic_id == V and kafka.partition == k and <view filter> : fwd(endpoint)

so that each partition's records, in offset order, are the only thing its instances see.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from compiler.ast import And, Atom, Const, Filter, Not, Or, Rule, StateAtom, state_atoms
from compiler.errors import RuleError, SpecError
from compiler import formula
from compiler.compile import compile_rules
from compiler.rules import deep_recursion, parse_filter
from compiler.spec import QueryField, Spec, StateVar, load_spec
from shim.schema import Schema

KAFKA_SPEC = Path(__file__).resolve().parent.parent / "p4" / "kafka" / "kafka.p4"


def kafka_spec() -> Spec:
    return load_spec(KAFKA_SPEC)


# The Kafka spec's averaged lanes, in lane order (kafka.avg0, kafka.avg1: `reframe.LANES`).
LANE_FIELDS = ("kafka.avg0", "kafka.avg1")
# What a topic's averaged schema field is called in `StateVar.field` (the rule language finds
# `avg(price)` by the part after the dot).
SCHEMA_HEADER = "schema"


class TopicSpec(Spec):
    """The Kafka spec seen through one topic's schema: schema names resolve to fields of
    the schema's width, named as the schema names them (so `price > 5000000000` on a u32 is
    an error that says 'price', not the slot), each standing for its slot (`slots`).

    State: the spec's counters and meters, unless a schema field has the same name (the
    field wins), and `avg(f)` for every numeric schema field of at most 32 bits, each a
    state of its own here (`averages`: schema field name -> its slot) that `parse_view` puts
    on one of the spec's average lanes."""

    def __init__(self, base: Spec, schema: Schema):
        super().__init__(base.name, base.headers)
        # Every attribute of the base spec (whatever the spec reader declares), then ours.
        self.__dict__.update({k: v for k, v in vars(base).items() if k != "base"})
        self.query_fields = dict(base.query_fields)
        self.base = base
        self.aliases: dict[str, QueryField] = {}
        self.slots: dict[QueryField, QueryField] = {}  # schema field -> its slot
        for f in schema.fields:
            slot = base.query_fields[f"kafka.slot{f.slot}"]
            alias = QueryField(f.name, f.width, slot.bit_offset, "range", f.is_string)
            self.aliases[f.name] = alias
            self.slots[alias] = slot
        names = {f.name for f in schema.fields}
        self.state_vars = {n: v for n, v in base.state_vars.items()
                           if v.kind != "average" and n not in names}
        self.lanes = [v for v in (base.state_vars.get(f"avg({f})") for f in LANE_FIELDS) if v]
        self.averages: dict[StateVar, int] = {}  # a schema field's average -> its slot
        if self.lanes:
            lane = self.lanes[0]
            for f in schema.fields:
                if f.is_string or f.width > 32:
                    continue
                var = dataclasses.replace(lane, name=f"avg({f.name})",
                                          field=f"{SCHEMA_HEADER}.{f.name}", field_width=f.width)
                self.state_vars[var.name] = var
                self.averages[var] = f.slot

    def resolve(self, name, line=None, column=None, source=None) -> QueryField:
        if name in self.aliases:
            return self.aliases[name]
        known = ", ".join(self.aliases) or "none"
        raise SpecError(f"unknown field '{name}' (this topic's schema declares: {known})",
                        line, column, source)


@dataclass(frozen=True)
class View:
    """A view's filter over the Kafka spec, and the slots its average lanes carry (in lane
    order; empty for a filter that averages nothing)."""

    filter: Filter
    lanes: tuple[int, ...] = ()

    @property
    def stateful(self) -> bool:
        return has_state(self.filter)


def has_state(f: Filter) -> bool:
    """Whether a filter reads state (a view whose records are fed to it on their own)."""
    return bool(state_atoms(f))


def parse_view(base: Spec, schema: Schema | None, text: str) -> View:
    """A view's `camus.filter`, checked against the topic schema, over the Kafka spec's slots
    and state (its averages put on the spec's lanes)."""
    spec = TopicSpec(base, schema or Schema([]))
    # The rule language allows MAX_NESTING levels of parentheses; walking them takes the
    # same raised recursion limit the parser and the compiler use.
    with deep_recursion():
        try:
            parsed = parse_filter(text, spec, source="camus.filter")
        except RuleError as exc:
            raise _averaging(exc, schema) from None
        averaged = sorted((a for a in state_atoms(parsed) if a.state in spec.averages),
                          key=lambda a: (a.line or 0, a.column or 0))
        lanes: dict[StateVar, StateVar] = {}
        for a in averaged:
            if a.state in lanes:
                continue
            if len(lanes) == len(spec.lanes):
                named = ", ".join([*(v.name for v in lanes), a.state.name])
                raise RuleError(f"a view averages at most {len(spec.lanes)} fields (this filter "
                                f"averages {named}): the Kafka spec has {len(spec.lanes)} "
                                f"average lanes", a.line, a.column, "camus.filter")
            lanes[a.state] = spec.lanes[len(lanes)]
        return View(_onto(spec.slots, parsed, lanes),
                    tuple(spec.averages[v] for v in lanes))


def _averaging(exc: RuleError, schema: Schema | None) -> RuleError:
    """The parser's error for `avg(f)` of a schema field that cannot be averaged, said in
    the schema's terms (the parser knows only the fields that can)."""
    m = re.match(r"unknown field '([^']*)' in avg", exc.message)
    field = next((f for f in (schema.fields if schema else []) if m and f.name == m[1]), None)
    if field is None:
        return exc
    return RuleError(f"avg({field.name}): {field.name} is {field.type}; only numeric schema "
                     f"fields of at most 32 bits (u8, u16, u32) can be averaged",
                     exc.line, exc.column, exc.source)


def view_filter(base: Spec, schema: Schema | None, text: str) -> Filter:
    """A view's `camus.filter`, checked against the topic schema, over the Kafka spec's slots."""
    return parse_view(base, schema, text).filter


def check_compilable(f: Filter, base: Spec | None = None) -> None:
    """RuleError if `f` is too large to compile as one subscription, by the rule the compiler
    applies to a rule file (`compiler.formula.check`): a filter whose normal form may pass
    the compiler's limit (an upper bound, computed without building it) compiles as a
    formula, unless its own decision diagram passes the formula limit. A filter with state
    is compiled alone on the Kafka spec `base` as well: what the compiler refuses of one
    stateful rule (more boundaries on a state than a bind entry holds, too many region
    combinations) it refuses whatever the other rules. Checked where a view is created, so
    that a filter the data path could refuse is refused there (INVALID_CONFIG), not at every
    later produce."""
    with deep_recursion():
        formula.check(f, None, None, what="camus.filter")
        if base is not None and has_state(f):
            try:
                compile_rules(base, [Rule(f, frozenset([1]), 1, "camus.filter")], static=True)
            except RuleError as exc:
                raise RuleError(exc.message, exc.line, exc.column, "camus.filter") from None


def _onto(slots: dict[QueryField, QueryField], f: Filter,
          lanes: dict[StateVar, StateVar] | None = None) -> Filter:
    # Slot values are zero-extended, so an atom keeps its meaning on the 64-bit slot; a lane
    # carries an averaged field's value (at most 32 bits) as it is.
    if isinstance(f, Atom):
        return Atom(slots[f.field], f.op, f.value, f.prefix_len, f.line, f.column)
    if isinstance(f, StateAtom):
        var = (lanes or {}).get(f.state, f.state)
        return StateAtom(var, f.op, f.value, f.line, f.column)
    if isinstance(f, (And, Or)):
        return type(f)(tuple(_onto(slots, i, lanes) for i in f.items))
    if isinstance(f, Not):
        return Not(_onto(slots, f.item, lanes))
    return f


@dataclass(frozen=True)
class Fed:
    """A view with state, fed its source's records under its own topic number: one rule per
    source partition (`partitions` of them), each with its own instances. `source_id` is
    the source topic's number (what the view selects from, for a network that routes
    records to this broker); `generation` tells apart the rules of successive subscriptions
    of one view (a rule's instances are known by its text: a re-subscribed view must get
    empty ones, not its old ones back)."""

    partitions: int
    source_id: int
    generation: int


@dataclass(frozen=True)
class Subscription:
    """One endpoint's wish: records of `topic_id` (in `partitions`, or all) that pass `filter`;
    with `fed`, a view with state whose records come under its own number (`topic_id`)."""

    topic_id: int
    port: int
    partitions: frozenset[int] | None = None
    filter: Filter = Const(True)
    fed: Fed | None = None


def rules_of(base: Spec, s: Subscription) -> tuple[Rule, ...]:
    """The rules that implement one subscription: one, or one per partition for a fed view."""
    topic = base.query_fields["kafka.topic_id"]
    partition = base.query_fields["kafka.partition"]
    if s.fed is not None:
        return tuple(
            Rule(And((Atom(topic, "==", s.topic_id), Atom(partition, "==", k), s.filter)),
                 frozenset([s.port]), 0,
                 f"view {s.topic_id} of topic {s.fed.source_id} partition {k} port {s.port} "
                 f"generation {s.fed.generation}")
            for k in range(s.fed.partitions))
    parts: list[Filter] = [Atom(topic, "==", s.topic_id)]
    if s.partitions is not None:
        alts = tuple(Atom(partition, "==", p) for p in sorted(s.partitions))
        if not alts:
            parts.append(Const(False))
        else:
            parts.append(alts[0] if len(alts) == 1 else Or(alts))
    if s.filter != Const(True):
        parts.append(s.filter)
    return (Rule(And(tuple(parts)), frozenset([s.port]), 0,
                 f"topic {s.topic_id} partitions {sorted(s.partitions or [])}"),)


def rules_for(base: Spec, subs: list[Subscription]) -> list[Rule]:
    return [r for s in subs for r in rules_of(base, s)]


def published_of(base: Spec, s: Subscription) -> tuple[Rule, ...]:
    """What the endpoint wants of the records that enter anywhere (a network that routes
    records to this broker publishes it): its rules, but for a fed view, its source's records
    that are in the scope of its filter (docs/stateful.md, "Scope"), since every one of those
    may update the view's state."""
    if s.fed is None:
        return rules_of(base, s)
    return rules_of(base, Subscription(s.fed.source_id, s.port, None, scope(s.filter)))


def scope(f: Filter, positive: bool = True) -> Filter:
    """The stateless filter true exactly for the packets in scope of `f`: each state
    predicate replaced by true under an even number of `not`s, false under an odd number."""
    if isinstance(f, StateAtom):
        return Const(positive)
    if isinstance(f, (And, Or)):
        return type(f)(tuple(scope(i, positive) for i in f.items))
    if isinstance(f, Not):
        return Not(scope(f.item, not positive))
    return f
