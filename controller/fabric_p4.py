"""A network's switches as the generated P4 program's fabric variant (for bmv2).

`camus net compile --p4` writes, beside each switch's pipeline.json and entries.json,
`program.p4` (one program for the whole network: `compiler.p4.emit_program(..., fabric=True)`),
`p4info.txtpb` and `entries.txtpb`: a P4Runtime WriteRequest holding the switch's entries
plus its fabric control plane (`compiler.p4.fabric.control_plane`: a `fabric_port` entry per
port, a `fabric_up_member` entry per up port, the multicast group with the physical up ports
in place of the logical one). `switch_entries` is that control plane for one switch of a
network directory, which `camus net up` pushes to bmv2 (`controller.emulation`).
"""

from __future__ import annotations

import json
from pathlib import Path

from compiler.p4 import emit_program, entries_text, p4info_text
from compiler.p4.fabric import control_plane
from controller.topology import Topology
from pipeline import document


def switch_entries(topo: Topology, switch: str, entries: dict) -> dict:
    """`entries` (the switch's entries.json) with the fabric's control plane added."""
    return control_plane(topo.up.get(switch, ()), sorted(topo.ports[switch]), entries)


def has_p4(net_dir: str | Path) -> bool:
    """Whether the network's switch directories carry the P4 program (`compile --p4`)."""
    return any(Path(net_dir, "switches").glob("*/program.p4"))


def write_switches(net_dir: str | Path, only=None) -> list[str]:
    """program.p4, p4info.txtpb, entries.txtpb in every switch directory of `net_dir` (or
    only those of the switches in `only`); the switches written. The program and its P4Info
    are made once per distinct pipeline.json (one for a whole network)."""
    d = Path(net_dir)
    topo = Topology.from_json(json.loads((d / "network.json").read_text()))
    made: dict[str, tuple] = {}  # pipeline.json text -> (pipeline, program, P4Info text)
    written = []
    for s in topo.switches:
        if only is not None and s not in only:
            continue
        sd = d / "switches" / s
        text = (sd / "pipeline.json").read_text()
        if text not in made:
            pipeline = document.from_json(json.loads(text))
            made[text] = (pipeline, emit_program(pipeline, fabric=True), p4info_text(pipeline, fabric=True))
        pipeline, program, p4info = made[text]
        entries = json.loads((sd / "entries.json").read_text())
        (sd / "program.p4").write_text(program)
        (sd / "p4info.txtpb").write_text(p4info)
        (sd / "entries.txtpb").write_text(entries_text(pipeline, switch_entries(topo, s, entries), fabric=True))
        written.append(s)
    return written
