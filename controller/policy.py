"""Routing policies (the paper's Algorithm 1): which filters each switch port carries.

For every switch s and port p, a filter set F_p^s: a packet leaves s by p when one of them
holds. The invariants (tests/controller/test_network.py checks them on packets):
  * soundness: a port that leads to a host carries exactly that host's subscriptions;
  * completeness: every port carries a superset of what the hosts behind it want;
  * a packet never leaves by the port it came in on, and on a fat tree, a packet that came
    in on an up port never goes up again (the data path: `controller.network`).

Fat trees (`Topology.kind == "fattree"`): the up ports of a ToR or aggregation switch are
one logical port, `UP_PORT` in its rules (one physical up port is chosen per packet, by a
hash of its bytes, when it leaves). A down port carries the subscriptions of the hosts
below it. The up port carries, under
  * MR (memory): `true`, so an up-going packet climbs to a core whatever it holds;
  * TR (traffic): exactly the subscriptions of the hosts that are not below the switch.
General graphs route on a spanning tree (`controller.spanning`): a tree port carries the
subscriptions of the hosts on the far side of that tree edge (as TR does), other ports
nothing.

Approximation: a port that leads to a switch carries its filters approximated to α
(`compiler.approximate`); equal approximations collapse into one filter, which is the
saving. Host-facing ports stay exact.

A `Routing` keeps, per switch and port, the multiset of filters it carries (how many
subscriptions gave each), so adding or removing one subscription tells at once which
filters appeared on or went from which switch ports (`add` / `remove` return them), without
rebuilding the rest.

Size: on a fat tree nearly every port carries nearly every host (a TR up port: all hosts but
those below; a core's down port: a whole pod), so neither a port's hosts nor a host's ports
are written out: an up port keeps the hosts it does *not* carry (`AllBut`), and the ports
that carry a host are found when one of its subscriptions comes or goes (`carriers`), by
climbing from its ToR. What the routing holds grows as k^3 (the hosts), not k^5.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

from compiler.approximate import approximate
from compiler.ast import Const, Filter, Rule
from controller.spanning import tree_sides
from controller.topology import Topology
from switch.fabric_egress import LOGICAL_UP

UP_PORT = LOGICAL_UP  # the logical up port of a fat-tree switch, in its rules and entries
POLICIES = ("mr", "tr")
TRUE = Const(True)


@dataclass(frozen=True)
class Subscription:
    host: str
    filter: Filter
    text: str = ""


@dataclass(frozen=True)
class AllBut:
    """The hosts a fat-tree TR up port carries: every host except `below` (those under its
    switch). `host in AllBut(...)` answers as the set would."""

    below: frozenset[str]

    def __contains__(self, host: object) -> bool:
        return host not in self.below


class Routing:
    """Filter sets per switch port for one topology, policy, α and (for graphs) tree."""

    def __init__(self, topo: Topology, subscriptions: Iterable[Subscription], policy: str = "tr",
                 alpha: int = 1, tree: nx.Graph | None = None, only: Iterable[str] | None = None):
        """`only`: keep filter sets for these switches alone (the others' are never
        asked for: the AS-sized benchmark compiles a few of thousands of switches)."""
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r} (one of {', '.join(POLICIES)})")
        if topo.kind != "fattree" and tree is None:
            raise ValueError("a general graph routes on a spanning tree: pass tree=")
        self.topo, self.policy, self.alpha, self.tree = topo, policy, alpha, tree
        self._below: dict[str, frozenset[str]] = {}
        self._sets: dict[frozenset[str], frozenset[str]] = {}  # one object for equal sets
        if tree is not None:
            self._tree_sides = tree_sides(topo, tree)
        # sides[s][p]: the hosts whose subscriptions port p of s carries (None: `true`).
        kept = topo.switches if only is None else [s for s in topo.switches if s in set(only)]
        self.sides: dict[str, dict[int, frozenset[str] | AllBut | None]] = {
            s: self._sides(s) for s in kept}
        # General graphs: which (switch, port) carry a host's subscriptions, found once (a
        # fat tree's are found per change, `carriers`).
        self._carriers: dict[str, list[tuple[str, int]]] = {}
        if topo.kind != "fattree":
            self._carriers = {h: [] for h in topo.hosts}
            for s, ports in self.sides.items():
                for p, hosts in ports.items():
                    for h in hosts or ():
                        self._carriers[h].append((s, p))
        # counts[s][p]: the filters port p of s carries, each with how many subscriptions
        # gave it; a port that carries none has no Counter.
        self.counts: dict[str, dict[int, Counter]] = {s: {} for s in self.sides}
        self._approx: dict[Filter, Filter] = {}
        self.subscriptions: dict[str, Counter] = {h: Counter() for h in topo.hosts}
        for sub in subscriptions:
            self.add(sub)

    # ---- the sides of each port -------------------------------------------------------

    def _sides(self, s: str) -> dict[int, frozenset[str] | AllBut | None]:
        topo = self.topo
        out: dict[int, frozenset[str] | AllBut | None] = {}
        if topo.kind == "fattree":
            up = topo.up.get(s, ())
            for p, peer in topo.ports[s].items():
                if p in up:
                    continue
                out[p] = frozenset((peer.name,)) if peer.kind == "host" else self.below(peer.name)
            if up:
                out[UP_PORT] = None if self.policy == "mr" else AllBut(self.below(s))
            return out
        return self._tree_sides[s]

    def carriers(self, host: str) -> list[tuple[str, int]]:
        """The (switch, port) pairs whose filter sets hold `host`'s subscriptions. On a fat
        tree: climbing from the host by up ports, the port each switch reached leads down
        by; then, under TR, the up port of every other switch that has one."""
        if self.topo.kind != "fattree":
            return self._carriers[host]
        topo, out = self.topo, []
        switch, port = topo.hosts[host]
        above = {switch}  # the switches the host is below
        if switch in self.sides:
            out.append((switch, port))
        climb = [switch]
        while climb:
            lower = climb.pop()
            for q in topo.up.get(lower, ()):
                peer = topo.ports[lower][q]
                if peer.name not in above:
                    above.add(peer.name)
                    climb.append(peer.name)
                if peer.name in self.sides:
                    out.append((peer.name, peer.port))
        if self.policy == "tr":
            out += [(s, UP_PORT) for s in self.sides if s not in above and topo.up.get(s)]
        return out

    def below(self, s: str) -> frozenset[str]:
        """Fat tree: the hosts reachable from s through down ports only."""
        got = self._below.get(s)
        if got is None:
            up = self.topo.up.get(s, ())
            hosts: set[str] = set()
            for p, peer in self.topo.ports[s].items():
                if p not in up:
                    hosts |= {peer.name} if peer.kind == "host" else self.below(peer.name)
            # One set for equal ones: a pod's aggregation switches all have the pod below.
            got = frozenset(hosts)
            got = self._below[s] = self._sets.setdefault(got, got)
        return got

    # ---- filter sets --------------------------------------------------------------------

    def host_facing(self, s: str, p: int) -> bool:
        return p != UP_PORT and self.topo.ports[s][p].kind == "host"

    def _carried(self, s: str, p: int, f: Filter) -> Filter:
        if self.alpha == 1 or self.host_facing(s, p):
            return f
        a = self._approx.get(f)
        if a is None:
            a = self._approx[f] = approximate(f, self.alpha)
        return a

    def add(self, sub: Subscription) -> dict[str, list[tuple[Filter, int]]]:
        """Add one subscription. Per switch whose filter sets changed, the (filter, port)
        pairs that appeared (a filter already on a port, given by another subscription or
        equal once rounded, changes nothing there)."""
        if sub.host not in self.subscriptions:
            raise ValueError(f"no host {sub.host!r} in the topology")
        self.subscriptions[sub.host][sub.filter] += 1
        changed: dict[str, list[tuple[Filter, int]]] = {}
        for s, p in self.carriers(sub.host):
            c = self.counts[s].get(p)
            if c is None:
                c = self.counts[s][p] = Counter()
            f = self._carried(s, p, sub.filter)
            c[f] += 1
            if c[f] == 1:
                changed.setdefault(s, []).append((f, p))
        return changed

    def remove(self, sub: Subscription) -> dict[str, list[tuple[Filter, int]]]:
        """Remove one subscription (KeyError if the host has none equal to it). Per switch
        whose filter sets changed, the (filter, port) pairs that went."""
        held = self.subscriptions.get(sub.host)
        if not held or not held[sub.filter]:
            raise KeyError(f"host {sub.host!r} has no subscription {sub.text or sub.filter!r}")
        held[sub.filter] -= 1
        if not held[sub.filter]:
            del held[sub.filter]
        changed: dict[str, list[tuple[Filter, int]]] = {}
        for s, p in self.carriers(sub.host):
            c = self.counts[s][p]
            f = self._carried(s, p, sub.filter)
            c[f] -= 1
            if not c[f]:
                del c[f]
                if not c:
                    del self.counts[s][p]
                changed.setdefault(s, []).append((f, p))
        return changed

    def filter_set(self, s: str, p: int) -> list[Filter]:
        """F_p^s: the filters port p of s carries ([TRUE] for an MR up port)."""
        if self.sides[s][p] is None:
            return [TRUE]
        return list(self.counts[s].get(p, ()))

    def ports_of(self, s: str, f: Filter) -> frozenset[int]:
        """The ports of s whose filter sets hold `f` (the ports of its rule `f : fwd(...)`)."""
        counts = self.counts[s]
        return frozenset(p for p, hosts in self.sides[s].items()
                         if (f == TRUE if hosts is None else f in counts.get(p, ())))

    def rules(self, s: str) -> list[Rule]:
        """`F_p^s : fwd(p)` for every port, one rule per distinct filter with all its ports."""
        ports_of: dict[Filter, set[int]] = {}
        for p in self.sides[s]:
            for f in self.filter_set(s, p):
                ports_of.setdefault(f, set()).add(p)
        return [Rule(f, frozenset(ps)) for f, ps in ports_of.items()]

    def wants(self, host: str) -> list[Filter]:
        """The host's own subscriptions (what it must receive, exactly)."""
        return list(self.subscriptions[host])
