"""The P4Info of a camus program, numbered as p4c numbers it, for every target that runs it.

A pipeline IR (pipeline.json) becomes one P4 program (compiler/p4) whose control-plane names
follow docs/pipeline-ir.md, "P4 names" (`p4rt.names`): the tables `CamusIngress.<T>` (and
`CamusEgress.egress_udp_rewrite`) with the contract's match fields, the actions
`CamusIngress.set_state/fwd/mcast/drop` and `CamusEgress.set_udp_port`, and `NoAction` as
every table's default-only action; a pipeline with state (IR 4) adds its bind and decide
tables, the actions `CamusIngress.stateful/bind/decide` and one register
`CamusIngress.<R>` per bank of each state (`bit<cell_width>` cells, `slots` of them), which
a controller writes through P4Runtime `RegisterEntry`s when a rule takes over cells. Two
P4Infos describe that program:

* `program_p4info(pipeline)`: what p4c writes for the emitted program (ids, aliases,
  annotations and order as p4c's), written as p4info.txtpb beside program.p4;
* `build_p4info(pipeline, counters=...)`: the software switch's: the same tables and
  actions, and it may add its own counters.

Both number every table, action and register over the program's name set (`p4rt.ids`, p4c's
algorithm), so an entity has one id on the software switch and on bmv2
(tests/p4/test_p4info_agree.py); controllers resolve every id by name anyway.

`counters=True` adds the software switch's own counters (not part of the P4 program; see
switch/p4runtime_server.py): `camus.port_rx` and `camus.port_tx` (packets, indexed by port),
`camus.drops` (indexed by drop reason, in `DROP_REASONS` order) and, per table `T`,
`camus.table.T` (index 0 hits, index 1 misses).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from p4rt.ids import p4c_id_map, shortest_unique_suffixes
from p4rt.match_kinds import KINDS
from p4rt.names import EGRESS, FABRIC_TABLES, INGRESS, TABLE_SIZE, p4_table_name
from p4rt.protos import p4info_pb2
from pipeline.model import PORT_WIDTH, Pipeline

COUNTER_PORTS = 1 << PORT_WIDTH
DROP_REASONS = ("malformed", "truncated", "oversized", "no_route")
PREFIX = p4info_pb2.P4Ids
# The program's actions in the order p4c's P4Info lists them: NoAction, then each control's
# actions as compiler/p4/controls.py declares them (tests/p4/test_p4c_ids.py checks this).
ACTION_ORDER = ("NoAction", f"{INGRESS}.drop", f"{INGRESS}.set_state", f"{INGRESS}.fwd", f"{INGRESS}.mcast",
                *(f"{INGRESS}.{action}" for action in ("stateful", "bind", "decide")),  # IR 4: state
                *(f"{INGRESS}.{action}" for _, _, action, _ in FABRIC_TABLES), f"{EGRESS}.set_udp_port")


@dataclass(frozen=True)
class _Table:
    name: str  # P4 name
    ir_name: str  # the IR's name
    keys: tuple[tuple[str, int, str], ...]  # (match field name, bitwidth, match kind)
    actions: tuple[str, ...]  # P4 names of its actions, besides the default-only NoAction


@dataclass(frozen=True)
class _Register:
    name: str  # P4 name
    ir_name: str
    bitwidth: int  # of a cell
    size: int  # cells


@dataclass(frozen=True)
class _Program:
    tables: list[_Table]
    actions: dict[str, list[tuple[str, int]]]  # P4 name -> [(param, bitwidth)]
    table_ids: dict[str, int]  # P4 name -> id, for every table
    action_ids: dict[str, int]  # and every action
    registers: list[_Register]  # IR 4: each state's banks, in declaration order
    register_ids: dict[str, int]


def _ir_tables(pipeline: Pipeline) -> list[_Table]:
    egress = pipeline.egress_table
    in_egress = set(pipeline.tables[egress].actions)  # the egress table's actions are CamusEgress's
    return [_Table(p4_table_name(t.name, egress), t.name, tuple((k.name, k.width, k.match_kind) for k in t.keys),
                   tuple(_p4_action(a, in_egress) for a in t.actions))
            for t in pipeline.tables.values()]


def _p4_action(ir_action: str, in_egress: set[str]) -> str:
    return f"{EGRESS if ir_action in in_egress else INGRESS}.{ir_action}"


def _fabric_tables() -> list[_Table]:
    return [_Table(f"{INGRESS}.{name}", name, tuple((n, width, kind) for _, kind, n, width in keys),
                   (f"{INGRESS}.{action}",))
            for name, keys, action, _ in FABRIC_TABLES]


def _program(pipeline: Pipeline, fabric: bool = False) -> _Program:
    tables = _ir_tables(pipeline)
    in_egress = set(pipeline.tables[pipeline.egress_table].actions)
    actions = {_p4_action(a.name, in_egress): [(p.name, p.width) for p in a.params]
               for a in pipeline.actions.values()}
    if fabric:  # declared after the IR's ingress tables, before the egress control
        at = next(i for i, t in enumerate(tables) if t.name.startswith(f"{EGRESS}."))
        tables[at:at] = _fabric_tables()
        actions.update({f"{INGRESS}.{action}": list(params) for _, _, action, params in FABRIC_TABLES})
    # p4c leaves an action no table lists out of its P4Info (and warns that it is unused):
    # set_state, in a pipeline without stages (every rule true or false: the leaf decides).
    used = {a for t in tables for a in t.actions}
    actions = {name: params for name, params in actions.items() if name in used}
    actions["NoAction"] = []
    registers = _registers(pipeline)
    taken: set[int] = set()
    return _Program(tables, actions, p4c_id_map(PREFIX.TABLE, [t.name for t in tables], taken),
                    p4c_id_map(PREFIX.ACTION, list(actions), taken), registers,
                    p4c_id_map(PREFIX.REGISTER, [r.name for r in registers], taken))


def _registers(pipeline: Pipeline) -> list[_Register]:
    """Every register of every state (docs/pipeline-ir.md, "State"), in the order the
    program declares them: applications, their states, and banks in IR order."""
    return [_Register(f"{INGRESS}.{r}", r, var.cell_width, var.slots)
            for app in pipeline.applications if app.state
            for var in app.state.vars for r in var.registers]


def _add_register(info: p4info_pb2.P4Info, r: _Register, program: _Program, alias: str) -> None:
    out = info.registers.add()
    out.preamble.id, out.preamble.name, out.preamble.alias = program.register_ids[r.name], r.name, alias
    out.type_spec.bitstring.bit.bitwidth = r.bitwidth
    out.size = r.size


def _add_table(info: p4info_pb2.P4Info, t: _Table, program: _Program, alias: str, default_only: list[str]) -> None:
    out = info.tables.add()
    out.preamble.id, out.preamble.name, out.preamble.alias = program.table_ids[t.name], t.name, alias
    for i, (name, width, kind) in enumerate(t.keys, start=1):
        out.match_fields.add(id=i, name=name, bitwidth=width, match_type=KINDS[kind].match_type)
    for a in t.actions:
        out.action_refs.add(id=program.action_ids[a])
    out.action_refs.add(id=program.action_ids["NoAction"], scope=p4info_pb2.ActionRef.DEFAULT_ONLY, annotations=default_only)
    out.size = TABLE_SIZE


def _add_action(info: p4info_pb2.P4Info, name: str, program: _Program, alias: str) -> p4info_pb2.Action:
    out = info.actions.add()
    out.preamble.id, out.preamble.name, out.preamble.alias = program.action_ids[name], name, alias
    for i, (param, width) in enumerate(program.actions[name], start=1):
        out.params.add(id=i, name=param, bitwidth=width)
    return out


def build_p4info(pipeline: Pipeline, *, counters: bool = False) -> p4info_pb2.P4Info:
    """The software switch's P4Info for `pipeline`, numbered as the emitted program's."""
    program = _program(pipeline)
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    info.pkg_info.name = "camus"
    tables = _ir_tables(pipeline)
    for t in tables:
        _add_table(info, t, program, t.ir_name, [])
    for name in sorted(program.actions, key=program.action_ids.get):
        _add_action(info, name, program, name.rsplit(".", 1)[-1])
    for r in program.registers:
        _add_register(info, r, program, r.ir_name)
    if counters:
        _add_counters(info, [t.ir_name for t in tables])
    return info


def _add_counters(info: p4info_pb2.P4Info, tables: list[str]) -> None:
    sizes = {"camus.port_rx": COUNTER_PORTS, "camus.port_tx": COUNTER_PORTS, "camus.drops": len(DROP_REASONS)}
    sizes.update({f"camus.table.{t}": 2 for t in tables})
    ids = p4c_id_map(PREFIX.COUNTER, list(sizes), set())
    for name in sorted(sizes, key=ids.get):
        c = info.counters.add()
        c.preamble.id, c.preamble.name, c.preamble.alias = ids[name], name, name
        c.spec.unit = p4info_pb2.CounterSpec.PACKETS
        c.size = sizes[name]


def program_p4info(pipeline: Pipeline, fabric: bool = False) -> p4info_pb2.P4Info:
    """The P4Info p4c writes for the program `compiler.p4.emit_program(pipeline, fabric=...)`
    (whatever its MoldUDP64 slot count: slots add no table or action; the fabric variant adds
    `FABRIC_TABLES`): its
    ids, its aliases (shortest unique suffixes), `@defaultonly` on default-only references,
    core.p4's annotation on NoAction, an empty `type_info`, and only the architecture in
    `pkg_info` (the program has no @pkginfo)."""
    program = _program(pipeline, fabric)
    aliases = shortest_unique_suffixes([t.name for t in program.tables] + list(program.actions)
                                       + [r.name for r in program.registers])
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    for t in program.tables:  # in declaration order, as p4c lists them
        _add_table(info, t, program, aliases[t.name], ["@defaultonly"])
    # p4c lists actions as it visits the controls (V1Switch's order: ingress, then egress),
    # each control's actions in declaration order after the control's copy of NoAction.
    for name in sorted(program.actions, key=ACTION_ORDER.index):
        action = _add_action(info, name, program, aliases[name])
        if name == "NoAction":
            action.preamble.annotations.append('@noWarn("unused")')
    for r in program.registers:  # after the actions, as p4c lists them
        _add_register(info, r, program, aliases[r.name])
    info.type_info.SetInParent()
    return info


def config_cookie(p4info: p4info_pb2.P4Info, device_config: bytes) -> int:
    """The ForwardingPipelineConfig cookie for a config: a hash of its P4Info and device config.

    A controller and the software switch loading the same directory both derive it, so a
    controller recognises a target that already runs its pipeline and only diffs entries.
    """
    digest = hashlib.sha256(p4info.SerializeToString(deterministic=True) + device_config).digest()
    return int.from_bytes(digest[:8], "big")
