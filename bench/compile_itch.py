"""Benchmark: compile the paper's 100K-rule ITCH workload.

100,000 rules `stock == S and price > P : fwd(H)`, S one of 100 symbols, P uniform in
1..999, H one of 200 ports, fixed seed. Prints rules, entries, multicast groups and compile
seconds, beside a baseline measured in the same run: the naive one-big-table size (one
entry per distinct (symbol, price-interval) combination is a lower bound for it; we print
the rule count, which a one-entry-per-rule TCAM would need at the very least) and the time
to merely parse the rules, so the ratio says what the decision diagram costs on top.

    python bench/compile_itch.py [--rules N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Measure this checkout's compiler: run as a script, the bench/ directory is first on the
# path, and `compiler` would otherwise come from wherever camus is installed (an editable
# install of another worktree, say).
sys.path.insert(0, str(ROOT))

from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402


def workload(n: int, seed: int) -> str:
    rng = random.Random(seed)
    symbols = [f"S{i:03d}" for i in range(100)]
    return "\n".join(f'stock == "{rng.choice(symbols)}" and price > {rng.randint(1, 999)} '
                     f': fwd({rng.randint(1, 200)})' for _ in range(n))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    import compiler
    print(f"compiler from      {Path(compiler.__file__).parent}")
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    text = workload(args.rules, args.seed)
    t0 = time.perf_counter()
    with no_cyclic_gc():  # as `camus compile` does
        rules = parse_rules(text, spec)
    parse_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    c = compile_rules(spec, rules)
    compile_s = time.perf_counter() - t0
    st = c.stats
    print(f"rules              {st['rules']}")
    print(f"entries            {st['entries']['total']}  (paper: 21,401; done at <= 25,000)")
    for table, n in st["entries"]["per_table"].items():
        print(f"  {table:<22} {n}")
    print(f"states             {st['states']}")
    print(f"multicast groups   {st['multicast_groups']}  (paper: 198)")
    print(f"parse seconds      {parse_s:.2f}")
    print(f"compile seconds    {compile_s:.2f}  (rules -> tables, parse excluded; done at < 10)")
    print(f"entries / rules    {st['entries']['total'] / st['rules']:.3f}  "
          f"(a one-entry-per-rule table is 1.0)")
    print(f"compile / parse    {compile_s / parse_s:.2f}x")


if __name__ == "__main__":
    main()
