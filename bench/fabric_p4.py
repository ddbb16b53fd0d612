"""Benchmark: what the fabric's P4 program costs beside the network it is written for.

Workload: the ITCH subscriptions of bench/routing.py (apps/fabric/measure.py: `stock == S
and price > P`, each owned by a random host of a k = 4 fat tree, fixed seed), policy TR.
Prints:

  1. writing every switch's fabric program, P4Info and P4Runtime entries (`camus net compile
     --p4`, controller/fabric_p4.py) against compiling the network (the baseline), and the
     table entries the fabric control plane adds to the network's;
  2. the software fabric's up-port choice per copy (`switch.fabric_egress`): the hash over
     the packet's addresses, identification and ports that the P4 program also computes,
     against the CRC-32 of the whole frame that it replaced (the baseline).

    python bench/fabric_p4.py [--sizes 1000,10000] [--packets 20000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages, as bench/compile_itch.py says

from apps.fabric import measure  # noqa: E402
from compiler.spec import load_spec  # noqa: E402
from controller.fabric_p4 import switch_entries, write_switches  # noqa: E402
from controller.network import Network  # noqa: E402
from controller.topology import fat_tree  # noqa: E402
from switch.fabric_egress import LOGICAL_UP, FabricEgress  # noqa: E402
from switch.packet import mold_payload, udp_frame  # noqa: E402


def p4_files(spec, sizes: list[int], seed: int) -> None:
    topo = fat_tree(4)
    hosts = list(topo.hosts)
    print("== 1. k = 4 fat tree, TR: writing the fabric's P4 files vs compiling the network ==")
    print(f"{'subs':>7} | {'compile s':>9} {'p4 files s':>10} {'ratio':>6} | "
          f"{'entries':>8} {'+fabric':>8} {'ratio':>6}")
    for n in sizes:
        subs = measure.subscriptions(spec, hosts, n, seed)
        started = time.perf_counter()
        net = Network(spec, topo, subs, "tr", 1)
        compiled = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as d:
            net.write(d)
            started = time.perf_counter()
            write_switches(d)
            p4 = time.perf_counter() - started
        entries = sum(len(e["table_entries"]) for e in net.compiled.values())
        fabric = sum(len(switch_entries(topo, s, e)["table_entries"]) for s, e in net.compiled.items()) - entries
        print(f"{n:>7} | {compiled:>9.2f} {p4:>10.2f} {p4 / compiled:>6.2f} | "
              f"{entries:>8} {fabric:>8} {fabric / entries:>6.3f}", flush=True)


def hashing(n: int, seed: int) -> None:
    import random

    rng = random.Random(seed)
    frames = [udp_frame(mold_payload(b"SESSION001", i, [bytes(36)] * rng.randint(1, 8)), dst_port=1234,
                        src_port=rng.randrange(1024, 65536)) for i in range(n)]
    egress = FabricEgress((3, 4))
    up = egress.up
    print(f"== 2. the up-port choice per copy ({n} ITCH frames of 1-8 messages) ==")
    def before(in_port: int, port: int, frame: bytes) -> int | None:  # the replaced choice
        if port == LOGICAL_UP and up:
            if in_port in up:
                return None
            port = up[zlib.crc32(frame) % len(up)]
        return None if port == in_port else port

    started = time.perf_counter()
    old = [before(1, LOGICAL_UP, f) for f in frames]
    base = time.perf_counter() - started
    started = time.perf_counter()
    new = [egress.port(1, LOGICAL_UP, f) for f in frames]
    now = time.perf_counter() - started
    print(f"CRC-32 of the frame (before): {base / n * 1e6:.2f} us a copy; fields as the P4 program "
          f"hashes them: {now / n * 1e6:.2f} us a copy; ratio {now / base:.2f}; "
          f"share of copies on the first up port: before {old.count(3) / n:.3f}, now {new.count(3) / n:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--packets", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4" / "itch" / "itch.p4")
    p4_files(spec, [int(x) for x in args.sizes.split(",")], args.seed)
    hashing(args.packets, args.seed)


if __name__ == "__main__":
    main()
