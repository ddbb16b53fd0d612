"""Networks of switches: fat trees and general graphs, with deterministic port numbers.

A `Topology` is switches (each in a layer), hosts (each attached to one switch port) and
links between switch ports. Port numbers are part of the topology, assigned once and
recorded (`to_json`), so that compiled entries, captures and reports all name the same
ports:

* fat tree of parameter k (`fat_tree(k)`, the paper's Figure 3 for k = 4): (k/2)^2 cores
  `c<i>`, k pods of k/2 aggregation switches `a<pod>_<i>` and k/2 ToRs `t<pod>_<i>`, k/2
  hosts per ToR `h<n>` (numbered across the tree). A ToR's ports 1..k/2 lead to its hosts
  and k/2+1..k to its pod's aggregation switches; an aggregation switch's ports 1..k/2
  lead to its pod's ToRs and k/2+1..k to its cores; core port p+1 leads to pod p. Ports
  above k/2 on ToRs and aggregation switches are the *up* ports.
* general graphs (`parse_graph(text)`): one link a line `A B`, a host `host H A`, `#`
  comments. A switch's ports are numbered from 1 in the order its links and hosts appear
  in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

# The data plane's egress ports are 9 bits (compiler.ast.MAX_PORT = 511); 511 itself is the
# logical "up" port of a fat-tree switch (controller.policy.UP_PORT).
MAX_PORT = 510


class TopologyError(ValueError):
    """A topology file or parameter that does not describe a network, with its line."""


@dataclass(frozen=True)
class Peer:
    """What a switch port leads to: a host, or a switch's port."""

    kind: str  # "host" | "switch"
    name: str
    port: int = 0  # the peer switch's port (0 for a host)


@dataclass
class Topology:
    kind: str  # "fattree" | "graph"
    layers: dict[str, str] = field(default_factory=dict)  # switch -> layer
    ports: dict[str, dict[int, Peer]] = field(default_factory=dict)  # switch -> port -> peer
    hosts: dict[str, tuple[str, int]] = field(default_factory=dict)  # host -> (switch, port)
    up: dict[str, tuple[int, ...]] = field(default_factory=dict)  # fat tree: switch -> up ports
    k: int | None = None

    # ---- building ---------------------------------------------------------------------

    def add_switch(self, name: str, layer: str) -> None:
        if name in self.hosts:
            raise TopologyError(f"{name!r} is already a host")
        self.layers.setdefault(name, layer)
        self.ports.setdefault(name, {})

    def _next_port(self, switch: str) -> int:
        port = len(self.ports[switch]) + 1
        if port > MAX_PORT:
            raise TopologyError(f"switch {switch!r} needs more than {MAX_PORT} ports")
        return port

    def link(self, a: str, b: str) -> None:
        if a == b:
            raise TopologyError(f"a link from {a!r} to itself")
        pa, pb = self._next_port(a), self._next_port(b)
        self.ports[a][pa] = Peer("switch", b, pb)
        self.ports[b][pb] = Peer("switch", a, pa)

    def attach(self, host: str, switch: str) -> None:
        if host in self.hosts:
            raise TopologyError(f"host {host!r} is attached twice")
        if host in self.layers:
            raise TopologyError(f"{host!r} is already a switch")
        port = self._next_port(switch)
        self.ports[switch][port] = Peer("host", host)
        self.hosts[host] = (switch, port)

    # ---- reading ----------------------------------------------------------------------

    @property
    def switches(self) -> list[str]:
        return list(self.layers)

    def links(self) -> list[tuple[str, int, str, int]]:
        """Every switch-to-switch link once, as (a, a_port, b, b_port) with a's side first
        in switch order."""
        order = {s: i for i, s in enumerate(self.layers)}
        out = []
        for s, ports in self.ports.items():
            for p, peer in ports.items():
                if peer.kind == "switch" and (order[s], p) < (order[peer.name], peer.port):
                    out.append((s, p, peer.name, peer.port))
        return out

    def graph(self) -> nx.Graph:
        """The switches and their links (hosts left out), each edge knowing its ports."""
        g = nx.Graph()
        g.add_nodes_from(self.layers)
        for a, pa, b, pb in self.links():
            g.add_edge(a, b, ports={a: pa, b: pb})
        return g

    def host_ports(self, switch: str) -> dict[int, str]:
        return {p: peer.name for p, peer in self.ports[switch].items() if peer.kind == "host"}

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "k": self.k,
            "switches": [{"name": s, "layer": layer, "ports": len(self.ports[s]),
                          "up_ports": list(self.up.get(s, ()))}
                         for s, layer in self.layers.items()],
            "links": [{"a": a, "a_port": pa, "b": b, "b_port": pb} for a, pa, b, pb in self.links()],
            "hosts": [{"name": h, "switch": s, "port": p} for h, (s, p) in self.hosts.items()],
        }

    @classmethod
    def from_json(cls, doc: dict) -> "Topology":
        t = cls(doc["kind"], k=doc.get("k"))
        for sw in doc["switches"]:
            t.layers[sw["name"]] = sw["layer"]
            t.ports[sw["name"]] = {}
            if sw.get("up_ports"):
                t.up[sw["name"]] = tuple(sw["up_ports"])
        for link in doc["links"]:
            a, pa, b, pb = link["a"], link["a_port"], link["b"], link["b_port"]
            t.ports[a][pa] = Peer("switch", b, pb)
            t.ports[b][pb] = Peer("switch", a, pa)
        for h in doc["hosts"]:
            t.ports[h["switch"]][h["port"]] = Peer("host", h["name"])
            t.hosts[h["name"]] = (h["switch"], h["port"])
        for ports in t.ports.values():  # port order as numbered, whatever the JSON order
            ordered = dict(sorted(ports.items()))
            ports.clear()
            ports.update(ordered)
        return t


