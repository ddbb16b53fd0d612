"""Benchmark: multicast groups and entries on the paper's 100K-rule ITCH workload.

Port-bitmap egress pruning (issue 16 item 1): an `mcast(ports)` decision carries a bitmap and
replicates through the application's one group; egress drops the copies whose bit is clear.
The baseline, computed in the same run from the same compile, is the design it replaced: one
multicast group per distinct multi-port decision (its replicas written to the group table),
plus, for a P4 target, the all-ports group and a MoldUDP64 membership table per slot holding
every (group, port) pair. Prints both and the ratios; entries of the stage tables are the
same by construction (the decision shape does not change which entries exist).

    python bench/multicast_groups.py [--rules N] [--seed S] [--slots K]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler, as bench/compile_itch.py explains

from bench.compile_itch import workload  # noqa: E402
from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402
from p4rt.names import DEFAULT_SLOTS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slots", type=int, default=DEFAULT_SLOTS)
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    with no_cyclic_gc():
        rules = parse_rules(workload(args.rules, args.seed), spec)
    t0 = time.perf_counter()
    c = compile_rules(spec, rules)
    seconds = time.perf_counter() - t0
    entries = c.entries["table_entries"]
    groups = c.entries["multicast_groups"]
    bitmaps = {e["params"]["ports"] for e in entries if e["action"] == "mcast"}
    fwd_ports = {e["params"]["port"] for e in entries if e["action"] == "fwd"}
    # The replaced design: a group per distinct port set, with one replica per port.
    old_groups = len(bitmaps)
    old_replicas = sum(bin(b).count("1") for b in bitmaps)
    # And on a P4 target: the all-ports group, and per slot a membership entry per replica.
    old_p4_groups = old_groups + 1
    old_p4_members = args.slots * old_replicas
    new_replicas = sum(len(g["replicas"]) for g in groups)
    print(f"rules                          {len(rules):,}")
    print(f"compile seconds                {seconds:.2f}")
    print(f"table entries                  {len(entries):,}  (same in both designs)")
    print(f"mcast decisions (port sets)    {len(bitmaps):,}; fwd ports {len(fwd_ports)}")
    print(f"state width                    {c.pipeline.state_width} bits; port bitmap {c.pipeline.ports_width} bits")
    print("                               port bitmaps   one group per port set (baseline)   ratio")
    print(f"multicast groups               {len(groups):>12,}   {old_groups:>33,}   {old_groups / max(len(groups), 1):,.0f}x")
    print(f"group replicas                 {new_replicas:>12,}   {old_replicas:>33,}   {old_replicas / max(new_replicas, 1):,.0f}x")
    print(f"P4 target: groups              {len(groups):>12,}   {old_p4_groups:>33,}")
    print(f"P4 target: extra entries       {0:>12,}   {old_p4_members:>33,}   (membership tables, {args.slots} slots)")
    print(f"goal (at most 256 groups)      {'met' if len(groups) <= 256 else 'NOT met'}")


if __name__ == "__main__":
    main()
