"""The program's P4Info and its entries as one P4Runtime WriteRequest, both in protobuf text.

The P4Info is the software switch's (`compiler.p4info`, from the IR) plus the egress
membership tables the program adds per MoldUDP64 slot and their `member` action
(`compiler.p4.derived`); ids for those follow the same convention (kind byte, hash of the
name). The WriteRequest holds entries.json plus the derived entries, every id resolved by
name through that P4Info (`compiler.p4runtime_entries`), so entries.txtpb is exactly what a
controller would send to a target reporting that P4Info. bmv2 reports p4c's P4Info instead,
whose ids differ: there, a controller resolves names again and the text files serve review,
not replay (docs/p4.md).
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format

import hashlib

from compiler.p4 import derived
from compiler.p4.layout import DEFAULT_SLOTS, AppLayout
from compiler.p4.names import EGRESS
from compiler.p4.program import emit_program


def program_p4info(pipeline: dict, slots: int = DEFAULT_SLOTS):
    """The P4Info of `emit_program(pipeline, slots)`: the IR's, plus the membership tables."""
    from compiler.p4info import GROUP_WIDTH, PORT_WIDTH, PREFIX, RID_WIDTH, build_p4info
    from compiler.p4runtime_protos import p4info_pb2

    info = build_p4info(pipeline)
    members = [AppLayout(a, slots).member_table(s) for a in pipeline["applications"]
               if a["framing"] == "moldudp64" for s in range(slots)]
    if not members:
        return info
    action = f"{EGRESS}.{derived.MEMBER_ACTION}"
    (action_id,) = _ids(PREFIX.ACTION, [action], {a.preamble.id for a in info.actions}).values()
    a = info.actions.add()
    a.preamble.id, a.preamble.name, a.preamble.alias = action_id, action, derived.MEMBER_ACTION
    no_action = next(x.preamble.id for x in info.actions if x.preamble.name == "NoAction")
    ids = _ids(PREFIX.TABLE, [f"{EGRESS}.{t}" for t in members], {t.preamble.id for t in info.tables})
    for name in members:
        t = info.tables.add()
        t.preamble.id, t.preamble.name, t.preamble.alias = ids[f"{EGRESS}.{name}"], f"{EGRESS}.{name}", name
        for i, (field, width) in enumerate((("group", GROUP_WIDTH), ("egress_port", PORT_WIDTH),
                                            ("egress_rid", RID_WIDTH)), start=1):
            t.match_fields.add(id=i, name=field, bitwidth=width, match_type=p4info_pb2.MatchField.EXACT)
        t.action_refs.add(id=action_id)
        t.action_refs.add(id=no_action, scope=p4info_pb2.ActionRef.DEFAULT_ONLY)
        t.size = info.tables[0].size
    return info


def _ids(kind: int, names: list[str], taken: set[int]) -> dict[str, int]:
    """Ids as compiler/p4info.py makes them (kind byte, 24 bits of the name's sha256), past `taken`."""
    out = {}
    for name in sorted(names):
        low = int.from_bytes(hashlib.sha256(name.encode()).digest()[:3], "big")
        while low == 0 or (kind << 24 | low) in taken:
            low = (low + 1) & 0xFFFFFF
        taken.add(kind << 24 | low)
        out[name] = kind << 24 | low
    return out


def p4info_text(pipeline: dict, slots: int = DEFAULT_SLOTS) -> str:
    return text_format.MessageToString(program_p4info(pipeline, slots))


def entries_text(pipeline: dict, entries: dict, slots: int = DEFAULT_SLOTS, device_id: int = 1) -> str:
    """A WriteRequest inserting every multicast group, then every table entry (text format):
    entries.json and the entries derived from it (`compiler.p4.derived.combined`).

    Groups come first so that no `mcast` entry ever names a group the target lacks.
    """
    from compiler.p4runtime_entries import P4InfoIndex, multicast_entry, table_entry
    from compiler.p4runtime_protos import p4runtime_pb2

    entries = derived.combined(pipeline, entries, slots)
    index = P4InfoIndex(program_p4info(pipeline, slots))
    req = p4runtime_pb2.WriteRequest(device_id=device_id)
    insert = p4runtime_pb2.Update.INSERT
    for g in entries.get("multicast_groups", []):
        u = req.updates.add(type=insert)
        u.entity.packet_replication_engine_entry.CopyFrom(multicast_entry(g))
    for e in entries.get("table_entries", []):
        u = req.updates.add(type=insert)
        u.entity.table_entry.CopyFrom(table_entry(index, e))
    return text_format.MessageToString(req)


def write_p4(pipeline: dict, entries: dict | None, out: str | Path, slots: int = DEFAULT_SLOTS) -> list[str]:
    """Write program.p4, p4info.txtpb and (with entries) entries.txtpb; the names written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"program.p4": emit_program(pipeline, slots), "p4info.txtpb": p4info_text(pipeline, slots)}
    if entries is not None:
        files["entries.txtpb"] = entries_text(pipeline, entries, slots)
    for name, text in files.items():
        (out / name).write_text(text)
    return list(files)
