"""Benchmark: one wide filter, an `or` of N clauses `(fI > x and fJ < y)` over pairs of the
Kafka header's eight attribute slots, one action (the shape a view's filter takes).

Baseline, in the same run: the same number of clauses on one fixed pair of slots (slot0,
slot1), which the issue reports as fast; the ratio is what varying the pairs costs on top.
Also prints the normal form's size, entries and states of each.

    python bench/wide_filter.py [--clauses N ...] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler (see bench/compile_itch.py)

from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402


def wide(n: int, seed: int, fixed_pair: bool) -> str:
    rng = random.Random(seed)
    clauses = []
    for _ in range(n):
        i, j = (0, 1) if fixed_pair else rng.sample(range(8), 2)
        x, y = rng.randrange(10**6), rng.randrange(10**6)
        clauses.append(f"(kafka.slot{i} > {x} and kafka.slot{j} < {y})")
    return "kafka.topic_id == 7 and (" + " or ".join(clauses) + ") : fwd(1)"


def timed(spec, text: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    with no_cyclic_gc():
        rules = parse_rules(text, spec)
        c = compile_rules(spec, rules, static=True)
    return time.perf_counter() - t0, c.stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clauses", type=int, nargs="+", default=[100, 300])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4/kafka/kafka.p4")
    print(f"{'clauses':>8} {'pairs':>7} {'seconds':>8} {'entries':>8} {'states':>7} "
          f"{'conjunctions':>12}")
    for n in args.clauses:
        base_s, base = timed(spec, wide(n, args.seed, True))
        s, st = timed(spec, wide(n, args.seed, False))
        for label, sec, stats in (("fixed", base_s, base), ("varying", s, st)):
            print(f"{n:>8} {label:>7} {sec:>8.2f} {stats['entries']['total']:>8} "
                  f"{stats['states']:>7} {stats['conjunctions']:>12}")
        print(f"{'':>8} varying / fixed: {s / base_s:.1f}x")


if __name__ == "__main__":
    main()
