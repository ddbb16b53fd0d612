"""Spanning trees for routing on general graphs (the paper's §IV-D and Figure 15).

Subscriptions are routed on a spanning tree of the switch graph, found by Prim's algorithm
(networkx's `minimum_spanning_tree(algorithm="prim")`, a spanning forest if the graph is
not connected):
  * MST: unit weights, so any spanning tree; Prim grows it from the first switch.
  * MST++: w(u, v) = deg(u) * deg(v), so links between high-degree switches are avoided and
    no switch ends up carrying the whole network's subscriptions on many ports.
Each tree edge splits the hosts in two; a tree port carries the subscriptions of the hosts
on its far side (`tree_sides`), which `controller.policy.Routing` turns into filter sets.
"""

from __future__ import annotations

import networkx as nx

from controller.topology import Topology

TREES = ("mst", "mst++")


def spanning_tree(g: nx.Graph, kind: str = "mst++") -> nx.Graph:
    """The routing tree of the switch graph `g` (edges keep their `ports` attribute)."""
    if kind not in TREES:
        raise ValueError(f"unknown tree {kind!r} (one of {', '.join(TREES)})")
    w = nx.Graph()
    w.add_nodes_from(g.nodes)
    deg = dict(g.degree)
    for u, v, data in g.edges(data=True):
        weight = 1 if kind == "mst" else deg[u] * deg[v]
        w.add_edge(u, v, weight=weight, ports=data.get("ports"))
    return nx.minimum_spanning_tree(w, algorithm="prim")


def tree_sides(topo: Topology, tree: nx.Graph) -> dict[str, dict[int, frozenset[str]]]:
    """Per switch, per port: the hosts whose subscriptions the port carries (a host port:
    that host; a tree port: the hosts beyond it; other ports: absent)."""
    hosts_at: dict[str, set[str]] = {s: set() for s in topo.switches}
    for h, (s, _) in topo.hosts.items():
        hosts_at[s].add(h)
    below: dict[str, frozenset[str]] = {}
    parent: dict[str, str | None] = {}
    component_hosts: dict[str, frozenset[str]] = {}
    for component in nx.connected_components(tree):
        root = next(s for s in topo.switches if s in component)  # deterministic
        order = list(nx.dfs_preorder_nodes(tree, root))
        parent[root] = None
        for u, v in nx.dfs_edges(tree, root):
            parent[v] = u
        for s in reversed(order):  # children before parents
            acc = set(hosts_at[s])
            for c in tree.neighbors(s):
                if parent.get(c) == s:
                    acc |= below[c]
            below[s] = frozenset(acc)
        everyone = below[root]
        for s in component:
            component_hosts[s] = everyone
    out: dict[str, dict[int, frozenset[str]]] = {}
    for s in topo.switches:
        sides: dict[int, frozenset[str]] = {}
        for p, peer in topo.ports[s].items():
            if peer.kind == "host":
                sides[p] = frozenset((peer.name,))
            elif tree.has_edge(s, peer.name):
                n = peer.name
                sides[p] = below[n] if parent.get(n) == s else component_hosts[s] - below[s]
        out[s] = sides
    return out
