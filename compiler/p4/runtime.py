"""The program's P4Info and its entries as one P4Runtime WriteRequest, both in protobuf text.

The P4Info is `p4rt.p4info.program_p4info`: the software switch's names, with the ids,
aliases and annotations p4c writes for the program, so the P4Info p4c-bm2-ss writes for
program.p4 and this one should be equal. entries.txtpb, whose ids are resolved by name through this P4Info
(`p4rt.entries`), is a WriteRequest a client can replay on bmv2 as it is (election id 1,
device id 1). A controller still resolves every id by name from the P4Info the target
reports (docs/p4.md).
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format

from compiler.p4.program import emit_program
from p4rt.entries import multicast_entry, table_entry
from p4rt.index import P4InfoIndex
from p4rt.names import DEFAULT_SLOTS
from p4rt.p4info import program_p4info
from p4rt.protos import p4runtime_pb2
from pipeline.model import Pipeline

ELECTION_ID = 1  # `camus controller push`'s default election id


def p4info_text(pipeline: Pipeline, fabric: bool = False) -> str:
    """The P4Info as p4c writes `--p4runtime-files x.txtpb` (with its two header comments)."""
    return ("# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"
            + text_format.MessageToString(program_p4info(pipeline, fabric)))


def entries_text(pipeline: Pipeline, entries: dict, device_id: int = 1, fabric: bool = False) -> str:
    """A WriteRequest inserting every multicast group, then every table entry of entries.json
    (text format). Groups come first, so that no copy is ever multicast to a group the target
    lacks. `fabric`: ids from the fabric variant's P4Info (entries from
    `compiler.p4.fabric.control_plane`)."""
    index = P4InfoIndex(program_p4info(pipeline, fabric))
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


def write_p4(pipeline: Pipeline, entries: dict | None, out: str | Path, slots: int = DEFAULT_SLOTS,
             fabric: bool = False) -> list[str]:
    """Write program.p4, p4info.txtpb and (with entries) entries.txtpb; the names written.
    `fabric`: the fabric variant, `entries` including its control plane
    (`compiler.p4.fabric.control_plane`)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"program.p4": emit_program(pipeline, slots, fabric), "p4info.txtpb": p4info_text(pipeline, fabric)}
    if entries is not None:
        files["entries.txtpb"] = entries_text(pipeline, entries, fabric=fabric)
    for name, text in files.items():
        (out / name).write_text(text)
    return list(files)
