"""The program's P4Info and its entries as one P4Runtime WriteRequest, both in protobuf text.

The P4Info has the software switch's names (`compiler.p4info`, from the IR) plus the egress
membership tables the program adds per MoldUDP64 slot and their `member` action
(`compiler.p4.derived`). Its ids and aliases are the ones p4c writes for the program
(`p4c_ids`: p4c's `P4RuntimeSymbolTable`, a Jenkins one-at-a-time hash of the fully
qualified name in the low 24 bits under the kind byte, names visited in sorted order with
linear probing; aliases are the shortest unique suffixes), so the P4Info p4c-bm2-ss writes
for program.p4 and this one should carry the same ids, and entries.txtpb, whose ids are
resolved by name through this P4Info (`compiler.p4runtime_entries`), is a WriteRequest a
client can replay on bmv2 as it is (election id 1, device id 1). A controller still resolves
every id by name from the P4Info the target reports (docs/p4.md).
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format

from compiler.p4 import derived
from compiler.p4.layout import DEFAULT_SLOTS, AppLayout
from compiler.p4.names import EGRESS
from compiler.p4.program import emit_program
from pipeline import document
from pipeline.model import Pipeline

ELECTION_ID = 1  # `camus controller push`'s default election id
PLACEHOLDER_ID = 0x01FFFFFF  # the member action until `p4c_ids` numbers every action
# The program's actions in the order p4c's P4Info lists them: NoAction, then each control's
# actions as compiler/p4/controls.py declares them (tests/p4/test_p4c_ids.py checks this).
ACTION_ORDER = ("NoAction", "CamusIngress.drop", "CamusIngress.set_state", "CamusIngress.fwd",
                "CamusIngress.mcast", "CamusEgress.set_udp_port", f"CamusEgress.{derived.MEMBER_ACTION}")


def program_p4info(pipeline: Pipeline, slots: int = DEFAULT_SLOTS):
    """The P4Info of `emit_program(pipeline, slots)`: the IR's, plus the membership tables,
    with p4c's ids and aliases (`p4c_ids`)."""
    from compiler.p4info import GROUP_WIDTH, PORT_WIDTH, RID_WIDTH, build_p4info
    from compiler.p4runtime_protos import p4info_pb2

    info = build_p4info(document.to_json(pipeline))
    members = [AppLayout(a, slots).member_table(s) for a in pipeline.applications
               if a.framing == "moldudp64" for s in range(slots)]
    if members:
        action = f"{EGRESS}.{derived.MEMBER_ACTION}"
        a = info.actions.add()
        a.preamble.id, a.preamble.name = PLACEHOLDER_ID, action  # p4c_ids gives the real id
        no_action = next(x.preamble.id for x in info.actions if x.preamble.name == "NoAction")
        for name in members:
            t = info.tables.add()
            t.preamble.name = f"{EGRESS}.{name}"
            for i, (field, width) in enumerate((("group", GROUP_WIDTH), ("egress_port", PORT_WIDTH),
                                                ("egress_rid", RID_WIDTH)), start=1):
                t.match_fields.add(id=i, name=field, bitwidth=width,
                                   match_type=p4info_pb2.MatchField.EXACT)
            t.action_refs.add(id=PLACEHOLDER_ID)
            t.action_refs.add(id=no_action, scope=p4info_pb2.ActionRef.DEFAULT_ONLY)
            t.size = info.tables[0].size
    return p4c_ids(info)


def jenkins_one_at_a_time(name: str) -> int:
    """p4c's `P4RuntimeSymbolTable::jenkinsOneAtATimeHash` over the name's bytes."""
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    return (h + (h << 15)) & 0xFFFFFFFF


def p4c_id_map(kind: int, names: list[str], taken: set[int]) -> dict[str, int]:
    """p4c's `computeIdsForSymbols`: names in sorted order, id = kind << 24 | hash & 0xFFFFFF,
    the hash incremented past ids already taken (`taken` is updated)."""
    out = {}
    for name in sorted(set(names)):
        start = value = jenkins_one_at_a_time(name)
        while (kind << 24 | value & 0xFFFFFF) in taken:
            value = (value + 1) & 0xFFFFFFFF
            if value == start:
                raise ValueError(f"no P4Runtime id left for {name}")
        out[name] = kind << 24 | value & 0xFFFFFF
        taken.add(out[name])
    return out


def shortest_unique_suffixes(names: list[str]) -> dict[str, str]:
    """p4c's aliases (`P4SymbolSuffixSet`): the fewest trailing dot-separated components of a
    name that no other name of the program ends with."""
    names = sorted(set(names))
    counts: dict[tuple[str, ...], int] = {}
    for n in names:
        parts = tuple(n.split("."))
        for k in range(1, len(parts) + 1):
            counts[parts[-k:]] = counts.get(parts[-k:], 0) + 1
    out = {}
    for n in names:
        parts = tuple(n.split("."))
        k = 1
        while k < len(parts) and counts[parts[-k:]] > 1:
            k += 1
        out[n] = ".".join(parts[-k:])
    return out


