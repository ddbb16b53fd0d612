"""Benchmark: one rule change on the 100K-rule ITCH workload, incremental against from scratch.

The rules of bench/compile_itch.py (`stock == S and price > P : fwd(H)`, seed 1). One
`Incremental` is built from them, then it takes `--changes` single-rule changes, alternately
adding a new random rule of the same shape and removing a random current one; each change's
time covers the rule edit and the entry writes computed (`Step`), not the rules alone. The
baseline is a from-scratch `compile_rules` of the same rules in the same run (what every
change cost before), and the ratio says how many changes fit in one recompile. At the end the
incremental document is compared with a from-scratch compile of the final rules.

    python bench/compile_change.py [--rules N] [--changes N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler (see bench/compile_itch.py)
sys.path.insert(0, str(ROOT / "bench"))

from compile_itch import workload  # noqa: E402
from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.incremental import Incremental  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    import compiler
    print(f"compiler from        {Path(compiler.__file__).parent}")
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    with no_cyclic_gc():
        rules = parse_rules(workload(args.rules, args.seed), spec)
        extra = parse_rules(workload(args.changes, args.seed + 1), spec)
    t0 = time.perf_counter()
    compile_rules(spec, rules)
    scratch = time.perf_counter() - t0
    t0 = time.perf_counter()
    with no_cyclic_gc():
        inc = Incremental(spec, rules)
    build = time.perf_counter() - t0
    rng = random.Random(args.seed)
    current = list(rules)
    times, writes = [], []
    with no_cyclic_gc():  # as the broker's compile worker runs
        for i in range(args.changes):
            if i % 2:
                j = rng.randrange(len(current))
                current[j], current[-1] = current[-1], current[j]
                step = inc.remove(current.pop())
            else:
                current.append(extra[i])
                step = inc.add(extra[i])
            times.append(step.seconds)
            writes.append(len(step))
    # Most random rules are implied by a rule already there (same symbol and port, lower
    # price): such a change writes nothing. The changes that write are reported apart.
    effective = sorted(t for t, w in zip(times, writes) if w)
    times.sort()
    median = statistics.median(times)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    t0 = time.perf_counter()
    final = compile_rules(spec, current)
    scratch_final = time.perf_counter() - t0
    same = final.entries == inc.entries()
    print(f"rules                {args.rules}")
    print(f"changes              {args.changes} (add a rule, remove a rule, alternately)")
    print(f"from scratch s       {scratch:.3f} (baseline, same run; final rules {scratch_final:.3f})")
    print(f"incremental build s  {build:.3f}")
    print(f"change median ms     {median * 1e3:.2f}  (goal <= 5)")
    print(f"change p99 ms        {p99 * 1e3:.2f}")
    print(f"change max ms        {times[-1] * 1e3:.2f}")
    print(f"writes per change    median {statistics.median(writes):.0f}, max {max(writes)}")
    if effective:
        e_p99 = effective[min(len(effective) - 1, int(len(effective) * 0.99))]
        print(f"changes that write   {len(effective)}: median ms "
              f"{statistics.median(effective) * 1e3:.2f}, p99 ms {e_p99 * 1e3:.2f}, "
              f"scratch / median {scratch / statistics.median(effective):.0f}x")
    print(f"scratch / median     {scratch / median:.0f}x")
    print(f"final entries equal  {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
