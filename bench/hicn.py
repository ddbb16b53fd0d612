"""Benchmark: the paper's hICN scale point (Table I), 1M exact rules on one field.

Rules `content == ID : fwd(H)`, ID distinct 40-bit identifiers, H one of 200 hosts, fixed seed,
on p4/hicn/hicn.p4. Prints, on the same parsed rules, the equality-only fast path
(`compiler.exact_only`) against the general compile (the baseline, `general_only()`) and
their ratio at --rules (default 100K); then `camus compile` end to end (parse, compile,
write) on --big rules (default 1M) in a child process, with its wall time and peak RSS.

    python bench/hicn.py [--rules N] [--big N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler, not an installed one

from compiler import exact_only  # noqa: E402
from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402

SPEC = ROOT / "p4/hicn/hicn.p4"


def workload(n: int, seed: int) -> str:
    rng = random.Random(seed)
    ids = rng.sample(range(1, 1 << 40), n)
    return "".join(f"content == {i} : fwd({rng.randint(1, 200)})\n" for i in ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = load_spec(SPEC)
    with no_cyclic_gc():
        rules = parse_rules(workload(args.rules, args.seed), spec)
    t0 = time.process_time()  # CPU time: the machines this runs on are shared
    fast = compile_rules(spec, rules)
    fast_s = time.process_time() - t0
    with exact_only.general_only():
        t0 = time.process_time()
        slow = compile_rules(spec, rules)
        slow_s = time.process_time() - t0
    assert fast.entries == slow.entries, "the fast path's entries differ from the general ones"
    print(f"rules                    {args.rules}")
    print(f"entries                  {fast.stats['entries']['total']} (same in both)")
    print(f"general compile CPU s    {slow_s:.2f}  (baseline)")
    print(f"fast path CPU s          {fast_s:.2f}")
    print(f"general / fast           {slow_s / fast_s:.1f}x")
    if not args.big:
        return
    with tempfile.TemporaryDirectory() as tmp:
        rules_file = Path(tmp) / "hicn.rules"
        rules_file.write_text(workload(args.big, args.seed))
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "camus", "compile", str(SPEC),
                               str(rules_file), "--out", str(Path(tmp) / "out")],
                              cwd=ROOT, capture_output=True, text=True,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        wall = time.perf_counter() - t0
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak = child.ru_maxrss / 1024  # KiB -> MiB
        cpu = child.ru_utime + child.ru_stime  # what wall time is on an idle machine
    if done.returncode:
        sys.exit(f"camus compile failed: {done.stderr}")
    print(f"camus compile, {args.big} rules: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS "
          f"{peak:.0f} MiB (parse + compile + write; goal <= 20 s)")
    print(f"  {done.stderr.strip()}")


if __name__ == "__main__":
    main()