def p4c_ids(info):
    """`info` with the table, action and counter ids and the aliases p4c assigns to the same
    names, and p4c's `@defaultonly` annotation on default-only action references. Action
    references are followed through the ids `info` has (any distinct placeholders)."""
    from compiler.p4info import PREFIX
    from compiler.p4runtime_protos import p4info_pb2

    old_action_names = {a.preamble.id: a.preamble.name for a in info.actions}
    taken: set[int] = set()
    table_ids = p4c_id_map(PREFIX.TABLE, [t.preamble.name for t in info.tables], taken)
    action_ids = p4c_id_map(PREFIX.ACTION, [a.preamble.name for a in info.actions], taken)
    counter_ids = p4c_id_map(PREFIX.COUNTER, [c.preamble.name for c in info.counters], taken)
    aliases = shortest_unique_suffixes([x.preamble.name for kind in (info.tables, info.actions, info.counters)
                                        for x in kind])
    for t in info.tables:
        t.preamble.id, t.preamble.alias = table_ids[t.preamble.name], aliases[t.preamble.name]
        for ref in t.action_refs:
            ref.id = action_ids[old_action_names[ref.id]]
            if ref.scope == p4info_pb2.ActionRef.DEFAULT_ONLY and "@defaultonly" not in ref.annotations:
                ref.annotations.append("@defaultonly")
    for a in info.actions:
        a.preamble.id, a.preamble.alias = action_ids[a.preamble.name], aliases[a.preamble.name]
        if a.preamble.name == "NoAction" and not a.preamble.annotations:
            a.preamble.annotations.append('@noWarn("unused")')  # core.p4's, which p4c copies
    for c in info.counters:
        c.preamble.id, c.preamble.alias = counter_ids[c.preamble.name], aliases[c.preamble.name]
    info.type_info.SetInParent()  # p4c always writes `type_info {}`
    info.pkg_info.ClearField("name")  # p4c writes only the architecture (no @pkginfo here)
    # p4c lists actions as it visits the controls (V1Switch's order: ingress, then egress),
    # each control's actions in declaration order after the control's copy of NoAction;
    # tables come in declaration order already (compiler.p4info and the emitter agree).
    order = {name: i for i, name in enumerate(ACTION_ORDER)}
    actions = sorted(info.actions, key=lambda a: (order.get(a.preamble.name, len(order)), a.preamble.name))
    del info.actions[:]
    info.actions.extend(actions)
    return info


def p4info_text(pipeline: Pipeline, slots: int = DEFAULT_SLOTS) -> str:
    """The P4Info as p4c writes `--p4runtime-files x.txtpb` (with its two header comments)."""
    return ("# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"
            + text_format.MessageToString(program_p4info(pipeline, slots)))


def entries_text(pipeline: Pipeline, entries: dict, slots: int = DEFAULT_SLOTS, device_id: int = 1) -> str:
    """A WriteRequest inserting every multicast group, then every table entry (text format):
    entries.json and the entries derived from it (`compiler.p4.derived.combined`).

    Groups come first so that no `mcast` entry ever names a group the target lacks.
    """
    from compiler.p4runtime_entries import P4InfoIndex, multicast_entry, table_entry
    from compiler.p4runtime_protos import p4runtime_pb2

    entries = derived.combined(pipeline, entries, slots)
    index = P4InfoIndex(program_p4info(pipeline, slots))
    req = p4runtime_pb2.WriteRequest(device_id=device_id)
    req.election_id.low = ELECTION_ID  # what a primary with `camus controller push`'s default sends
    insert = p4runtime_pb2.Update.INSERT
    for g in entries.get("multicast_groups", []):
        u = req.updates.add(type=insert)
        u.entity.packet_replication_engine_entry.CopyFrom(multicast_entry(g))
    for e in entries.get("table_entries", []):
        u = req.updates.add(type=insert)
        u.entity.table_entry.CopyFrom(table_entry(index, e))
    return ("# proto-file: p4/v1/p4runtime.proto\n# proto-message: p4.v1.WriteRequest\n\n"
            + text_format.MessageToString(req))


def write_p4(pipeline: Pipeline, entries: dict | None, out: str | Path, slots: int = DEFAULT_SLOTS) -> list[str]:
    """Write program.p4, p4info.txtpb and (with entries) entries.txtpb; the names written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"program.p4": emit_program(pipeline, slots), "p4info.txtpb": p4info_text(pipeline, slots)}
    if entries is not None:
        files["entries.txtpb"] = entries_text(pipeline, entries, slots)
    for name, text in files.items():
        (out / name).write_text(text)
    return list(files)
