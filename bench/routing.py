"""Benchmark: routing on networks of switches, the paper's §VIII-G (Figures 13-15).

Workload: the ITCH subscriptions of bench/compile_itch.py, `stock == S and price > P`, S one
of 100 symbols, P uniform in 1..999, each owned by a random host (fixed seed). Prints:

  1. entries per layer of a k = 4 fat tree, MR vs TR, for each subscription count (Fig. 13a/b);
     baseline: the same subscriptions on one switch with one port per host (camus before
     this issue), and the ratio of the network's largest switch to it;
  2. for alpha in {1, 10, 100}: entries per layer and the packets crossing core links for
     the same random traffic (Fig. 13c/d); baseline alpha = 1, ratios;
  3. one subscription added and removed: switches recompiled, entries written, seconds
     (Fig. 14); baseline: compiling the whole network;
  4. MST vs MST++ on power-law graphs with the AS graphs' node and edge counts (Fig. 15):
     the largest entry count among the switches of highest tree degree.

    python bench/routing.py [--sizes 1000,10000,100000] [--alphas 1,10,100] [--graphs small|both|none]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages, as bench/compile_itch.py says

import networkx as nx  # noqa: E402

from compiler.ast import Rule  # noqa: E402
from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.spec import load_spec  # noqa: E402
from controller.network import Fabric, Network  # noqa: E402
from controller.spanning import spanning_tree  # noqa: E402
from controller.subscriptions import parse_subscriptions  # noqa: E402
from controller.topology import Topology, TopologyError, fat_tree  # noqa: E402
from switch.packet import mold_payload, udp_frame  # noqa: E402

SYMBOLS = [f"S{i:03d}" for i in range(100)]
LAYERS = ("tor", "aggregation", "core")


def subscriptions(hosts: list[str], n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(f'{rng.choice(hosts)}: stock == "{rng.choice(SYMBOLS)}" and '
                     f'price > {rng.randint(1, 999)}' for _ in range(n))


def add_order(rng: random.Random) -> bytes:
    return (b"A" + bytes(4) + bytes(6) + rng.randint(1, 1 << 40).to_bytes(8, "big") + b"B"
            + (100).to_bytes(4, "big") + rng.choice(SYMBOLS).encode().ljust(8)
            + rng.randint(1, 1100).to_bytes(4, "big"))


def traffic(hosts: list[str], n: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    return [(rng.choice(hosts), udp_frame(mold_payload(b"SESSION001", i, [add_order(rng)]),
                                          dst_port=1234)) for i in range(n)]


def layer_entries(net: Network) -> dict[str, tuple[int, int]]:
    per = net.summary()["entries"]["per_layer"]
    return {layer: (per[layer]["entries"], per[layer]["max"]) for layer in LAYERS}


def core_packets(net: Network, packets) -> int:
    fabric = Fabric.of(net)
    for host, frame in packets:
        fabric.inject(host, frame)
    return sum(n for (a, b), (n, _) in fabric.links.items() if a[0] == "c" or b[0] == "c")


def fig13(spec, sizes: list[int], alphas: list[int], seed: int, n_packets: int) -> None:
    topo = fat_tree(4)
    hosts = list(topo.hosts)
    packets = traffic(hosts, n_packets, seed + 1)
    print("== 1. entries per layer, k = 4 fat tree (Fig. 13a/b) ==")
    print(f"{'subs':>7} {'policy':>6} {'alpha':>5} | {'ToR sum/max':>15} {'agg sum/max':>15} "
          f"{'core sum/max':>15} | {'total':>8} {'1 switch':>8} {'max/1sw':>7} | "
          f"{'compile s':>9} {'core pkts':>9} {'vs a=1':>6}")
    for n in sizes:
        with no_cyclic_gc():
            subs = parse_subscriptions(subscriptions(hosts, n, seed), spec)
        # Baseline: every subscription on one switch, host i on port i + 1.
        port = {h: i + 1 for i, h in enumerate(hosts)}
        one = compile_rules(spec, [Rule(s.filter, frozenset((port[s.host],))) for s in subs],
                            static=True).stats["entries"]["total"]
        for policy in ("mr", "tr"):
            base_core = None
            for alpha in alphas:
                net = Network(spec, topo, subs, policy, alpha)
                per = layer_entries(net)
                total = sum(v[0] for v in per.values())
                biggest = max(v[1] for v in per.values())
                core = core_packets(net, packets)
                base_core = core if base_core is None else base_core
                cells = " ".join(f"{f'{a}/{m}':>15}" for a, m in per.values())
                print(f"{n:>7} {policy:>6} {alpha:>5} | {cells} | {total:>8} {one:>8} "
                      f"{biggest / one:>7.2f} | {net.compile_seconds:>9.2f} {core:>9} "
                      f"{core / base_core if base_core else 1:>6.2f}", flush=True)
                if alpha == alphas[-1] or n == sizes[-1]:
                    fig14(net, subs, hosts, seed)


def fig14(net: Network, subs, hosts, seed: int) -> None:
    """One subscription added then removed; the whole network's compile time as baseline."""
    rng = random.Random(seed + 2)
    new = parse_subscriptions(subscriptions(hosts, 1, rng.randint(0, 1 << 30)), net.spec)[0]
    fabric = Fabric.of(net)
    add = net.add(new, fabric)
    remove = net.remove(new, fabric)
    for what, r in (("add", add), ("remove", remove)):
        print(f"        change: {what} one subscription ({new.host}): {len(r.switches)} switches "
              f"recompiled, {r.writes} writes, {r.seconds * 1000:.1f} ms; whole network "
              f"{net.compile_seconds * 1000:.0f} ms, ratio {r.seconds / net.compile_seconds:.3f}")


