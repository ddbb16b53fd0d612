"""`camus switch ...`: the software switch's commands.

`camus switch run` is the offline path: a pipeline directory (pipeline.json and, if present,
entries.json, as `camus compile --out DIR` writes them) and a pcap of input frames in; one
pcap per egress port out (`OUT/port-<n>.pcap`, copies in input order, each with its input
frame's timestamp); counters printed. Each frame enters the switch at its record's time
(stateful rules' windows run on the capture's clock, docs/stateful.md). Other subcommands (`serve`) live in their own modules
listed in EXTRA_COMMANDS, each exposing `register(subparsers)`, so adding one never means
editing this file's commands.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from switch.dataplane import IMPLEMENTATIONS, DataPlane, load
from switch.pcap import PcapError, PcapReader, PcapWriter

EXTRA_COMMANDS = ("switch.serve",)
BATCH = 4096  # frames per call into the data plane


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("switch", help="run the software switch",
                                   description="The camus software switch.")
    sub = parser.add_subparsers(dest="switch_command", metavar="SUBCOMMAND")
    sub.required = True
    _register_run(sub)
    for name in EXTRA_COMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue  # that subcommand is not written yet
            raise
        module.register(sub)


def _register_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a pcap through a compiled pipeline offline",
                       description="Run every frame of a pcap through the pipeline; write one pcap "
                                   "per egress port (OUT/port-<n>.pcap) and print the counters.")
    p.add_argument("--pipeline", required=True, metavar="DIR",
                   help="directory holding pipeline.json (and entries.json, if any)")
    p.add_argument("--pcap-in", required=True, metavar="IN.pcap", help="input frames (classic pcap, Ethernet)")
    p.add_argument("--out-dir", required=True, metavar="OUT", help="where port-<n>.pcap files are written")
    p.add_argument("--in-port", type=_port_number, default=0, metavar="N",
                   help="ingress port of every input frame (default 0, a port no rule names)")
    p.add_argument("--impl", choices=IMPLEMENTATIONS, default="native",
                   help="data-plane implementation (default native)")
    p.add_argument("--counters-json", metavar="FILE", help="also write the counters as JSON to FILE")
    p.set_defaults(func=run)


def _port_number(text: str) -> int:
    """A 32-bit port number (what both data planes take), else argparse's usage error."""
    try:
        port = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError(f"port {port} is out of range (0..4294967295)")
    return port


def load_pipeline_dir(directory: str | Path, impl: str) -> DataPlane:
    d = Path(directory)
    pipeline = json.loads((d / "pipeline.json").read_text())
    entries_path = d / "entries.json"
    entries = json.loads(entries_path.read_text()) if entries_path.exists() else None
    return load(pipeline, entries, impl=impl)


def run(args: argparse.Namespace) -> int:
    try:
        dp = load_pipeline_dir(args.pipeline, args.impl)
    except (OSError, ValueError) as exc:
        print(f"camus switch run: cannot load pipeline from {args.pipeline}: {exc}", file=sys.stderr)
        return 2
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    writers: dict[int, tuple[Any, PcapWriter]] = {}
    try:
        with open(args.pcap_in, "rb") as f:
            reader = PcapReader(f)
            batch = []
            for record in reader:
                batch.append(record)
                if len(batch) == BATCH:
                    _run_batch(dp, batch, args.in_port, out_dir, writers, reader.nanoseconds)
                    batch = []
            _run_batch(dp, batch, args.in_port, out_dir, writers, reader.nanoseconds)
    except (OSError, PcapError) as exc:
        print(f"camus switch run: {args.pcap_in}: {exc}", file=sys.stderr)
        return 2
    finally:
        for stream, _ in writers.values():
            stream.close()
    counters = dp.counters()
    print(format_counters(counters))
    if args.counters_json:
        Path(args.counters_json).write_text(json.dumps(counters, indent=2) + "\n")
    if reader.truncated:  # every whole record ran; the damage is reported, and the status says so
        print(f"camus switch run: {args.pcap_in}: {reader.truncated}; the records before it "
              "were processed", file=sys.stderr)
        return 1
    return 0


def _run_batch(dp: DataPlane, records, in_port: int, out_dir: Path, writers: dict, nanoseconds: bool) -> None:
    if not records:
        return
    # Each frame at its capture time: stateful rules' windows run on the pcap's clock.
    outputs = dp.process_batch([r.data for r in records], in_port,
                               [r.ts_us(nanoseconds) for r in records])
    for record, copies in zip(records, outputs):
        for port, frame in copies:
            if port not in writers:
                stream = open(out_dir / f"port-{port}.pcap", "wb")
                writers[port] = (stream, PcapWriter(stream, nanoseconds))
            writers[port][1].write(frame, record.seconds, record.fraction)


def format_counters(c: dict) -> str:
    """Counters as a few aligned lines for a terminal."""
    lines = ["ports:"]
    for port, pc in c["ports"].items():
        lines.append(f"  {port:>6}  rx {pc['rx_packets']:>10}  tx {pc['tx_packets']:>10}")
    lines.append("drops: " + "  ".join(f"{k} {v}" for k, v in c["drops"].items()))
    lines.append("tables:")
    width = max((len(t) for t in c["tables"]), default=0)
    for name, tc in c["tables"].items():
        lines.append(f"  {name:<{width}}  hits {tc['hits']:>10}  misses {tc['misses']:>10}")
    return "\n".join(lines)
