"""`camus demo fabric`: the paper's routing figures (13-15) measured here, as PNG plots.

On a k = 4 fat tree (16 hosts) with the ITCH workload of apps/fabric/measure.py: entries per
layer for MR and TR as subscriptions grow (Fig. 13a/b), entries and core traffic for each α
(Fig. 13c/d), the cost of each of a series of one-subscription changes (Fig. 14), and the
largest switch under MST and MST++ on a power-law graph (Fig. 15). Before plotting, the
network's deliveries of the demo traffic are checked against the subscriptions, host by host.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register_demo(demos: argparse._SubParsersAction) -> None:
    p = demos.add_parser("fabric", help="routing on a k = 4 fat tree and power-law graphs: "
                                        "the paper's Figures 13-15 as PNGs",
                         description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,5000,20000",
                   help="subscription counts for Fig. 13a/b (default 1000,5000,20000)")
    p.add_argument("--alphas", default="1,10,100", help="alphas for Fig. 13c/d (default 1,10,100)")
    p.add_argument("--packets", type=int, default=1000, help="ITCH packets sent (default 1000)")
    p.add_argument("--changes", type=int, default=20, help="changes timed for Fig. 14 (default 20)")
    p.add_argument("--graph", default="6474,13233", metavar="NODES,EDGES",
                   help="power-law graph for Fig. 15 (default the AS graph's 6474,13233; "
                        "'none' to skip)")
    p.add_argument("--out", default="fabric-demo", help="directory for the PNGs and summary.txt")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from apps.fabric.plots import run_demo

    try:
        sizes = [int(x) for x in args.sizes.split(",") if x]
        alphas = [int(x) for x in args.alphas.split(",") if x]
        graph = None if args.graph == "none" else tuple(int(x) for x in args.graph.split(","))
        if not sizes or not alphas or any(a < 1 for a in alphas) or (graph and len(graph) != 2):
            raise ValueError
    except ValueError:
        print("camus demo fabric: error: --sizes and --alphas take positive integers, --graph "
              "NODES,EDGES or none", file=sys.stderr)
        return 2
    return run_demo(sizes, alphas, args.packets, args.changes, graph, Path(args.out), args.seed)
