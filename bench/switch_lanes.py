"""Benchmark: what lanes cost the native switch per message, against one diagram of the same rules.

Rules: Siena-style subscriptions with one predicate each (`bench/siena.py`'s generator, seed
1) on `--attributes` 16-bit attributes. Compiled twice in the same run, as one diagram
(`--lanes 1`) and in lanes (one per attribute), then the same stream of single-message UDP
frames (attribute values uniform in 0..1099) goes through the native parse and table walk
(`classify_packed`, batches of 1,000 frames, no replication). Printed: entries, lanes, and
messages per second of each, and their ratio. Both compiles are checked to give every frame
the same port set (through the Python interpreter) before anything is timed.

    python bench/switch_lanes.py [--subs 1000] [--attributes 2] [--frames 100000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler and switch, not an installed one
sys.path.insert(0, str(ROOT / "bench"))

from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import parse_spec  # noqa: E402
from siena import WIDTH, rules_text, spec_text, workload  # noqa: E402
from switch.dataplane import load  # noqa: E402
from switch.native_dataplane import pack  # noqa: E402
from switch.packet import udp_frame  # noqa: E402

BATCH = 1000


def rate(dp, frames: list[bytes], seconds: float = 3.0) -> float:
    """Messages per second through `classify_packed`, best of repeated passes over `frames`."""
    batches = [pack(frames[i:i + BATCH]) for i in range(0, len(frames), BATCH)]
    best = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        for buf, lengths in batches:
            dp.classify_packed(buf, lengths, 0)
        best = max(best, len(frames) / (time.perf_counter() - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subs", type=int, default=1000)
    ap.add_argument("--attributes", type=int, default=2)
    ap.add_argument("--frames", type=int, default=100_000)
    args = ap.parse_args()
    spec = parse_spec(spec_text(args.attributes), name="siena")
    rng = random.Random(1)
    subs = workload(rng, args.subs, 1, args.attributes, 1000, {"==": .4, "<": .3, ">": .3}, False)
    with no_cyclic_gc():
        rules = parse_rules(rules_text(rng, subs), spec)
    one = compile_rules(spec, rules, max_entries=0, lanes=1)
    split = compile_rules(spec, rules, lanes=args.attributes)
    values = [[rng.randrange(1100) for _ in range(args.attributes)] for _ in range(args.frames)]
    frames = [udp_frame(b"".join(v.to_bytes(WIDTH // 8, "big") for v in vs), dst_port=5555)
              for vs in values]
    a_tables, b_tables = one.tables(), split.tables()
    for vs in values[:2000]:
        msg = {f"event.a{i}": v for i, v in enumerate(vs)}
        assert a_tables.ports(one.application, msg) == b_tables.ports(split.application, msg)
    results = []
    for c in (one, split):
        dp = load(c.pipeline, c.entries, impl="native")
        results.append((c.stats["entries"]["total"], len(c.application.all_lanes), rate(dp, frames)))
    print(f"{args.subs} one-predicate subscriptions on {args.attributes} attributes, "
          f"{args.frames:,} frames, native classify_packed")
    for name, (entries, lanes, r) in zip(("one diagram", "lanes"), results):
        print(f"  {name:<12} {entries:>8,} entries  {lanes:>2} lane(s)  {r / 1e6:6.2f} M msg/s")
    print(f"  lanes / one diagram: {results[1][2] / results[0][2]:.2f}x the rate, "
          f"{results[1][0] / results[0][0]:.3f}x the entries")


if __name__ == "__main__":
    main()
