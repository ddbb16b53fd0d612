"""Benchmark: what a view with a filter too wide for normal form costs the broker's data path.

While such a view is held, every subscription change compiles all the endpoints' rules from
scratch (`shim.approximation.WholeCompile`) instead of handing the change to the incremental
compiler. Workload: N plain views (at most 510: the switch has 9-bit ports) `a > P and b < Q` (P, Q random, fixed seed) on one topic
of the embedded switch's data path (`DataPath.sync`, compiled on the calling thread); then
--changes changes, each one plain view added and synced, then removed and synced.

Baseline, in the same run: the same changes with no wide view held (incremental). Then the
same with one view whose filter is an `and` of 20 two-atom `or`s held. Also timed: the
CreateTopics check of that filter (`shim.subscriptions.check_compilable`, run on the event
loop), and of a 32-clause one that the check refuses (its diagram passes 5,000 states).

    python bench/wide_views.py [--views 400] [--changes 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages, as bench/compile_itch.py says

from compiler.errors import RuleError  # noqa: E402
from controller.targets import open_target  # noqa: E402
from shim.datapath import DataPath  # noqa: E402
from shim.schema import parse_schema  # noqa: E402
from shim.subscriptions import check_compilable, kafka_spec, view_filter  # noqa: E402

SCHEMA = parse_schema("a:u16=$.a,b:u32=$.b,c:u16=$.c,d:u32=$.d,e:u32=$.e")
WIDE = " and ".join(f"({'abcd'[i % 4]} > {10 + i} or {'abcd'[(i + 1) % 4]} < {40 - i})"
                    for i in range(20))
REFUSED = " and ".join(f"({'abcd'[i % 4]} > {i // 4 * 10 + 1} or e != {i})" for i in range(32))


def change_times(dp: DataPath, rng: random.Random, changes: int) -> list[float]:
    """Seconds of each change: one plain view added and synced, then removed and synced."""
    out = []
    for _ in range(changes):
        port = dp.allocate_port()
        f = view_filter(dp.spec, SCHEMA, f"a > {rng.randint(0, 60000)} and b < {rng.randint(0, 10**6)}")
        started = time.perf_counter()
        dp.subscribe(port, 7, None, f)
        dp.sync()
        dp.unsubscribe(port)
        dp.sync()
        out.append((time.perf_counter() - started) / 2)
    return out


def check_seconds(text: str) -> tuple[float, str]:
    f = view_filter(kafka_spec(), SCHEMA, text)
    started = time.perf_counter()
    try:
        check_compilable(f)
        verdict = "accepted"
    except RuleError:
        verdict = "refused"
    return time.perf_counter() - started, verdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--views", type=int, default=400)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    logging.getLogger("camus.datapath").setLevel(logging.ERROR)
    rng = random.Random(args.seed)
    dp = DataPath(open_target("embedded:native"), max_entries=0)
    started = time.perf_counter()
    for _ in range(args.views):
        dp.subscribe(dp.allocate_port(), 7, None, view_filter(
            dp.spec, SCHEMA, f"a > {rng.randint(0, 60000)} and b < {rng.randint(0, 10**6)}"))
    dp.sync()
    print(f"{args.views} plain views compiled in {time.perf_counter() - started:.2f} s, "
          f"{len(dp.target.entries())} entries")
    base = change_times(dp, random.Random(args.seed + 1), args.changes)
    wide_port = dp.allocate_port()
    started = time.perf_counter()
    dp.subscribe(wide_port, 7, None, view_filter(dp.spec, SCHEMA, WIDE))
    dp.sync()
    print(f"20-clause view added in {time.perf_counter() - started:.3f} s "
          f"({type(dp.compiler).__name__}), {len(dp.target.entries())} entries")
    held = change_times(dp, random.Random(args.seed + 1), args.changes)
    started = time.perf_counter()
    dp.unsubscribe(wide_port)
    dp.sync()
    print(f"20-clause view removed in {time.perf_counter() - started:.3f} s "
          f"({type(dp.compiler).__name__} again)")
    b, h = statistics.median(base), statistics.median(held)
    print(f"one change, median of {args.changes}: incremental (baseline) {b * 1000:.1f} ms, "
          f"with the wide view held (whole compile) {h * 1000:.1f} ms: {h / b:.0f}x")
    for name, text in (("20-clause", WIDE), ("32-clause", REFUSED)):
        seconds, verdict = check_seconds(text)
        print(f"CreateTopics check of the {name} filter: {seconds * 1000:.0f} ms, {verdict}")


if __name__ == "__main__":
    main()