def fat_tree(k: int) -> Topology:
    """The k-ary fat tree (k even, 2 <= k <= 64), numbered as the module docstring says."""
    if k < 2 or k % 2 or k > 64:
        raise TopologyError(f"a fat tree needs an even k between 2 and 64, not {k}")
    half = k // 2
    t = Topology("fattree", k=k)
    cores = [f"c{i}" for i in range(half * half)]
    for c in cores:
        t.add_switch(c, "core")
    pods = []
    for pod in range(k):
        aggs = [f"a{pod}_{i}" for i in range(half)]
        tors = [f"t{pod}_{i}" for i in range(half)]
        for a in aggs:
            t.add_switch(a, "aggregation")
        for tor in tors:
            t.add_switch(tor, "tor")
        pods.append((aggs, tors))
    host = 0
    for aggs, tors in pods:  # ToR ports: hosts 1..k/2, then aggregation switches
        for tor in tors:
            for _ in range(half):
                t.attach(f"h{host}", tor)
                host += 1
    for aggs, tors in pods:  # aggregation ports: ToRs 1..k/2, then cores
        for tor in tors:
            for a in aggs:
                _link_ports(t, a, len(t.ports[a]) + 1, tor, len(t.ports[tor]) + 1)
    for pod, (aggs, _) in enumerate(pods):  # core port p+1 leads to pod p
        for i, a in enumerate(aggs):
            for j in range(half):
                _link_ports(t, a, len(t.ports[a]) + 1, cores[i * half + j], pod + 1)
    for s, layer in t.layers.items():
        if layer != "core":
            t.up[s] = tuple(range(half + 1, k + 1))
    return t


def _link_ports(t: Topology, a: str, pa: int, b: str, pb: int) -> None:
    t.ports[a][pa] = Peer("switch", b, pb)
    t.ports[b][pb] = Peer("switch", a, pa)


def parse_graph(text: str, source: str = "<graph>") -> Topology:
    """A general graph: `A B` links, `host H A` attachments, `#` comments."""
    t = Topology("graph")
    seen: set[frozenset[str]] = set()
    for lineno, raw in enumerate(text.split("\n"), start=1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        try:
            if words[0] == "host":
                if len(words) != 3:
                    raise TopologyError("expected `host HOST SWITCH`")
                t.add_switch(words[2], "switch")
                t.attach(words[1], words[2])
            elif len(words) == 2:
                a, b = words
                if frozenset((a, b)) in seen:
                    raise TopologyError(f"link {a} {b} is listed twice")
                seen.add(frozenset((a, b)))
                t.add_switch(a, "switch")
                t.add_switch(b, "switch")
                t.link(a, b)
            else:
                raise TopologyError("expected `A B` (a link) or `host HOST SWITCH`")
        except TopologyError as exc:
            raise TopologyError(f"{source}:{lineno}: {exc}") from None
    if not t.layers:
        raise TopologyError(f"{source}: no switches")
    return t


def format_graph(t: Topology) -> str:
    """The graph file that `parse_graph` reads back into `t`'s switches, links and hosts
    (port numbers may differ: the file only fixes their order)."""
    lines = [f"{a} {b}" for a, _, b, _ in t.links()]
    lines += [f"host {h} {s}" for h, (s, _) in t.hosts.items()]
    return "\n".join(lines) + "\n"
