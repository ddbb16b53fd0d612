"""P4Info from the pipeline IR, following the naming contract of docs/pipeline-ir.md ("P4 names").

`build_p4info(pipeline)` returns the `p4.config.v1.P4Info` of the program that the P4 emitter
writes for the same pipeline.json: tables `CamusIngress.<T>` (and
`CamusEgress.egress_udp_rewrite`), their match fields with the contract's names, ids and
widths, the actions `CamusIngress.set_state/fwd/mcast/drop` and `CamusEgress.set_udp_port`,
plus `NoAction` as every table's default-only action (what a P4_16 table without an explicit
default action gets). `p4info_text(pipeline)` is the same as protobuf text for writing next
to the program. The software switch is programmed with this P4Info; bmv2 with the one p4c
writes. Controllers resolve every id by name, so the two need only agree on names.

Ids follow p4c's convention: the top byte is the entity kind (`P4Ids.Prefix`), the low 24
bits come from a hash of the entity's name, so they are deterministic and do not move when
another table is added. A hash collision within one kind takes the next free value, visiting
names in sorted order so the outcome is still deterministic.

`counters=True` adds the software switch's own counters (not part of the P4 program; see
switch/p4runtime_server.py): `camus.port_rx` and `camus.port_tx` (packets, indexed by port),
`camus.drops` (indexed by drop reason, in `DROP_REASONS` order) and, per table `T`,
`camus.table.T` (index 0 hits, index 1 misses).
"""

from __future__ import annotations

import hashlib

from google.protobuf import text_format

from compiler.p4runtime_protos import p4info_pb2

INGRESS, EGRESS = "CamusIngress", "CamusEgress"
PORT_WIDTH, GROUP_WIDTH, UDP_PORT_WIDTH, RID_WIDTH, IPV4_WIDTH = 9, 16, 16, 16, 32
DEFAULT_TABLE_SIZE = 1 << 16
COUNTER_PORTS = 1 << PORT_WIDTH
DROP_REASONS = ("malformed", "truncated", "oversized", "no_route")

MATCH_TYPES = {
    "exact": p4info_pb2.MatchField.EXACT,
    "range": p4info_pb2.MatchField.RANGE,
    "lpm": p4info_pb2.MatchField.LPM,
    "ternary": p4info_pb2.MatchField.TERNARY,
}
PREFIX = p4info_pb2.P4Ids


def p4_table_name(ir_table: str, egress_table: str) -> str:
    """The P4 name of an IR table (contract: `CamusIngress.T`, the egress table in CamusEgress)."""
    return f"{EGRESS if ir_table == egress_table else INGRESS}.{ir_table}"


def _ids(kind: int, names: list[str]) -> dict[str, int]:
    taken: set[int] = set()
    out = {}
    for name in sorted(names):
        low = int.from_bytes(hashlib.sha256(name.encode()).digest()[:3], "big")
        while low == 0 or low in taken:  # id 0 is reserved (wildcard reads)
            low = (low + 1) & 0xFFFFFF
        taken.add(low)
        out[name] = (kind << 24) | low
    return out


def _tables(pipeline: dict) -> list[tuple[str, list[tuple[str, int, str]], list[str]]]:
    """(IR table, [(match field name, bitwidth, match kind)], [action P4 names]) for every table."""
    state_w = pipeline["state_width"]
    stage_actions = [f"{INGRESS}.set_state", f"{INGRESS}.fwd", f"{INGRESS}.mcast"]
    out = []
    for app in pipeline["applications"]:
        for stage in app["stages"]:
            width = app["fields"][stage["field"]]["width"]
            out.append((stage["table"], [("state", state_w, "exact"), (stage["field"], width, stage["match_kind"])],
                        stage_actions))
            out.append((stage["default_table"], [("state", state_w, "exact")], stage_actions))
        out.append((app["leaf_table"], [("state", state_w, "exact")], [f"{INGRESS}.fwd", f"{INGRESS}.mcast"]))
    out.append((pipeline["ipv4_table"], [("ipv4.dst_addr", IPV4_WIDTH, "lpm")], [f"{INGRESS}.fwd", f"{INGRESS}.drop"]))
    out.append((pipeline["egress_table"], [("egress_port", PORT_WIDTH, "exact"), ("egress_rid", RID_WIDTH, "exact")],
                [f"{EGRESS}.set_udp_port"]))
    return out


