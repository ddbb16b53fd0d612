"""Names <-> ids of one P4Info: what the controller and the switch's P4Runtime server resolve by.

`P4InfoIndex` is built from the P4Info a target reports (the software switch's from
`p4rt.p4info`, or p4c's for bmv2). Names in entries.json are the IR's (`itch_stock`,
`set_state`, `itch_order.stock`); the index also finds them under their P4 names
(`CamusIngress.itch_stock`) and p4c's aliases, by the contract of docs/pipeline-ir.md, so
one controller drives both targets.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4rt.match_kinds import BY_MATCH_TYPE
from p4rt.names import EGRESS, INGRESS
from p4rt.protos import p4info_pb2

_CONTROLS = (f"{INGRESS}.", f"{EGRESS}.")


class UnknownName(LookupError):
    """A name or id (table, key, action, parameter) the P4Info does not have."""


def ir_name(name: str) -> str:
    """The IR's name of a P4 name: without the control."""
    for prefix in _CONTROLS:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


@dataclass(frozen=True)
class Table:
    id: int
    name: str  # P4 name
    ir_name: str
    fields: dict[str, p4info_pb2.MatchField]  # by P4Info match field name
    fields_by_id: dict[int, p4info_pb2.MatchField]
    action_ids: frozenset[int]

    @property
    def prioritised(self) -> bool:
        """Whether its entries carry a priority (a range or ternary key, `p4rt.match_kinds`)."""
        return any(BY_MATCH_TYPE[f.match_type].prioritised for f in self.fields.values() if f.match_type in BY_MATCH_TYPE)

    def field(self, name: str) -> p4info_pb2.MatchField:
        """A match field by its P4Info name or, as entries.json may spell keys
        (`hdr.ipv4.dst_addr`, `standard_metadata.egress_port`), a name it is the suffix of."""
        if name in self.fields:
            return self.fields[name]
        for fname, f in self.fields.items():
            if name.endswith("." + fname) or fname.endswith("." + name):
                return f
        raise UnknownName(f"table {self.name!r} has no match field {name!r}")


@dataclass(frozen=True)
class Register:
    """A register array (IR 4: one bank of a state): its cells' width and how many."""

    id: int
    name: str  # P4 name
    ir_name: str
    bitwidth: int
    size: int


@dataclass(frozen=True)
class Action:
    id: int
    name: str
    ir_name: str
    params: dict[str, p4info_pb2.Action.Param]
    params_by_id: dict[int, p4info_pb2.Action.Param]


class P4InfoIndex:
    """Tables, actions, registers and counters of a P4Info, addressable by IR name, P4 name
    or id."""

    def __init__(self, p4info: p4info_pb2.P4Info):
        self.p4info = p4info
        self.tables: dict[int, Table] = {}
        self.actions: dict[int, Action] = {}
        self.counters: dict[str, p4info_pb2.Counter] = {}
        self.registers: dict[int, Register] = {}
        self._names: dict[tuple[str, str], int] = {}
        for t in p4info.tables:
            self.tables[t.preamble.id] = Table(t.preamble.id, t.preamble.name, ir_name(t.preamble.name),
                                               {f.name: f for f in t.match_fields},
                                               {f.id: f for f in t.match_fields},
                                               frozenset(r.id for r in t.action_refs))
            self._register("table", t.preamble)
        for a in p4info.actions:
            self.actions[a.preamble.id] = Action(a.preamble.id, a.preamble.name, ir_name(a.preamble.name),
                                                 {p.name: p for p in a.params}, {p.id: p for p in a.params})
            self._register("action", a.preamble)
        for c in p4info.counters:
            self.counters[c.preamble.name] = c
        for r in p4info.registers:
            self.registers[r.preamble.id] = Register(r.preamble.id, r.preamble.name, ir_name(r.preamble.name),
                                                     r.type_spec.bitstring.bit.bitwidth, r.size)
            self._register("register", r.preamble)

    def _register(self, kind: str, preamble: p4info_pb2.Preamble) -> None:
        # Full names win over aliases and IR names when two entities could share one.
        for name in (ir_name(preamble.name), preamble.alias, preamble.name):
            if name:
                self._names[(kind, name)] = preamble.id

    def table(self, name: str) -> Table:
        tid = self._names.get(("table", name))
        if tid is None:
            raise UnknownName(f"the P4Info has no table {name!r}")
        return self.tables[tid]

    def action(self, name: str) -> Action:
        aid = self._names.get(("action", name))
        if aid is None:
            raise UnknownName(f"the P4Info has no action {name!r}")
        return self.actions[aid]

    def register(self, name: str) -> Register:
        rid = self._names.get(("register", name))
        if rid is None:
            raise UnknownName(f"the P4Info has no register {name!r}")
        return self.registers[rid]
