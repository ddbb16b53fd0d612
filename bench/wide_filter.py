"""Benchmark: one wide filter, an `or` of N clauses `(fI > x and fJ < y)` over pairs of the
Kafka header's eight attribute slots, one action (the shape a view's filter takes).

Baseline, in the same run: the same number of clauses on one fixed pair of slots (slot0,
slot1), which the issue reports as fast; the ratio is what varying the pairs costs on top.
Also prints the normal form's size, entries and states of each.

`--and-clauses N ...`: an `and` of N clauses `(fI > x or fJ < y)` instead (2^N alternatives
in normal form), compiled as a formula (compiler.formula). Baseline, in the same run: the same
filter through its normal form, where that is within the normal form's limit (N <= 16).

    python bench/wide_filter.py [--clauses N ...] [--and-clauses N ...] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler (see bench/compile_itch.py)

from compiler import formula  # noqa: E402
from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.normalize import MAX_DISJUNCTS  # noqa: E402
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


def and_of_ors(n: int, seed: int) -> str:
    rng = random.Random(seed)
    clauses = []
    for _ in range(n):
        i, j = rng.sample(range(8), 2)
        x, y = rng.randrange(10**6), rng.randrange(10**6)
        clauses.append(f"(kafka.slot{i} > {x} or kafka.slot{j} < {y})")
    return "kafka.topic_id == 7 and " + " and ".join(clauses) + " : fwd(1)"


def timed(spec, text: str, formula_at: int | None = None) -> tuple[float, dict]:
    """Parse and compile `text`; with `formula_at`, every filter whose normal form may pass
    that many alternatives is compiled as a formula."""
    saved = formula.FORMULA_AT
    if formula_at is not None:
        formula.FORMULA_AT = formula_at
    try:
        t0 = time.perf_counter()
        with no_cyclic_gc():
            rules = parse_rules(text, spec)
            c = compile_rules(spec, rules, static=True)
        return time.perf_counter() - t0, c.stats
    finally:
        formula.FORMULA_AT = saved


def and_clauses(spec, counts: list[int], seed: int) -> None:
    print(f"{'clauses':>8} {'path':>12} {'seconds':>8} {'entries':>8} {'states':>7}")
    for n in counts:
        text = and_of_ors(n, seed)
        s, st = timed(spec, text, formula_at=0)
        print(f"{n:>8} {'formula':>12} {s:>8.2f} {st['entries']['total']:>8} {st['states']:>7}")
        if n <= 16:  # 2^16 alternatives: within MAX_DISJUNCTS
            base_s, base = timed(spec, text, formula_at=MAX_DISJUNCTS)
            print(f"{n:>8} {'normal form':>12} {base_s:>8.2f} {base['entries']['total']:>8} "
                  f"{base['states']:>7}")
            print(f"{'':>8} normal form / formula: {base_s / s:.1f}x")
        else:
            print(f"{n:>8} {'normal form':>12} {'(2^' + str(n) + ' alternatives: refused)':>24}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clauses", type=int, nargs="+", default=[100, 300])
    ap.add_argument("--and-clauses", type=int, nargs="+",
                    help="an `and` of N two-atom `or`s instead")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4/kafka/kafka.p4")
    if args.and_clauses:
        and_clauses(spec, args.and_clauses, args.seed)
        return
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
