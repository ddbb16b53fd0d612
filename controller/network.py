"""A network of switches compiled from one subscription set, and the network running.

`Network` is the controller's view: a topology, a routing policy (`controller.policy`),
and per switch the rules `F_p^s : fwd(p)` compiled with a static pipeline (every switch runs
the same pipeline and differs only in its entries). Each switch's rules are held by an
incremental compiler (`compiler.incremental.Incremental`, whose entries are those of a
from-scratch `compile_rules`): a subscription added or removed becomes, per switch where a
filter appeared on or went from a port, the rule `F : fwd(ports)` replaced by the one with
the new ports, and only the entry writes that change needs go to the running fabric. A link
or switch failing on a general graph (a new spanning tree, which moves whole port sides)
rebuilds each switch whose rules changed and writes the difference (`controller.diff`).
Each change returns a `ChangeReport`. `incremental=False` keeps the whole-switch recompile
(`compile_rules` and a diff) for every change: the baseline bench/network_change.py
measures against.

`Fabric` is the network running in one process: one software switch (`switch.dataplane`)
per switch, and packets forwarded hop by hop. What a switch's pipeline cannot know (its
ingress port, which up port to take) is decided at each switch's egress by
`switch.fabric_egress.FabricEgress`, as `camus switch serve --fabric` does for a switch
running as a process.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from compiler.ast import Rule
from compiler.compile import compile_rules, no_cyclic_gc
from compiler.errors import RuleError
from compiler.incremental import Incremental
from compiler.spec import Spec
from controller.diff import Changes, apply_steps, diff
from controller.policy import UP_PORT, Routing, Subscription
from controller.spanning import spanning_tree
from controller.memory import too_large
from controller.topology import Topology, TopologyError
from pipeline import document, entries as entries_json
from switch import dataplane
from switch.fabric_egress import FabricEgress

NETWORK_VERSION = 1


@dataclass
class ChangeReport:
    """What one change cost: switches recompiled, entries written, and the time taken."""

    switches: list[str] = field(default_factory=list)  # switches whose entries changed
    # Switches whose rules changed (a filter appeared on or went from a port; a failure's
    # new tree): those the change compiled, incrementally or whole.
    reached: list[str] = field(default_factory=list)
    writes: int = 0  # table entries inserted, modified or deleted, and groups set or deleted
    entries_per_switch: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"switches": self.switches, "reached": self.reached, "writes": self.writes,
                "writes_per_switch": self.entries_per_switch, "seconds": round(self.seconds, 6)}


class Network:
    """Topology + policy + subscriptions, compiled per switch."""

    def __init__(self, spec: Spec, topo: Topology, subscriptions: Iterable[Subscription],
                 policy: str = "tr", alpha: int = 1, tree: str = "mst++",
                 switches: Iterable[str] | None = None,
                 compiled: dict[str, tuple[dict, dict]] | None = None,
                 failed: dict | None = None, incremental: bool = True):
        """`switches`: compile only these (the benchmark on AS-sized graphs); default all.
        `compiled`: per switch, the (entries.json, stats) it already holds (a network read
        back from its directory, `load`): nothing is compiled then, and a switch's
        incremental compiler is built when a change first reaches it. `failed`: the links
        and switches already down ({"links": [[a, b], ...], "switches": [...]}).
        `incremental`: changes go through each switch's incremental compiler (default), or
        recompile the switch whole (the old way, kept as the benchmark's baseline).
        TopologyError: a network this process has not the memory for (`controller.memory`)."""
        size = len(topo.switches) if switches is None else len(set(switches))
        why = too_large(f"fattree:{topo.k}" if topo.kind == "fattree" else "the graph", size,
                        len(topo.hosts))
        if why:
            raise TopologyError(why)
        self.spec, self.topo, self.policy, self.alpha, self.tree_kind = \
            spec, topo, policy, alpha, tree
        self.incremental = incremental
        self.compilers: dict[str, Incremental] = {}  # switch -> its rules, compiled
        self._stale: set[str] = set()  # switches whose documents lag their compiler
        switches = list(switches) if switches is not None else None
        failed = failed or {}
        self.failed_links: set[frozenset[str]] = {frozenset(link) for link in failed.get("links", ())}
        self.failed_switches: set[str] = set(failed.get("switches", ()))
        self.tree = None if topo.kind == "fattree" else spanning_tree(self._live_graph(), tree)
        subs = list(subscriptions)
        with no_cyclic_gc():
            self.routing = Routing(topo, subs, policy, alpha, self.tree, switches)
        self.pipeline = compile_rules(spec, [], static=True).pipeline
        self.pipeline_doc = json.loads(document.dumps(self.pipeline))
        self._compiled: dict[str, dict] = {}  # switch -> entries.json
        self._stats: dict[str, dict] = {}
        started = time.perf_counter()
        for s in (switches if switches is not None else topo.switches):
            if compiled is not None:
                self._compiled[s], self._stats[s] = compiled[s]
            else:
                self._compile(s)
        self.compile_seconds = time.perf_counter() - started

    @classmethod
    def load(cls, directory: str | Path, spec: Spec, subscriptions: Iterable[Subscription]) -> "Network":
        """The network `write` wrote to `directory`, holding the entries written there, with
        the subscriptions it was compiled from (recompiling nothing)."""
        d = Path(directory)
        doc = json.loads((d / "network.json").read_text())
        if doc.get("camus_network") != NETWORK_VERSION:
            raise ValueError(f"{d / 'network.json'}: not a camus network (version {NETWORK_VERSION})")
        topo = Topology.from_json(doc)
        compiled = {s: (json.loads((d / "switches" / s / "entries.json").read_text()),
                        json.loads((d / "switches" / s / "stats.json").read_text()))
                    for s in topo.switches}
        tree = doc.get("tree", {}).get("kind", "mst++")
        return cls(spec, topo, subscriptions, doc["policy"], doc["alpha"], tree, compiled=compiled,
                   failed=doc.get("failed"))

    def _live_graph(self):
        g = self.topo.graph()
        g.remove_edges_from([tuple(e) for e in self.failed_links if len(e) == 2])
        g.remove_nodes_from(self.failed_switches)
        return g

    @property
    def compiled(self) -> dict[str, dict]:
        """Per switch, the entries.json it holds (made from its compiler when asked for:
        a change writes entries, not documents)."""
        self._refresh()
        return self._compiled

    @property
    def stats(self) -> dict[str, dict]:
        """Per switch, its compile statistics (those of `camus compile`'s stats.json)."""
        self._refresh()
        return self._stats

    def _refresh(self) -> None:
        for s in self._stale:
            inc = self.compilers[s]
            self._compiled[s] = inc.entries()
            self._stats[s] = self._stats_of(inc, self._stats.get(s, {}).get("compile_seconds", 0.0))
        self._stale.clear()

    @staticmethod
    def _stats_of(inc: Incremental, seconds: float) -> dict:
        st = inc.stats()
        st["compile_seconds"] = seconds  # of the switch's last whole compile
        return st

    def _compile(self, s: str) -> dict:
        """Compile switch s whole from its current rules; its new entries.json."""
        rules = self.routing.rules(s)
        if not self.incremental:
            c = compile_rules(self.spec, rules, static=True)
            self._compiled[s], self._stats[s] = c.entries, c.stats
            return c.entries
        started = time.perf_counter()
        self._stale.discard(s)
        try:
            with no_cyclic_gc():
                inc = self.compilers[s] = Incremental(self.spec, rules, static=True)
        except RuleError:  # a filter too wide for it (a formula): this switch compiles whole
            self.compilers.pop(s, None)
            c = compile_rules(self.spec, rules, static=True)
            self._compiled[s], self._stats[s] = c.entries, c.stats
            return c.entries
        self._compiled[s] = inc.entries()
        self._stats[s] = self._stats_of(inc, round(time.perf_counter() - started, 4))
        return self._compiled[s]

    # ---- changes ------------------------------------------------------------------------

    def add(self, sub: Subscription, fabric: "Fabric | None" = None) -> ChangeReport:
        """Add one subscription; its writes go to `fabric` if given."""
        started = time.perf_counter()
        with no_cyclic_gc():
            return self._change(self.routing.add(sub), +1, fabric, started)

    def remove(self, sub: Subscription, fabric: "Fabric | None" = None) -> ChangeReport:
        """Remove one subscription (KeyError if its host has none equal to it)."""
        started = time.perf_counter()
        with no_cyclic_gc():
            return self._change(self.routing.remove(sub), -1, fabric, started)

    def _change(self, moved: dict[str, list], sign: int, fabric: "Fabric | None",
                started: float) -> ChangeReport:
        """Apply the (filter, port) pairs that appeared (sign +1) or went (-1) per switch."""
        if not self.incremental:
            return self._recompile(set(moved), fabric, started)
        report = ChangeReport()
        for s in sorted(moved):
            if s not in self._compiled:
                continue  # a switch this network does not compile (`switches=`)
            report.reached.append(s)
            inc = self.compilers.get(s)
            d = None
            if inc is not None:
                try:
                    d = self._step(s, inc, moved[s], sign)
                except RuleError:  # a filter too wide for it: refused before it changed
                    self.compilers.pop(s)
            if d is None:  # read back from a directory, or a wide filter: compiled whole
                old = self.compiled[s]
                d = diff(old, self._compile(s))
            self._apply(s, d, report, fabric)
        report.seconds = time.perf_counter() - started
        return report

    def _step(self, s: str, inc: Incremental, pairs: list, sign: int) -> Changes:
        """The writes of switch s's incremental compile once `pairs` appeared or went: each
        filter's rule `F : fwd(old ports)` gives way to `F : fwd(new ports)`."""
        moved_ports: dict = {}
        for f, p in pairs:
            moved_ports.setdefault(f, set()).add(p)
        added, removed = [], []
        for f, ps in moved_ports.items():
            now = self.routing.ports_of(s, f)
            before = now - ps if sign > 0 else now | ps
            if before:
                removed.append(Rule(f, before))
            if now:
                added.append(Rule(f, now))
        step = inc.change(added, removed)  # a Step: the Changes to write
        self._stale.add(s)
        return step

    def _apply(self, s: str, d: Changes, report: ChangeReport, fabric: "Fabric | None") -> None:
        if not len(d):
            return
        report.switches.append(s)
        report.entries_per_switch[s] = len(d)
        report.writes += len(d)
        if fabric is not None:
            fabric.apply(s, d)

    def fail(self, link: tuple[str, str] | None = None, switch: str | None = None,
             fabric: "Fabric | None" = None) -> ChangeReport:
        """A link or a switch goes down (general graphs): a new tree, and only the switches
        whose rules differ on it are rewritten."""
        if self.topo.kind == "fattree":
            raise ValueError("failures are handled on general graphs (spanning trees)")
        started = time.perf_counter()
        if link is not None:
            if not self.topo.graph().has_edge(*link):
                raise ValueError(f"no link {link[0]} {link[1]}")
            self.failed_links.add(frozenset(link))
        if switch is not None:
            if switch not in self.topo.layers:
                raise ValueError(f"no switch {switch!r}")
            self.failed_switches.add(switch)
        self.tree = spanning_tree(self._live_graph(), self.tree_kind)
        old = self.routing
        before = {s: frozenset(old.rules(s)) for s in self._compiled}
        subs = [Subscription(h, f) for h, c in old.subscriptions.items() for f, n in c.items()
                for _ in range(n)]
        with no_cyclic_gc():
            self.routing = Routing(self.topo, subs, self.policy, self.alpha, self.tree,
                                   list(self._compiled))
        changed = {s for s in self._compiled if frozenset(self.routing.rules(s)) != before[s]}
        return self._recompile(changed, fabric, started)

    def _recompile(self, changed: set[str], fabric: "Fabric | None", started: float) -> ChangeReport:
        """Compile each switch of `changed` whole and write the difference: a failure's
        new tree (which moves whole sides of ports), and every change with
        `incremental=False`."""
        report = ChangeReport()
        for s in sorted(changed):
            if s not in self._compiled:
                continue
            report.reached.append(s)
            old = self.compiled[s]
            self._apply(s, diff(old, self._compile(s)), report, fabric)
        report.seconds = time.perf_counter() - started
        return report

    # ---- output -------------------------------------------------------------------------

    def summary(self) -> dict:
        per_switch = {s: st["entries"]["total"] for s, st in self.stats.items()}
        per_layer: dict[str, dict] = {}
        for s, n in per_switch.items():
            layer = per_layer.setdefault(self.topo.layers[s], {"switches": 0, "entries": 0, "max": 0})
            layer["switches"] += 1
            layer["entries"] += n
            layer["max"] = max(layer["max"], n)
        return {
            "policy": self.policy, "alpha": self.alpha,
            "tree": self.tree_kind if self.topo.kind != "fattree" else None,
            "subscriptions": sum(sum(c.values()) for c in self.routing.subscriptions.values()),
            "entries": {"total": sum(per_switch.values()), "per_switch": per_switch,
                        "per_layer": per_layer},
            "multicast_groups": {s: st["multicast_groups"] for s, st in self.stats.items()},
            "compile_seconds": {"total": round(self.compile_seconds, 4),
                                "per_switch": {s: st["compile_seconds"] for s, st in self.stats.items()}},
        }

    def network_json(self) -> dict:
        doc = {"camus_network": NETWORK_VERSION, "application": self.spec.name,
               "policy": self.policy, "alpha": self.alpha, "up_port": UP_PORT}
        doc.update(self.topo.to_json())
        if self.tree is not None:
            doc["tree"] = {"kind": self.tree_kind,
                           "links": sorted(sorted((a, b)) for a, b in self.tree.edges)}
            doc["failed"] = {"links": sorted(sorted(link) for link in self.failed_links),
                             "switches": sorted(self.failed_switches)}
        return doc

    def write(self, out: str | Path, only: Iterable[str] | None = None) -> None:
        """network.json, stats.json and every switch's directory (or only these switches')."""
        out = Path(out)
        (out / "switches").mkdir(parents=True, exist_ok=True)
        pipeline_text = document.dumps(self.pipeline)
        for s, entries in self.compiled.items():
            if only is not None and s not in only:
                continue
            d = out / "switches" / s
            d.mkdir(parents=True, exist_ok=True)
            (d / "pipeline.json").write_text(pipeline_text)
            with open(d / "entries.json", "w") as fh:
                entries_json.write(entries, fh)
            (d / "stats.json").write_text(json.dumps(self.stats[s], indent=2) + "\n")
        (out / "network.json").write_text(json.dumps(self.network_json(), indent=2) + "\n")
        (out / "stats.json").write_text(json.dumps(self.summary(), indent=2) + "\n")


class RoutingLoop(RuntimeError):
    """A packet crossed more switches than any loop-free route has."""


class Fabric:
    """The network running in one process: a software switch per switch, hop by hop."""

    def __init__(self, topo: Topology, pipeline: dict, entries: dict[str, dict],
                 impl: str = "native", up_port: int = UP_PORT):
        self.topo = topo
        self.egress = {s: FabricEgress(topo.up.get(s, ()), up_port) for s in topo.switches}
        self.switches = {s: dataplane.load(pipeline, entries.get(s), impl=impl) for s in topo.switches}
        self.links: dict[tuple[str, str], list[int]] = {}  # (from, to) -> [packets, bytes]

    @classmethod
    def of(cls, net: Network, impl: str = "native") -> "Fabric":
        return cls(net.topo, net.pipeline_doc, net.compiled, impl)

    @classmethod
    def load(cls, directory: str | Path, impl: str = "native") -> "Fabric":
        d = Path(directory)
        doc = json.loads((d / "network.json").read_text())
        if doc.get("camus_network") != NETWORK_VERSION:
            raise ValueError(f"{d / 'network.json'}: not a camus network (version {NETWORK_VERSION})")
        topo = Topology.from_json(doc)
        pipeline, entries = None, {}
        for s in topo.switches:
            sd = d / "switches" / s
            pipeline = pipeline or json.loads((sd / "pipeline.json").read_text())
            entries[s] = json.loads((sd / "entries.json").read_text())
        return cls(topo, pipeline, entries, impl, doc.get("up_port", UP_PORT))

    def apply(self, s: str, changes) -> None:
        apply_steps(self.switches[s], changes)

    def inject(self, host: str, frame: bytes) -> list[tuple[str, bytes]]:
        """Send `frame` from `host`; every (host, frame) delivery it causes, in order."""
        if host not in self.topo.hosts:
            raise ValueError(f"no host {host!r} in the network")
        s, p = self.topo.hosts[host]
        delivered: list[tuple[str, bytes]] = []
        todo = deque([(s, p, frame, 0)])
        limit = len(self.topo.layers) + 1
        while todo:
            s, in_port, data, hops = todo.popleft()
            if hops >= limit:
                raise RoutingLoop(f"a packet from {host} passed {hops} switches (at {s})")
            egress = self.egress[s]
            for port, copy in self.switches[s].process(data, in_port):
                port = egress.port(in_port, port, data)  # ingress, up and never-up-again
                peer = self.topo.ports[s].get(port)
                if peer is None:
                    continue  # a port with nothing attached (a failed link's)
                if peer.kind == "host":
                    delivered.append((peer.name, copy))
                    self._count(s, peer.name, copy)
                else:
                    self._count(s, peer.name, copy)
                    todo.append((peer.name, peer.port, copy, hops + 1))
        return delivered

    def _count(self, a: str, b: str, frame: bytes) -> None:
        c = self.links.setdefault((a, b), [0, 0])
        c[0] += 1
        c[1] += len(frame)

    def links_json(self) -> list[dict]:
        return [{"from": a, "to": b, "packets": n, "bytes": size}
                for (a, b), (n, size) in sorted(self.links.items())]