def power_law_graph(nodes: int, edges: int, seed: int) -> nx.Graph:
    """Barabasi-Albert (preferential attachment, a power-law degree distribution) with m
    chosen so its edge count is just below `edges`, topped up with edges between nodes
    drawn in proportion to their degree: the SNAP AS graphs' node and edge counts."""
    m = max(1, edges // nodes)
    g = nx.barabasi_albert_graph(nodes, m, seed=seed)
    rng = random.Random(seed)
    ends = [u for e in g.edges for u in e]
    while g.number_of_edges() < edges:
        a, b = rng.choice(ends), rng.choice(ends)
        if a != b and not g.has_edge(a, b):
            g.add_edge(a, b)
            ends += [a, b]
    return g


def fig15(spec, sizes: list[tuple[int, int]], n_hosts: int, n_subs: int, top: int, seed: int) -> None:
    print(f"== 4. MST vs MST++ on power-law graphs (Fig. 15): {n_hosts} hosts on random switches, "
          f"{n_subs} subscriptions; max entries over the {top} switches of highest tree degree ==")
    for nodes, edges in sizes:
        g = power_law_graph(nodes, edges, seed)
        topo = Topology("graph")
        for v in g.nodes:
            topo.add_switch(f"s{v}", "switch")
        try:
            for a, b in g.edges:
                topo.link(f"s{a}", f"s{b}")
            rng = random.Random(seed)
            for i in range(n_hosts):
                topo.attach(f"h{i}", f"s{rng.randrange(nodes)}")
        except TopologyError as exc:
            print(f"  {nodes} nodes / {edges} edges: skipped ({exc})")
            continue
        degrees = sorted((d for _, d in g.degree), reverse=True)
        print(f"  graph {nodes} nodes / {g.number_of_edges()} edges, max degree {degrees[0]}")
        with no_cyclic_gc():
            subs = parse_subscriptions(subscriptions(list(topo.hosts), n_subs, seed), spec)
        base = None
        for kind in ("mst", "mst++"):
            t0 = time.perf_counter()
            tree = spanning_tree(topo.graph(), kind)
            hubs = sorted(tree.degree, key=lambda x: (-x[1], x[0]))[:top]
            net = Network(spec, topo, subs, "tr", 1, kind, switches=[s for s, _ in hubs])
            entries = {s: st["entries"]["total"] for s, st in net.stats.items()}
            worst = max(entries, key=entries.get)
            base = entries[worst] if base is None else base
            print(f"  {kind:>6}: max tree degree {hubs[0][1]:>4}, max entries {entries[worst]:>7} "
                  f"(at {worst}, tree degree {dict(hubs)[worst]}), ratio to MST "
                  f"{entries[worst] / base:.2f}, {time.perf_counter() - t0:.1f} s", flush=True)


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
