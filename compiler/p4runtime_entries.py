"""entries.json entries <-> P4Runtime messages, with every id resolved by name from a P4Info.

`P4InfoIndex` is the one name<->id index built from the P4Info a target reports (ours from
`compiler.p4info`, or p4c's for bmv2). Names in entries.json are the IR's (`itch_stock`,
`set_state`, `itch_order.stock`); the index finds their P4 names by the contract of
docs/pipeline-ir.md (`CamusIngress.T`, `CamusEgress.T`, p4c's aliases), so one controller
drives both targets.

Values are P4Runtime bytestrings in canonical form (spec 8.4: big-endian, no leading zero
bytes, zero as one zero byte). Decoding accepts padded strings but refuses values wider than
the field (the server answers OUT_OF_RANGE). Don't-care keys are omitted on the wire as the
spec requires (a range spanning the whole domain, a ternary mask of 0, an LPM prefix of 0)
and restored when decoding, so a Read gives back the entries.json form that was written.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.p4runtime_protos import p4info_pb2, p4runtime_pb2

INGRESS_PREFIXES = ("CamusIngress.", "CamusEgress.")
MF = p4info_pb2.MatchField


class UnknownName(LookupError):
    """A name (table, key, action, parameter) the P4Info does not have."""


class BadValue(ValueError):
    """A value that does not fit its field, or a malformed match."""


def encode(value: int, bitwidth: int) -> bytes:
    """`value` as a canonical P4Runtime bytestring of a `bitwidth`-bit field."""
    if not 0 <= value < (1 << bitwidth):
        raise BadValue(f"{value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes, bitwidth: int, what: str = "value") -> int:
    if not data:
        raise BadValue(f"{what}: empty bytestring")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise BadValue(f"{what}: {data.hex()} does not fit in {bitwidth} bits")
    return value


def _short(name: str) -> str:
    for p in INGRESS_PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return name


@dataclass(frozen=True)
class Table:
    id: int
    name: str  # P4 name
    ir_name: str
    fields: dict[str, p4info_pb2.MatchField]  # by P4Info match field name
    fields_by_id: dict[int, p4info_pb2.MatchField]
    action_ids: frozenset[int]


@dataclass(frozen=True)
class Action:
    id: int
    name: str
    ir_name: str
    params: dict[str, p4info_pb2.Action.Param]
    params_by_id: dict[int, p4info_pb2.Action.Param]


class P4InfoIndex:
    """Tables, actions and counters of a P4Info, addressable by IR name, P4 name or id."""

    def __init__(self, p4info: p4info_pb2.P4Info):
        self.p4info = p4info
        self.tables: dict[int, Table] = {}
        self.actions: dict[int, Action] = {}
        self.counters: dict[str, p4info_pb2.Counter] = {}
        self._names: dict[tuple[str, str], int] = {}
        for t in p4info.tables:
            fields = {f.name: f for f in t.match_fields}
            self.tables[t.preamble.id] = Table(t.preamble.id, t.preamble.name, _short(t.preamble.name), fields,
                                               {f.id: f for f in t.match_fields},
                                               frozenset(r.id for r in t.action_refs))
            self._register("table", t.preamble, _short(t.preamble.name))
        for a in p4info.actions:
            self.actions[a.preamble.id] = Action(a.preamble.id, a.preamble.name, _short(a.preamble.name),
                                                 {p.name: p for p in a.params}, {p.id: p for p in a.params})
            self._register("action", a.preamble, _short(a.preamble.name))
        for c in p4info.counters:
            self.counters[c.preamble.name] = c

    def _register(self, kind: str, preamble, short: str) -> None:
        # Full names win over aliases and short names when two entities could share one.
        for name in (short, preamble.alias, preamble.name):
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


def _field(table: Table, name: str) -> p4info_pb2.MatchField:
    if name in table.fields:
        return table.fields[name]
    # entries.json may spell a key `hdr.ipv4.dst_addr` or `standard_metadata.egress_port`;
    # the contract's P4Info names are the suffixes.
    for fname, f in table.fields.items():
        if name.endswith("." + fname) or fname.endswith("." + name):
            return f
    raise UnknownName(f"table {table.name!r} has no match field {name!r}")


def table_entry(index: P4InfoIndex, entry: dict) -> p4runtime_pb2.TableEntry:
    """One entries.json table entry as a P4Runtime TableEntry."""
    table = index.table(entry["table"])
    te = p4runtime_pb2.TableEntry(table_id=table.id, priority=entry.get("priority", 0))
    for name, match in entry.get("match", {}).items():
        f = _field(table, name)
        (kind, value), = match.items()
        fm = p4runtime_pb2.FieldMatch(field_id=f.id)
        if kind == "exact":
            fm.exact.value = encode(value, f.bitwidth)
        elif kind == "range":
            lo, hi = value
            if lo == 0 and hi == (1 << f.bitwidth) - 1:
                continue  # don't care: omitted (P4Runtime spec 9.1.1)
            fm.range.low, fm.range.high = encode(lo, f.bitwidth), encode(hi, f.bitwidth)
        elif kind == "lpm":
            v, plen = value
            if plen == 0:
                continue
            fm.lpm.value, fm.lpm.prefix_len = encode(v, f.bitwidth), plen
        elif kind == "ternary":
            v, mask = value
            if mask == 0:
                continue
            fm.ternary.value, fm.ternary.mask = encode(v & mask, f.bitwidth), encode(mask, f.bitwidth)
        else:
            raise BadValue(f"table {entry['table']!r}: unknown match kind {kind!r}")
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
    match: dict[str, dict] = {}
    seen = set()
    for fm in te.match:
        f = table.fields_by_id.get(fm.field_id)
        if f is None:
            raise UnknownName(f"table {table.name!r} has no match field id {fm.field_id}")
        if fm.field_id in seen:
            raise BadValue(f"table {table.name!r}: match field {f.name!r} given twice")
        seen.add(fm.field_id)
        which = fm.WhichOneof("field_match_type")
        expected = {MF.EXACT: "exact", MF.RANGE: "range", MF.LPM: "lpm", MF.TERNARY: "ternary"}.get(f.match_type)
        if which != expected:
            raise BadValue(f"table {table.name!r}: field {f.name!r} is {expected} but the entry gives {which}")
        what = f"{table.name}.{f.name}"
        if which == "exact":
            match[f.name] = {"exact": decode(fm.exact.value, f.bitwidth, what)}
        elif which == "range":
            lo, hi = decode(fm.range.low, f.bitwidth, what), decode(fm.range.high, f.bitwidth, what)
            match[f.name] = {"range": [lo, hi]}
        elif which == "lpm":
            if not 0 < fm.lpm.prefix_len <= f.bitwidth:
                raise BadValue(f"{what}: prefix length {fm.lpm.prefix_len} outside 1..{f.bitwidth}")
            match[f.name] = {"lpm": [decode(fm.lpm.value, f.bitwidth, what), fm.lpm.prefix_len]}
        else:
            value, mask = decode(fm.ternary.value, f.bitwidth, what), decode(fm.ternary.mask, f.bitwidth, what)
            if value & ~mask:
                raise BadValue(f"{what}: ternary value has bits outside its mask")
            match[f.name] = {"ternary": [value, mask]}
    for f in table.fields_by_id.values():  # restore don't-care keys
        if f.id in seen:
            continue
        if f.match_type == MF.RANGE:
            match[f.name] = {"range": [0, (1 << f.bitwidth) - 1]}
        elif f.match_type == MF.LPM:
            match[f.name] = {"lpm": [0, 0]}
        elif f.match_type == MF.TERNARY:
            match[f.name] = {"ternary": [0, 0]}
        else:
            raise BadValue(f"table {table.name!r}: exact match field {f.name!r} is missing")
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


def entry_key(entry: dict) -> tuple:
    """What identifies an entry (P4Runtime: table, match and priority), for diffs."""
    match = tuple(sorted((k, tuple(sorted((kind, tuple(v) if isinstance(v, list) else v)
                                          for kind, v in m.items())))
                         for k, m in entry.get("match", {}).items()))
    return (entry["table"], match, entry.get("priority", 0))


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
    mg = pre.multicast_group_entry
    replicas = []
    for rep in mg.replicas:
        if rep.WhichOneof("port_kind") == "port":
            port = decode(rep.port, 32, "replica port")
        else:
            port = rep.egress_port
        replicas.append({"port": port, "rid": rep.instance})
    return {"id": mg.multicast_group_id, "replicas": sorted(replicas, key=lambda r: (r["port"], r["rid"]))}
