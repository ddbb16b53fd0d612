"""Benchmark: the size estimate against the compile it predicts (issue 16 item 3).

Two workloads of 100,000 rules: the paper's two-field ITCH (`stock == S and price > P :
fwd(H)`) and the three-field one of issue 16 (`... and shares < Q`), both with bench/
compile_itch.py's generator and seed. For each: the estimate (entries, states, seconds) and
what happens under `--max-entries` 1,000,000, camus compile's default: the two-field workload
is compiled (its real entries and seconds printed beside the estimate, the baseline in the
same run), the three-field one refused, and the time to the refusal printed beside the time
the estimate took.

    python bench/size_estimate.py [--rules N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler, as bench/compile_itch.py explains

from bench.compile_itch import workload  # noqa: E402
from compiler import estimate, order  # noqa: E402
from compiler.compile import TooLarge, compile_rules, no_cyclic_gc  # noqa: E402
from compiler.normalize import dnf  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402


def three_fields(n: int, seed: int) -> str:
    """compile_itch's rules, each with `and shares < Q` (Q uniform in 1..999) added."""
    rng = random.Random(seed)
    return "\n".join(line.replace(" : fwd", f" and shares < {rng.randint(1, 999)} : fwd")
                     for line in workload(n, seed).splitlines())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    budget = estimate.DEFAULT_MAX_ENTRIES
    for name, text in (("two fields", workload(args.rules, args.seed)),
                       ("three fields", three_fields(args.rules, args.seed))):
        with no_cyclic_gc():
            rules = parse_rules(text, spec)
        conj = [c for r in rules for c in dnf(r.filter, r.line)]
        t0 = time.perf_counter()
        est = estimate.estimate(conj, order.choose(spec, conj))
        est_s = time.perf_counter() - t0
        print(f"{name}: {len(rules):,} rules")
        print(f"  estimate            {est.entries:>12,} entries {est.states:>12,} states   {est_s:6.2f} s")
        t0 = time.perf_counter()
        try:
            c = compile_rules(spec, rules, max_entries=budget)
        except TooLarge as exc:
            s = time.perf_counter() - t0
            print(f"  refused (budget {budget:,}) after {s:.2f} s = {s / est_s:.1f}x the estimate alone")
            print(f"  message: {str(exc)[:160]}...")
            continue
        s = time.perf_counter() - t0
        st = c.stats
        print(f"  compiled            {st['entries']['total']:>12,} entries {st['states']:>12,} states   {s:6.2f} s")
        print(f"  estimate / built    {est.entries / st['entries']['total']:.1f}x entries; "
              f"estimate took {est_s / s:.0%} of the compile")


if __name__ == "__main__":
    main()
