"""Benchmark: one subscription change on a network of switches (issue 14, Fig. 14).

Workload (apps/fabric/measure.py): N ITCH subscriptions `stock == S and price > P` (100
symbols, P uniform in 1..999), each owned by a random host of a k = 4 fat tree (16 hosts,
20 switches), fixed seed. For each policy and α, the network is compiled once and then
takes a random sequence of changes: with probability 1/2 a new subscription (same
distribution) from a random host, else one of the subscriptions present removed. Each
change goes through every switch's incremental compiler and its writes go to a running
in-process fabric (`controller.network.Fabric`); its time is the whole network's (every
switch the change reaches, routing and writes included).

Baseline, in the same run: the old way, each switch the change touched (a filter appeared on
or went from one of its ports) recompiled whole by `compile_rules` and diffed against what it
held, timed on the first --baseline changes of the same sequence. The baseline's entries must
equal the incremental ones (checked: a mismatch stops the run).

    python bench/network_change.py [--subs 100000] [--alphas 10,1] [--policies mr,tr]
                                   [--changes 200] [--baseline 5] [--seed 1] [--build-baseline]

build s is the whole network's compile with an incremental compiler per switch (what a
change needs kept); --build-baseline also times the same network compiled by compile_rules
alone.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages, as bench/compile_itch.py says

from apps.fabric import measure  # noqa: E402
from compiler.compile import compile_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402
from controller.diff import diff  # noqa: E402
from controller.network import Fabric, Network  # noqa: E402
from controller.topology import fat_tree  # noqa: E402


def percentile(xs: list[float], q: float) -> float:
    """The q-th percentile, nearest rank (p99 of 200 samples: the 198th smallest)."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, -(-len(s) * q // 100) - 1))] if s else float("nan")


def whole_recompile(net: Network, before: dict[str, dict], switches: list[str]) -> float:
    """Seconds the old path takes for a change that reached `switches`: each compiled whole
    from its current rules and diffed against the entries it held before the change."""
    started = time.perf_counter()
    for s in switches:
        c = compile_rules(net.spec, net.routing.rules(s), static=True)
        diff(before[s], c.entries)
        if c.entries["table_entries"] != net.compiled[s]["table_entries"] or \
                c.entries["multicast_groups"] != net.compiled[s]["multicast_groups"]:
            raise SystemExit(f"incremental entries of {s} differ from a whole compile")
    return time.perf_counter() - started


def run(spec, topo, subs, policy: str, alpha: int, n_changes: int, n_base: int, seed: int,
        build_baseline: bool) -> None:
    if build_baseline:  # the whole network compiled by compile_rules, without incremental state
        started = time.perf_counter()
        Network(spec, topo, subs, policy, alpha, incremental=False)
        print(f"{len(subs):>7} {policy:>6} {alpha:>5} | whole network by compile_rules alone: "
              f"{time.perf_counter() - started:.1f} s", flush=True)
    started = time.perf_counter()
    net = Network(spec, topo, subs, policy, alpha)
    build = time.perf_counter() - started
    fabric = Fabric.of(net)
    rng = random.Random(seed)
    hosts = list(topo.hosts)
    live = list(subs)
    wall, cpu, base, writes, reached, changed = [], [], [], [], [], []
    for i in range(n_changes):
        baseline = i < n_base
        # What each switch held before, for the old path's diff.
        before = {s: net.compiled[s] for s in topo.switches} if baseline else {}
        if rng.random() < 0.5:
            sub = measure.subscriptions(spec, hosts, 1, rng.randrange(1 << 30))[0]
            cpu0 = time.process_time()
            report = net.add(sub, fabric)
            live.append(sub)
        else:
            sub = live.pop(rng.randrange(len(live)))
            cpu0 = time.process_time()
            report = net.remove(sub, fabric)
        cpu.append((time.process_time() - cpu0) * 1000)
        wall.append(report.seconds * 1000)
        writes.append(report.writes)
        reached.append(len(report.reached))
        changed.append(len(report.switches))
        if baseline:
            base.append(whole_recompile(net, before, report.reached) * 1000)
    med, bmed = statistics.median(wall), statistics.median(base) if base else float("nan")

    def mm(xs):  # median/max
        return f"{statistics.median(xs):.0f}/{max(xs)}"
    print(f"{len(subs):>7} {policy:>6} {alpha:>5} | {build:>7.1f} | {n_changes:>4} {mm(reached):>7} "
          f"{mm(changed):>7} {mm(writes):>7} | {med:>7.2f} {percentile(wall, 99):>7.2f} "
          f"{max(wall):>7.2f} | {statistics.median(cpu):>7.2f} {percentile(cpu, 99):>7.2f} | "
          f"{len(base):>3} {bmed:>9.1f} {max(base, default=float('nan')):>9.1f} | {bmed / med:>7.0f}",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--alphas", default="10,1")
    ap.add_argument("--policies", default="mr,tr")
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--baseline", type=int, default=5,
                    help="changes also timed the old way (whole-switch recompiles)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build-baseline", action="store_true",
                    help="also time compiling the network without incremental compilers")
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    topo = fat_tree(4)
    subs = measure.subscriptions(spec, list(topo.hosts), args.subs, args.seed)
    print("== one change on a k = 4 fat tree: incremental per switch vs whole-switch recompiles ==")
    print(f"{'subs':>7} {'policy':>6} {'alpha':>5} | {'build s':>7} | {'n':>4} {'reached':>7} "
          f"{'changed':>7} {'writes':>7} | {'med ms':>7} {'p99 ms':>7} {'max ms':>7} | "
          f"{'cpu med':>7} {'cpu p99':>7} | {'n':>3} {'old med':>9} {'old max':>9} | {'old/new':>7}")
    for alpha in (int(a) for a in args.alphas.split(",")):
        for policy in args.policies.split(","):
            run(spec, topo, subs, policy, alpha, args.changes, args.baseline, args.seed + 2,
                args.build_baseline)
    print("reached: switches whose rules changed (each compiled incrementally), changed: "
          "switches whose entries changed, writes: entries and groups written (each median/max "
          "per change); med/p99/max: one change for the whole network in wall-clock ms, writes to "
          "the running fabric included; cpu: the same in this process's CPU ms (what the "
          "machine's other load does not inflate); old: the reached switches compiled whole "
          "and diffed, wall-clock ms, on the first n changes; old/new: the medians' ratio")

if __name__ == "__main__":
    main()
