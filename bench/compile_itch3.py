"""Benchmark: the three-field ITCH workload (issue 16 item 5) with and without α.

100,000 rules `stock == S and price > P and shares < Q : fwd(H)`, S one of 100 symbols, P and
Q uniform in 1..999, H one of 200 ports, fixed seed. The baseline, in the same run: the exact
rules against the default entry budget (`camus compile` refuses them from the estimate; the
time to refuse and the estimate are printed). Then the same rules approximated with --alpha
(default price=100,shares=100): entries, states, and compile time.

    python bench/compile_itch3.py [--rules N] [--alpha A] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler, not an installed one

from compiler import alpha_option  # noqa: E402
from compiler.compile import TooLarge, compile_rules, no_cyclic_gc  # noqa: E402
from compiler.estimate import DEFAULT_MAX_ENTRIES  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402


def workload(n: int, seed: int) -> str:
    rng = random.Random(seed)
    symbols = [f"S{i:03d}" for i in range(100)]
    return "\n".join(f'stock == "{rng.choice(symbols)}" and price > {rng.randint(1, 999)} and '
                     f'shares < {rng.randint(1, 999)} : fwd({rng.randint(1, 200)})'
                     for _ in range(n))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--alpha", default="price=100,shares=100")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    t0 = time.process_time()  # CPU time: the machines this runs on are shared
    with no_cyclic_gc():
        rules = parse_rules(workload(args.rules, args.seed), spec)
    parse_s = time.process_time() - t0
    print(f"rules                 {len(rules)}  (parse {parse_s:.2f} s CPU)")
    t0 = time.process_time()
    try:
        c = compile_rules(spec, rules, max_entries=DEFAULT_MAX_ENTRIES)
        print(f"exact                 {c.stats['entries']['total']} entries, "
              f"{time.process_time() - t0:.2f} s CPU")
    except TooLarge as exc:
        print(f"exact (baseline)      refused in {time.process_time() - t0:.2f} s CPU: "
              f"{str(exc)[:160]}...")
    t0 = time.process_time()
    approx = alpha_option.apply(rules, args.alpha, spec)
    c = compile_rules(spec, approx, max_entries=DEFAULT_MAX_ENTRIES)
    compile_s = time.process_time() - t0
    st = c.stats
    print(f"--alpha {args.alpha:<13} {st['entries']['total']} entries, {st['states']} states, "
          f"{st['multicast_groups']} multicast group(s), {compile_s:.2f} s CPU "
          f"(approximate + compile; goal < 60 s)")
    for table, n in st["entries"]["per_table"].items():
        print(f"  {table:<22} {n}")


if __name__ == "__main__":
    main()
