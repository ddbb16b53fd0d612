"""The rule AST: filters over query fields and state, and rules pairing a filter with ports
(and, for stateful rules, the state their actions update; docs/stateful.md; and, for rules
naming `drop` or an action their spec declares, that verdict; docs/actions.md).

Atoms compare by meaning only (field, operator, value); their source position rides along
for error messages and is ignored by equality and hashing. Nodes keep their fields in slots:
a million-rule set (hICN) holds two nodes per rule, 110 bytes less each than with a __dict__.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from compiler.actions import MAX_PORT, Verdict  # noqa: F401  (rules hold a Verdict)
from compiler.spec import QueryField, StateVar, dns_name_text

OPS = ("==", "!=", "<", "<=", ">", ">=")
NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


@dataclass(frozen=True, slots=True)
class Atom:
    """`field op value`; with `prefix_len`, `value` is a network prefix and op is == or !=."""

    field: QueryField
    op: str
    value: int
    prefix_len: int | None = None
    line: int | None = field(default=None, compare=False)
    column: int | None = field(default=None, compare=False)

    def __str__(self) -> str:
        value = str(self.value)
        if self.prefix_len is not None:
            value = f"{_dotted(self.value)}/{self.prefix_len}" if self.field.width == 32 \
                else f"{self.value}/{self.prefix_len}"
        elif self.field.dns_name:
            value = '"' + dns_name_text(self.value, self.field.width // 8) + '"'
        elif self.field.ascii:
            value = '"' + self.value.to_bytes(self.field.width // 8, "big").decode(
                "ascii", "replace").rstrip(" ") + '"'
        return f"{self.field.qname} {self.op} {value}"


@dataclass(frozen=True, slots=True)
class StateAtom:
    """`state op value`: a counter's count, an average or a meter's rate (per second)
    compared with an integer; what the value is, exactly, is docs/stateful.md's."""

    state: StateVar
    op: str
    value: int
    line: int | None = field(default=None, compare=False)
    column: int | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.state.read_as} {self.op} {self.value}"


@dataclass(frozen=True, slots=True)
class And:
    items: tuple["Filter", ...]


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple["Filter", ...]


@dataclass(frozen=True, slots=True)
class Not:
    item: "Filter"


@dataclass(frozen=True, slots=True)
class Const:
    value: bool


Filter = Union[Atom, StateAtom, And, Or, Not, Const]


@dataclass(frozen=True, slots=True)
class Rule:
    filter: Filter
    ports: frozenset[int]
    line: int = 0
    text: str = ""
    updates: frozenset[StateVar] = frozenset()  # the state its update actions name
    verdict: Verdict | None = None  # drop or a declared action (docs/actions.md)


def state_atoms(f: Filter) -> list[StateAtom]:
    """Every state predicate of `f`, wherever it sits."""
    return _leaves(f, StateAtom)


def rule_state(rule: Rule) -> list[StateVar]:
    """The state `rule` has instances of, each once: what its filter reads, then what only
    its update actions name."""
    seen = dict.fromkeys(a.state for a in state_atoms(rule.filter))
    seen.update(dict.fromkeys(sorted(rule.updates, key=lambda v: v.name)))
    return list(seen)


def atoms(f: Filter) -> list[Atom]:
    """Every atom of `f`, wherever it sits."""
    return _leaves(f, Atom)


def _leaves(f: Filter, kind: type) -> list:
    out, todo = [], [f]
    while todo:
        f = todo.pop()
        if isinstance(f, kind):
            out.append(f)
        elif isinstance(f, (And, Or)):
            todo.extend(f.items)
        elif isinstance(f, Not):
            todo.append(f.item)
    return out


def _dotted(v: int) -> str:
    return ".".join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0))
