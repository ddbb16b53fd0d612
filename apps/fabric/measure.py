"""The routing measurements of the paper's §VIII-G, shared by `camus demo fabric` (plots) and
bench/routing.py (tables).

Workload: ITCH subscriptions `stock == S and price > P` (S one of 100 symbols, P uniform in
1..999, as bench/compile_itch.py), each owned by a random host; traffic: single Add Order
MoldUDP64 packets from random hosts with a random symbol and a price in 1..1100.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import networkx as nx

from compiler.ast import Rule
from compiler.compile import compile_rules, no_cyclic_gc
from compiler.spec import Spec
from controller.network import ChangeReport, Fabric, Network
from controller.policy import Subscription
from controller.spanning import spanning_tree
from controller.subscriptions import parse_subscriptions
from controller.topology import Topology
from switch.packet import mold_payload, udp_frame

SYMBOLS = [f"S{i:03d}" for i in range(100)]
LAYERS = ("tor", "aggregation", "core")


def subscriptions_text(hosts: list[str], n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(f'{rng.choice(hosts)}: stock == "{rng.choice(SYMBOLS)}" and '
                     f'price > {rng.randint(1, 999)}' for _ in range(n))


def subscriptions(spec: Spec, hosts: list[str], n: int, seed: int) -> list[Subscription]:
    with no_cyclic_gc():
        return parse_subscriptions(subscriptions_text(hosts, n, seed), spec)


def add_order(rng: random.Random) -> bytes:
    return (b"A" + bytes(4) + bytes(6) + rng.randint(1, 1 << 40).to_bytes(8, "big") + b"B"
            + (100).to_bytes(4, "big") + rng.choice(SYMBOLS).encode().ljust(8)
            + rng.randint(1, 1100).to_bytes(4, "big"))


def traffic(hosts: list[str], n: int, seed: int, udp_port: int = 1234) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    return [(rng.choice(hosts), udp_frame(mold_payload(b"SESSION001", i, [add_order(rng)]),
                                          dst_port=udp_port)) for i in range(n)]


def one_switch_entries(spec: Spec, topo: Topology, subs: list[Subscription]) -> int:
    """Baseline: every subscription on one switch, host i on port i + 1 (camus before routing)."""
    port = {h: i + 1 for i, h in enumerate(topo.hosts)}
    rules = [Rule(s.filter, frozenset((port[s.host],))) for s in subs]
    return compile_rules(spec, rules, static=True).stats["entries"]["total"]


@dataclass
class FatTreePoint:
    policy: str
    alpha: int
    per_layer: dict[str, tuple[int, int]]  # layer -> (sum, max)
    compile_seconds: float
    core_packets: int
    net: Network

    @property
    def total(self) -> int:
        return sum(v[0] for v in self.per_layer.values())

    @property
    def largest(self) -> int:
        return max(v[1] for v in self.per_layer.values())


def fat_tree_point(spec: Spec, topo: Topology, subs: list[Subscription], policy: str,
                   alpha: int, packets: list[tuple[str, bytes]]) -> FatTreePoint:
    net = Network(spec, topo, subs, policy, alpha)
    per = net.summary()["entries"]["per_layer"]
    fabric = Fabric.of(net)
    for host, frame in packets:
        fabric.inject(host, frame)
    core = sum(n for (a, b), (n, _) in fabric.links.items()
               if topo.layers.get(a) == "core" or topo.layers.get(b) == "core")
    return FatTreePoint(policy, alpha, {layer: (per[layer]["entries"], per[layer]["max"])
                                        for layer in LAYERS},
                        net.compile_seconds, core, net)


def change_costs(net: Network, n: int, seed: int) -> list[tuple[str, ChangeReport]]:
    """`n` changes, alternately adding a new subscription and removing it again, each
    written to a running fabric."""
    fabric = Fabric.of(net)
    hosts = list(net.topo.hosts)
    out = []
    for i in range((n + 1) // 2):
        sub = subscriptions(net.spec, hosts, 1, seed + i)[0]
        out.append(("add", net.add(sub, fabric)))
        if len(out) < n:
            out.append(("remove", net.remove(sub, fabric)))
    return out


def power_law_graph(nodes: int, edges: int, seed: int) -> nx.Graph:
    """Barabasi-Albert (preferential attachment: a power-law degree distribution) with m
    chosen so its edge count is just below `edges`, topped up with edges between nodes drawn
    in proportion to their degree: the SNAP AS graphs' node and edge counts, which this
    machine cannot download."""
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


def graph_topology(g: nx.Graph, n_hosts: int, seed: int) -> Topology:
    """Switches `s<v>` linked as `g`, and `n_hosts` hosts on random switches (TopologyError
    if a switch would need more ports than the data plane numbers)."""
    topo = Topology("graph")
    for v in g.nodes:
        topo.add_switch(f"s{v}", "switch")
    for a, b in g.edges:
        topo.link(f"s{a}", f"s{b}")
    rng = random.Random(seed)
    nodes = list(g.nodes)
    for i in range(n_hosts):
        topo.attach(f"h{i}", f"s{rng.choice(nodes)}")
    return topo


@dataclass
class TreePoint:
    kind: str
    max_tree_degree: int
    max_entries: int
    at: str
    at_degree: int
    seconds: float


def tree_point(spec: Spec, topo: Topology, subs: list[Subscription], kind: str, top: int) -> TreePoint:
    """The largest entry count among the `top` switches of highest degree in the tree (the
    switches that carry the most ports; compiling all thousands is out of reach here)."""
    import time

    started = time.perf_counter()
    tree = spanning_tree(topo.graph(), kind)
    hubs = sorted(tree.degree, key=lambda x: (-x[1], x[0]))[:top]
    net = Network(spec, topo, subs, "tr", 1, kind, switches=[s for s, _ in hubs])
    entries = {s: st["entries"]["total"] for s, st in net.stats.items()}
    worst = max(entries, key=entries.get)
    return TreePoint(kind, hubs[0][1], entries[worst], worst, dict(hubs)[worst],
                     time.perf_counter() - started)
