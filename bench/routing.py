"""Benchmark: routing on networks of switches, the paper's §VIII-G (Figures 13-15).

Workload (apps/fabric/measure.py): the ITCH subscriptions of bench/compile_itch.py,
`stock == S and price > P`, each owned by a random host of a k = 4 fat tree (fixed seed).
Prints:

  1. entries per layer, MR vs TR, for each subscription count (Fig. 13a/b); baseline: the
     same subscriptions on one switch with one port per host (camus before routing), and the
     ratio of the network's largest switch to it;
  2. for each alpha: entries per layer and the packets crossing core links for the same
     random traffic (Fig. 13c/d); baseline alpha = 1, and the ratio;
  3. one subscription added and removed: switches recompiled, writes, milliseconds
     (Fig. 14); baseline: compiling the whole network;
  4. MST vs MST++ on power-law graphs with the AS graphs' node and edge counts (Fig. 15):
     the largest entry count among the switches of highest tree degree; baseline MST.

    python bench/routing.py [--sizes 1000,10000,100000] [--alphas 1,10,100] [--graphs small|both|none]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages, as bench/compile_itch.py says

from apps.fabric import measure  # noqa: E402
from compiler.spec import load_spec  # noqa: E402
from controller.topology import TopologyError, fat_tree  # noqa: E402


def fig13(spec, sizes: list[int], alphas: list[int], seed: int, n_packets: int) -> None:
    topo = fat_tree(4)
    hosts = list(topo.hosts)
    packets = measure.traffic(hosts, n_packets, seed + 1)
    print("== 1-3. k = 4 fat tree: entries per layer (Fig. 13a/b), alpha (13c/d), one change (14) ==")
    print(f"{'subs':>7} {'policy':>6} {'alpha':>5} | {'ToR sum/max':>15} {'agg sum/max':>15} "
          f"{'core sum/max':>15} | {'total':>8} {'1 switch':>8} {'max/1sw':>7} | "
          f"{'compile s':>9} {'core pkts':>9} {'vs a=1':>6}")
    for n in sizes:
        subs = measure.subscriptions(spec, hosts, n, seed)
        one = measure.one_switch_entries(spec, topo, subs)
        for policy in ("mr", "tr"):
            base_core = None
            for alpha in alphas:
                p = measure.fat_tree_point(spec, topo, subs, policy, alpha, packets)
                base_core = p.core_packets if base_core is None else base_core
                cells = " ".join(f"{f'{a}/{m}':>15}" for a, m in p.per_layer.values())
                print(f"{n:>7} {policy:>6} {alpha:>5} | {cells} | {p.total:>8} {one:>8} "
                      f"{p.largest / one:>7.2f} | {p.compile_seconds:>9.2f} {p.core_packets:>9} "
                      f"{p.core_packets / base_core if base_core else 1:>6.2f}", flush=True)
                for what, r in measure.change_costs(p.net, 2, seed + 2):
                    print(f"        change: {what} one subscription: {len(r.switches)} switches "
                          f"recompiled, {r.writes} writes, {r.seconds * 1000:.1f} ms; whole network "
                          f"{p.compile_seconds * 1000:.0f} ms, ratio "
                          f"{r.seconds / p.compile_seconds:.3f}", flush=True)


def fig15(spec, sizes: list[tuple[int, int]], n_hosts: int, n_subs: int, top: int, seed: int) -> None:
    print(f"== 4. MST vs MST++ on power-law graphs (Fig. 15): {n_hosts} hosts on random switches, "
          f"{n_subs} subscriptions; max entries over the {top} switches of highest tree degree ==")
    for nodes, edges in sizes:
        g = measure.power_law_graph(nodes, edges, seed)
        try:
            topo = measure.graph_topology(g, n_hosts, seed)
        except TopologyError as exc:
            print(f"  {nodes} nodes / {edges} edges: skipped ({exc})")
            continue
        print(f"  graph {nodes} nodes / {g.number_of_edges()} edges, "
              f"max degree {max(d for _, d in g.degree)}")
        subs = measure.subscriptions(spec, list(topo.hosts), n_subs, seed)
        base = None
        for kind in ("mst", "mst++"):
            p = measure.tree_point(spec, topo, subs, kind, top)
            base = p.max_entries if base is None else base
            print(f"  {kind:>6}: max tree degree {p.max_tree_degree:>4}, max entries "
                  f"{p.max_entries:>7} (at {p.at}, tree degree {p.at_degree}), ratio to MST "
                  f"{p.max_entries / base:.2f}, {p.seconds:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--alphas", default="1,10,100")
    ap.add_argument("--packets", type=int, default=2000)
    ap.add_argument("--graphs", choices=("small", "both", "none"), default="small",
                    help="Fig. 15 graphs: 6,474/13,233 (small), also 26,475/106,762 (both)")
    ap.add_argument("--graph-hosts", type=int, default=500)
    ap.add_argument("--graph-subs", type=int, default=2000)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if sizes:
        fig13(spec, sizes, [int(x) for x in args.alphas.split(",")], args.seed, args.packets)
    graphs = {"small": [(6474, 13233)], "both": [(6474, 13233), (26475, 106762)], "none": []}
    if graphs[args.graphs]:
        fig15(spec, graphs[args.graphs], args.graph_hosts, args.graph_subs, args.top, args.seed)


if __name__ == "__main__":
    main()
