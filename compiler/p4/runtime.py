"""The program's P4Info and its entries as one P4Runtime WriteRequest, both in protobuf text.

The P4Info comes from `compiler.p4info` (the same one the software switch reports), and
every id in the WriteRequest is resolved by name through it (`compiler.p4runtime_entries`),
so entries.txtpb is exactly what a controller would send to a target reporting that P4Info.
bmv2 reports p4c's P4Info instead, whose ids differ: there, a controller resolves names
again and the text files serve review, not replay (docs/p4.md).
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format

from compiler.p4.layout import DEFAULT_SLOTS
from compiler.p4.program import emit_program


def p4info_text(pipeline: dict) -> str:
    from compiler.p4info import p4info_text as text

    return text(pipeline)


def entries_text(pipeline: dict, entries: dict, device_id: int = 1) -> str:
    """A WriteRequest inserting every multicast group, then every table entry (text format).

    Groups come first so that no `mcast` entry ever names a group the target lacks.
    """
    from compiler.p4info import build_p4info
    from compiler.p4runtime_entries import P4InfoIndex, multicast_entry, table_entry
    from compiler.p4runtime_protos import p4runtime_pb2

    index = P4InfoIndex(build_p4info(pipeline))
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
    files = {"program.p4": emit_program(pipeline, slots), "p4info.txtpb": p4info_text(pipeline)}
    if entries is not None:
        files["entries.txtpb"] = entries_text(pipeline, entries)
    for name, text in files.items():
        (out / name).write_text(text)
    return list(files)
