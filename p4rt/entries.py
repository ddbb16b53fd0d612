"""entries.json entries <-> P4Runtime messages, every id resolved by name through a `P4InfoIndex`.

`table_entry` and `entry_dict` convert one table entry each way, dispatching every match key
on its kind through `p4rt.match_kinds` (don't-care keys omitted on the wire and restored when
decoding); values are canonical bytestrings (`p4rt.values`). `multicast_entry` and
`group_dict` do the same for multicast groups, `register_entry` and `cell_value` for
register cells (IR 4 state). Decoding checks what a server must refuse:
unknown ids, a key given twice or of the wrong kind, a missing exact key, an action the table
does not allow (`UnknownName`, `BadValue`).
"""

from __future__ import annotations

from p4rt.index import P4InfoIndex, UnknownName
from p4rt.match_kinds import BY_MATCH_TYPE, KINDS
from p4rt.protos import p4runtime_pb2
from p4rt.values import BadValue, decode, encode


def table_entry(index: P4InfoIndex, entry: dict) -> p4runtime_pb2.TableEntry:
    """One entries.json table entry as a P4Runtime TableEntry."""
    table = index.table(entry["table"])
    te = p4runtime_pb2.TableEntry(table_id=table.id, priority=entry.get("priority", 0))
    for name, match in entry.get("match", {}).items():
        f = table.field(name)
        (kind_name, value), = match.items()
        kind = KINDS.get(kind_name)
        if kind is None:
            raise BadValue(f"table {entry['table']!r}: unknown match kind {kind_name!r}")
        fm = p4runtime_pb2.FieldMatch(field_id=f.id)
        if kind.encode(getattr(fm, kind.oneof), value, f.bitwidth):
            te.match.append(fm)
    if "action" in entry:
        action = index.action(entry["action"])
        te.action.action.action_id = action.id
        for pname, value in entry.get("params", {}).items():
            p = action.params.get(pname)
            if p is None:
                raise UnknownName(f"action {action.name!r} has no parameter {pname!r}")
            te.action.action.params.add(param_id=p.id, value=encode(value, p.bitwidth))
    return te


def entry_dict(index: P4InfoIndex, te: p4runtime_pb2.TableEntry) -> dict:
    """A TableEntry back in entries.json form (IR names); inverse of `table_entry`."""
    table = index.tables.get(te.table_id)
    if table is None:
        raise UnknownName(f"no table with id {te.table_id:#x}")
    match: dict[str, object] = {}
    for fm in te.match:
        f = table.fields_by_id.get(fm.field_id)
        if f is None:
            raise UnknownName(f"table {table.name!r} has no match field id {fm.field_id}")
        if f.name in match:
            raise BadValue(f"table {table.name!r}: match field {f.name!r} given twice")
        kind = BY_MATCH_TYPE.get(f.match_type)
        expected = kind.oneof if kind else None
        if fm.WhichOneof("field_match_type") != expected:
            raise BadValue(f"table {table.name!r}: field {f.name!r} is {expected} but the entry gives "
                           f"{fm.WhichOneof('field_match_type')}")
        match[f.name] = {kind.name: kind.decode(getattr(fm, kind.oneof), f.bitwidth, f"{table.name}.{f.name}")}
    for f in table.fields_by_id.values():  # restore don't-care keys
        if f.name in match:
            continue
        kind = BY_MATCH_TYPE.get(f.match_type)
        if kind is None or kind.dont_care is None:
            raise BadValue(f"table {table.name!r}: match field {f.name!r} is missing")
        match[f.name] = {kind.name: kind.dont_care(f.bitwidth)}
    out: dict = {"table": table.ir_name, "match": match}
    if te.priority:
        out["priority"] = te.priority
    if te.HasField("action"):
        if te.action.WhichOneof("type") != "action":
            raise BadValue(f"table {table.name!r}: only direct actions are supported")
        action = index.actions.get(te.action.action.action_id)
        if action is None:
            raise UnknownName(f"no action with id {te.action.action.action_id:#x}")
        if action.id not in table.action_ids:
            raise BadValue(f"action {action.name!r} is not an action of table {table.name!r}")
        params = {}
        for p in te.action.action.params:
            info = action.params_by_id.get(p.param_id)
            if info is None:
                raise UnknownName(f"action {action.name!r} has no parameter id {p.param_id}")
            params[info.name] = decode(p.value, info.bitwidth, f"{action.name}.{info.name}")
        out["action"], out["params"] = action.ir_name, params
    return out


def multicast_entry(group: dict) -> p4runtime_pb2.PacketReplicationEngineEntry:
    """An entries.json multicast group as a PacketReplicationEngineEntry."""
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    mg = pre.multicast_group_entry
    mg.multicast_group_id = group["id"]
    for r in group.get("replicas", []):
        rep = mg.replicas.add()
        # `port` (a bytestring, P4Runtime >= 1.4) and the deprecated int `egress_port` are a
        # oneof; every bmv2 build reads `egress_port`, so that is what we send.
        rep.egress_port = r["port"]
        rep.instance = r.get("rid", 0)
    return pre


def group_dict(pre: p4runtime_pb2.PacketReplicationEngineEntry) -> dict:
    """A PacketReplicationEngineEntry's multicast group in entries.json form, replicas sorted."""
    mg = pre.multicast_group_entry
    replicas = []
    for rep in mg.replicas:
        if rep.WhichOneof("port_kind") == "port":
            port = decode(rep.port, 32, "replica port")
        else:
            port = rep.egress_port
        replicas.append({"port": port, "rid": rep.instance})
    return {"id": mg.multicast_group_id, "replicas": sorted(replicas, key=lambda r: (r["port"], r["rid"]))}


def register_entry(index: P4InfoIndex, register: str, cell: int, value: int | None = None) -> p4runtime_pb2.RegisterEntry:
    """One cell of a register (IR or P4 name) as a P4Runtime RegisterEntry: with `value`, what
    a MODIFY writes (IR 4: zero, for the cells a new rule takes over); without, what a Read
    asks for."""
    r = index.register(register)
    if not 0 <= cell < r.size:
        raise BadValue(f"register {r.name!r} has {r.size} cells, not a cell {cell}")
    entry = p4runtime_pb2.RegisterEntry(register_id=r.id)
    entry.index.index = cell
    if value is not None:
        entry.data.bitstring = encode(value, r.bitwidth)
    return entry


def cell_value(index: P4InfoIndex, entry: p4runtime_pb2.RegisterEntry) -> int:
    """The value of a RegisterEntry a Read returned."""
    r = index.registers.get(entry.register_id)
    if r is None:
        raise UnknownName(f"no register with id {entry.register_id:#x}")
    if entry.data.WhichOneof("data") != "bitstring":
        raise BadValue(f"register {r.name!r}: a cell is a bitstring, not {entry.data.WhichOneof('data')}")
    return decode(entry.data.bitstring, r.bitwidth, f"{r.name}[{entry.index.index}]")
