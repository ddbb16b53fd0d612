"""`camus controller ...`: program a P4Runtime target with a compiled pipeline directory.

`camus controller push --target HOST:PORT --pipeline DIR` connects as primary, sets the
pipeline if the target does not already run it, and writes DIR/entries.json as the
difference to what the target holds. For camus's software switch the P4Info is derived from
DIR/pipeline.json; for bmv2 pass p4c's outputs with `--p4info` and `--device-config`.
`--fabric` (DIR is NET/switches/S of `camus net compile`) adds switch S's fabric control
plane (`controller.fabric_p4`), for bmv2 running the fabric program (docs/routing.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import grpc


from controller.p4runtime_client import DEFAULT_TARGET, ArbitrationError, P4RuntimeClient, WriteError
from controller.push import CellsUnwritable, TargetConfig, push
from p4rt.index import UnknownName
from p4rt.values import BadValue
from pipeline import document
from pipeline.entries import ENTRIES_VERSION


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("controller", help="program P4Runtime targets",
                                   description="camus's P4Runtime controller.")
    sub = parser.add_subparsers(dest="controller_command", metavar="SUBCOMMAND")
    sub.required = True
    p = sub.add_parser("push", help="push a compiled pipeline and its entries to a target",
                       description="Set the pipeline (unless the target already runs it) and write "
                                   "DIR/entries.json as the difference to what the target holds.")
    p.add_argument("--target", default=DEFAULT_TARGET, metavar="HOST:PORT",
                   help=f"P4Runtime server address (default {DEFAULT_TARGET})")
    p.add_argument("--pipeline", required=True, metavar="DIR",
                   help="directory written by `camus compile --out DIR` (pipeline.json, entries.json)")
    p.add_argument("--device-id", type=int, default=1, metavar="N", help="P4Runtime device id (default 1)")
    p.add_argument("--election-id", type=int, default=1, metavar="N", help="election id (default 1)")
    p.add_argument("--p4info", metavar="FILE", help="P4Info written by p4c (text or binary); for bmv2")
    p.add_argument("--device-config", metavar="FILE",
                   help="device config written by p4c (bmv2: the JSON from p4c-bm2-ss); with --p4info")
    p.add_argument("--fabric", action="store_true",
                   help="DIR is NET/switches/S of `camus net compile`: also write S's fabric control "
                        "plane (up ports, member list, groups with physical up ports), for a target "
                        "running the fabric program (p4c's P4Info of `camus net compile --p4`)")
    p.add_argument("--batch", type=int, default=500, metavar="N", help="updates per WriteRequest (default 500)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="S", help="per-RPC timeout in seconds")
    p.add_argument("--previous", metavar="DIR",
                   help="state: the directory the target was last pushed from; the register cells of "
                        "rules that stay (same text and line) keep their values, only new rules' cells "
                        "are zeroed (default: every stateful rule's cells are zeroed)")
    p.set_defaults(func=run_push)


def run_push(args: argparse.Namespace) -> int:
    if bool(args.p4info) != bool(args.device_config):
        print("camus controller push: --p4info and --device-config go together", file=sys.stderr)
        return 2
    try:
        if args.p4info:
            config = TargetConfig.from_files(args.p4info, args.device_config)
        else:
            config = TargetConfig.software_switch(args.pipeline)
        entries_path = Path(args.pipeline) / "entries.json"
        entries = (json.loads(entries_path.read_text()) if entries_path.exists()
                   else {"camus_entries": ENTRIES_VERSION})
        # Checked here, so that a stale or broken directory fails before anything is written.
        model = document.from_json(json.loads((Path(args.pipeline) / "pipeline.json").read_text()))
        previous = (json.loads((Path(args.previous) / "entries.json").read_text())
                    if args.previous else None)
        if args.fabric:
            from controller.fabric_p4 import switch_entries
            from controller.topology import Topology

            switch_dir = Path(args.pipeline).resolve()
            net = switch_dir.parent.parent / "network.json"
            if switch_dir.parent.name != "switches" or not net.exists():
                raise ValueError(f"--fabric: {args.pipeline} is not NET/switches/S of `camus net compile`")
            topo = Topology.from_json(json.loads(net.read_text()))
            if switch_dir.name not in topo.ports:
                raise ValueError(f"--fabric: {net} has no switch {switch_dir.name!r}")
            entries = switch_entries(topo, switch_dir.name, entries)
    except (OSError, ValueError) as exc:
        print(f"camus controller push: {exc}", file=sys.stderr)
        return 2
    try:
        with P4RuntimeClient(args.target, args.device_id, args.election_id, args.timeout) as client:
            client.arbitrate()
            report = push(client, config, entries, args.batch, pipeline=model, previous=previous)
    except grpc.FutureTimeoutError:
        print(f"camus controller push: {args.target}: not reachable in {args.timeout} s", file=sys.stderr)
        return 1
    except ArbitrationError as exc:
        print(f"camus controller push: {exc}", file=sys.stderr)
        return 1
    except WriteError as exc:
        for e in exc.errors:
            print(f"camus controller push: {e}", file=sys.stderr)
        return 1
    except CellsUnwritable as exc:
        print(f"camus controller push: {args.target}: {exc}", file=sys.stderr)
        return 1
    except grpc.RpcError as exc:
        print(f"camus controller push: {args.target}: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    except (UnknownName, BadValue) as exc:  # checked against the target's P4Info before any write
        print(f"camus controller push: {args.target}: the entries do not fit its P4Info: {exc}", file=sys.stderr)
        return 2
    print(f"{args.target}: {report}")
    return 0
