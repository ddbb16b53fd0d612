"""The reference evaluator: what a set of rules means, by direct evaluation.

This module is the definition of correct for every other piece of camus. For a message
(a mapping from `header.field` to its unsigned integer value), the port set is the union of
the ports of every rule whose filter is true; never first-match. A field the message does not
give takes its default (0, or spaces for ascii fields).

It deliberately shares no code with the compiler's normal forms or interval arithmetic:
it compares integers, nothing more, so that a bug there cannot hide here.

Rules with state (counters, averages, meters; docs/stateful.md, which this follows step by
step) have no meaning on one message alone: `Evaluator` takes a timed sequence of packets,
keeps each rule's instances, and gives each packet's port set; rules may be added and
removed between packets. `evaluate` refuses a stateful rule.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from compiler.ast import And, Atom, Const, Filter, Not, Or, Rule, StateAtom, rule_state
from compiler.spec import COUNT_BITS, SUM_BITS, TIMESTAMP_BITS, StateVar
from compiler.state import check_slots

MAX_LENGTH = 0xFFFF  # a packet's length in bytes, what a `bytes` meter adds


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
    if isinstance(f, StateAtom):
        raise TypeError(f"'{f}' reads state, which needs the packets' times: evaluate stateful "
                        f"rules with compiler.semantics.Evaluator")
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


# ---- rules with state (docs/stateful.md) ----

_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}
_N_MAX = (1 << COUNT_BITS) - 1
_S_MAX = (1 << SUM_BITS) - 1


@dataclass(frozen=True)
class Packet:
    """A subscription message at time `ts_us` (microseconds, 48 bits), its field values
    (`header.field` -> integer, missing fields take their defaults) and its length in bytes
    (None: the spec's message size), which only `bytes` meters read. When the spec declares
    a time field (`query_timestamp`), the message's time is that field's value and `ts_us`
    is not read."""

    ts_us: int
    values: Mapping[str, int]
    length: int | None = None


class _Rule:
    """A rule in the evaluator: the rule, its instances, and which of its state is scoped
    (updated by the packets in scope, before the test) and which is updated by its actions
    (after a true test)."""

    __slots__ = ("rule", "scoped", "instances", "clock")

    def __init__(self, rule: Rule):
        self.rule = rule
        self.scoped = [v for v in rule_state(rule) if v not in rule.updates]
        # a state of a spec with a time field (query_timestamp): where the time comes from
        self.clock = next((v for v in rule_state(rule) if v.time_field), None)
        # (state, bucket) -> [window tag, n, s]; tag None until a packet touches it
        self.instances: dict[tuple[StateVar, int], list] = {}


class Evaluator:
    """Stateful rules over a timed sequence of packets: `packet(p)` is p's port set.

    Each rule added gets its own, empty instances; `remove(handle)` discards them and
    touches nothing else (docs/stateful.md, "Rule changes")."""

    def __init__(self, rules: Iterable[Rule] = ()):
        self._rules: dict[int, _Rule] = {}
        self._next = 0
        rules = list(rules)
        check_slots(rules)
        for rule in rules:
            self._insert(rule)

    @property
    def rules(self) -> dict[int, Rule]:
        """The rules in force, by handle."""
        return {h: r.rule for h, r in self._rules.items()}

    def add(self, rule: Rule) -> int:
        """Add `rule` with empty state; its handle. Refused (StateError) over a state's slots."""
        check_slots([*(r.rule for r in self._rules.values()), rule])
        return self._insert(rule)

    def remove(self, handle: int) -> Rule:
        """Remove the rule `add` (or the constructor, in order from 0) gave `handle`."""
        return self._rules.pop(handle).rule

    def instance(self, handle: int, state: StateVar, bucket: int = 0
                 ) -> tuple[int | None, int, int]:
        """Rule `handle`'s instance of `state` (bucket `bucket`): (window tag, n, s); an
        untouched one is (None, 0, 0). What the control plane will read."""
        cell = self._rules[handle].instances.get((state, bucket))
        return tuple(cell) if cell else (None, 0, 0)

    def _insert(self, rule: Rule) -> int:
        handle = self._next
        self._next += 1
        self._rules[handle] = _Rule(rule)
        return handle

    def packet(self, packet: Packet) -> set[int]:
        ts, values, length = packet.ts_us, packet.values, packet.length
        if not isinstance(ts, int) or not 0 <= ts < 1 << TIMESTAMP_BITS:
            raise ValueError(f"timestamp {ts!r} is not a {TIMESTAMP_BITS}-bit number of µs")
        if length is not None and (not isinstance(length, int) or not 0 <= length <= MAX_LENGTH):
            raise ValueError(f"length {length!r} is not 0..{MAX_LENGTH} bytes")
        ports: set[int] = set()
        for r in self._rules.values():
            rule = r.rule
            if r.clock is not None:  # the spec's query_timestamp: the message's own time
                ts = r.clock.ts_us(values, packet.ts_us)
            if not r.scoped and not rule.updates:
                if not rule.ports <= ports and holds(rule.filter, values):
                    ports |= rule.ports
                continue
            # 1-2: scoped instances take the packet first when it is in scope.
            if r.scoped and _maybe(rule.filter, values) is not False:
                for var in r.scoped:
                    _add(var, _instance(r, var, values), ts, values, length)
            # 3: the test reads every instance as it now stands (reading changes nothing).
            if _holds(rule.filter, values,
                      lambda a: _compare(a, _instance(r, a.state, values), ts)):
                ports |= rule.ports
                # 4: then the update actions.
                for var in sorted(rule.updates, key=lambda v: v.name):
                    _add(var, _instance(r, var, values), ts, values, length)
        return ports


def run(rules: Iterable[Rule], packets: Iterable[Packet]) -> Iterator[set[int]]:
    """Each packet's port set, in order, for a fixed rule set starting with empty state."""
    ev = Evaluator(rules)
    for p in packets:
        yield ev.packet(p)


def _instance(r: _Rule, var: StateVar, values: Mapping[str, int]) -> list:
    """The instance of `var` the packet touches (its key's bucket): [window tag, n, s]."""
    bucket = values.get(var.key, 0) % var.buckets if var.key else 0
    cell = r.instances.get((var, bucket))
    if cell is None:
        cell = r.instances[var, bucket] = [None, 0, 0]
    return cell


def _add(var: StateVar, cell: list, ts: int, values: Mapping[str, int], length: int | None
         ) -> None:
    """One packet into an instance: one of another window (or untouched) first starts the
    packet's window with zeros; an addition past a maximum is not made at all."""
    window = ts // var.window_us
    if cell[0] != window:
        cell[:] = [window, 0, 0]
    if var.kind == "meter" and var.unit == "bytes":
        dn = var.message_bytes if length is None else length
    else:
        dn = 1
    ds = values.get(var.field, 0) if var.kind == "average" else 0
    if cell[1] + dn > _N_MAX or cell[2] + ds > _S_MAX:
        return
    cell[1] += dn
    cell[2] += ds


def _compare(a: StateAtom, cell: list, ts: int) -> bool:
    """`a` on the instance's value in the packet's window (zeros if it holds another)."""
    var, op, x = a.state, _COMPARE[a.op], a.value
    n, s = (cell[1], cell[2]) if cell[0] == ts // var.window_us else (0, 0)
    if var.kind == "counter":
        return op(n, x)
    if var.kind == "average":
        return op(s, x * n) if n else op(0, x)  # s / n OP x, exactly; empty: 0
    return op(n * 1_000_000, x * var.window_us)  # n per W µs OP x per second, exactly


def _holds(f: Filter, values: Mapping[str, int], state) -> bool:
    """`holds` with state predicates answered by `state(atom)`."""
    if isinstance(f, StateAtom):
        return state(f)
    if isinstance(f, Atom):
        return _atom(f, values.get(f.field.qname, f.field.default))
    if isinstance(f, And):
        return all(_holds(i, values, state) for i in f.items)
    if isinstance(f, Or):
        return any(_holds(i, values, state) for i in f.items)
    if isinstance(f, Not):
        return not _holds(f.item, values, state)
    if isinstance(f, Const):
        return f.value
    raise TypeError(f"not a filter: {f!r}")


def _maybe(f: Filter, values: Mapping[str, int]) -> bool | None:
    """`f` in three-valued logic with every state predicate unknown (None): the packet is in
    the rule's scope unless this is False."""
    if isinstance(f, StateAtom):
        return None
    if isinstance(f, Atom):
        return _atom(f, values.get(f.field.qname, f.field.default))
    if isinstance(f, (And, Or)):
        absorbing = isinstance(f, Or)  # True absorbs an `or`, False an `and`
        result: bool | None = not absorbing
        for item in f.items:
            v = _maybe(item, values)
            if v is absorbing:
                return absorbing
            if v is None:
                result = None
        return result
    if isinstance(f, Not):
        v = _maybe(f.item, values)
        return None if v is None else not v
    if isinstance(f, Const):
        return f.value
    raise TypeError(f"not a filter: {f!r}")