def build_p4info(pipeline: dict, *, table_size: int = DEFAULT_TABLE_SIZE, counters: bool = False) -> p4info_pb2.P4Info:
    """The P4Info of the program for `pipeline` (a pipeline.json document)."""
    actions = {  # P4 name -> [(param, bitwidth)]
        f"{INGRESS}.set_state": [("state", pipeline["state_width"])],
        f"{INGRESS}.fwd": [("port", PORT_WIDTH)],
        f"{INGRESS}.mcast": [("group", GROUP_WIDTH)],
        f"{INGRESS}.drop": [],
        f"{EGRESS}.set_udp_port": [("port", UDP_PORT_WIDTH)],
        "NoAction": [],
    }
    tables = _tables(pipeline)
    egress = pipeline["egress_table"]
    table_ids = _ids(PREFIX.TABLE, [p4_table_name(t, egress) for t, _, _ in tables])
    action_ids = _ids(PREFIX.ACTION, list(actions))

    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    info.pkg_info.name = "camus"
    for ir_name, keys, allowed in tables:
        name = p4_table_name(ir_name, egress)
        t = info.tables.add()
        t.preamble.id, t.preamble.name, t.preamble.alias = table_ids[name], name, ir_name
        for i, (fname, width, kind) in enumerate(keys, start=1):
            t.match_fields.add(id=i, name=fname, bitwidth=width, match_type=MATCH_TYPES[kind])
        for a in allowed:
            t.action_refs.add(id=action_ids[a])
        t.action_refs.add(id=action_ids["NoAction"], scope=p4info_pb2.ActionRef.DEFAULT_ONLY)
        t.size = table_size
    for name in sorted(actions, key=action_ids.get):
        a = info.actions.add()
        a.preamble.id, a.preamble.name, a.preamble.alias = action_ids[name], name, name.rsplit(".", 1)[-1]
        for i, (pname, width) in enumerate(actions[name], start=1):
            a.params.add(id=i, name=pname, bitwidth=width)
    if counters:
        _add_counters(info, [t for t, _, _ in tables])
    return info


def _add_counters(info: p4info_pb2.P4Info, tables: list[str]) -> None:
    sizes = {"camus.port_rx": COUNTER_PORTS, "camus.port_tx": COUNTER_PORTS, "camus.drops": len(DROP_REASONS)}
    sizes.update({f"camus.table.{t}": 2 for t in tables})
    ids = _ids(PREFIX.COUNTER, list(sizes))
    for name in sorted(sizes, key=ids.get):
        c = info.counters.add()
        c.preamble.id, c.preamble.name, c.preamble.alias = ids[name], name, name
        c.spec.unit = p4info_pb2.CounterSpec.PACKETS
        c.size = sizes[name]


def config_cookie(p4info: p4info_pb2.P4Info, device_config: bytes) -> int:
    """The ForwardingPipelineConfig cookie for a config: a hash of its P4Info and device config.

    A controller and the software switch loading the same directory both derive it, so a
    controller recognises a target that already runs its pipeline and only diffs entries.
    """
    digest = hashlib.sha256(p4info.SerializeToString(deterministic=True) + device_config).digest()
    return int.from_bytes(digest[:8], "big")


def p4info_text(pipeline: dict, **options) -> str:
    """`build_p4info` as protobuf text format (what p4c writes as `*.p4info.txtpb`)."""
    return text_format.MessageToString(build_p4info(pipeline, **options))
