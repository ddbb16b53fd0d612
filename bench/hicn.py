"""Benchmark: the paper's hICN scale point (Table I), 1M exact rules on one field.

Rules `content == ID : fwd(H)`, ID distinct 40-bit identifiers, H one of 200 hosts, fixed seed,
on p4/hicn/hicn.p4. Two parts (the second printed first), each printing the baseline measured in the same run and the
ratio (CPU seconds: the machines this runs on are shared, wall time is not comparable):

1. Phase by phase on --rules rules (default 200K), in this process: parsing (the general
   path, one shape split per rule, against the equality-line path), compiling (the general
   build, `exact_only.general_only()`, against the exact-only path) and writing entries.json
   (from the entry objects, and one json.dumps per entry as the writer did before, against the
   exact-only path's text). Every pair gives the same rules, entries and bytes (checked).
2. End to end on --big rules (default 1M): `camus compile p4/hicn/hicn.p4 RULES --out DIR` in a
   child process, with its wall time, CPU time and peak RSS; against the same three phases the
   general way in a child process (`--general`: general parser, general build, one json.dumps
   per entry), whose entries.json must be byte for byte the same. --no-baseline skips that
   child (about 40 s of CPU and 2.6 GB at 1M).

    python bench/hicn.py [--rules N] [--big N] [--seed S] [--no-baseline]
"""

from __future__ import annotations

import argparse
import filecmp
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler, not an installed one

from compiler import exact_only  # noqa: E402
from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.rule_syntax import split_rules  # noqa: E402
from compiler.rules import _RuleBuilder, deep_recursion, parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402
from pipeline import document  # noqa: E402

SPEC = ROOT / "p4/hicn/hicn.p4"


def workload(n: int, seed: int) -> str:
    rng = random.Random(seed)
    ids = rng.sample(range(1, 1 << 40), n)
    return "".join(f"content == {i} : fwd({rng.randint(1, 200)})\n" for i in ids)


def general_parse(text: str, spec) -> list:
    """The parser without its equality-line path: every rule split into its shape and
    constants (`compiler.rules`, "Speed")."""
    builder = _RuleBuilder(spec, None)
    with deep_recursion():
        return [builder.rule(seg, line, col) for seg, line, col in split_rules(text)]


def one_dumps_per_entry(doc: dict, fh) -> None:
    """entries.json as the writer wrote it before: one json.dumps call per entry."""
    fh.write('{"camus_entries": %d,\n "table_entries": [\n' % doc["camus_entries"])
    fh.write(",\n".join("  " + json.dumps(e) for e in doc["table_entries"]))
    fh.write('\n ],\n "multicast_groups": [\n')
    fh.write(",\n".join("  " + json.dumps(g) for g in doc["multicast_groups"]))
    fh.write("\n ]}\n")


def cpu(f):
    t0 = time.process_time()
    out = f()
    return out, time.process_time() - t0


def row(what: str, base: float, new: float) -> None:
    print(f"{what:10s} {base:10.2f} {new:10.2f} {base / new:8.1f}x")


def phases(n: int, seed: int) -> None:
    spec = load_spec(SPEC)
    text = workload(n, seed)
    with no_cyclic_gc():
        slow_rules, parse_base = cpu(lambda: general_parse(text, spec))
        rules, parse_new = cpu(lambda: parse_rules(text, spec))
        assert [(r.filter, r.ports, r.line, r.text) for r in rules] == \
            [(r.filter, r.ports, r.line, r.text) for r in slow_rules], "the parsers differ"
        with exact_only.general_only():
            slow, compile_base = cpu(lambda: compile_rules(spec, rules))
        fast, compile_new = cpu(lambda: compile_rules(spec, rules))
        naive = io.StringIO()
        _, naive_s = cpu(lambda: one_dumps_per_entry(slow.entries, naive))
        chunked = io.StringIO()
        _, write_base = cpu(lambda: slow.write_entries(chunked))
        direct = io.StringIO()
        _, write_new = cpu(lambda: fast.write_entries(direct))
        assert naive.getvalue() == chunked.getvalue() == direct.getvalue(), "entries.json differs"
        assert fast.entries == slow.entries and fast.stats["entries"] == slow.stats["entries"]
        assert document.dumps(fast.pipeline) == document.dumps(slow.pipeline)
    print(f"{n} rules, {fast.stats['entries']['total']} entries (the same both ways); CPU s:")
    print(f"{'phase':10s} {'baseline':>10s} {'now':>10s} {'ratio':>9s}")
    row("parse", parse_base, parse_new)
    row("compile", compile_base, compile_new)
    row("write", naive_s, write_new)
    print(f"  (write baseline: one json.dumps per entry; from the entry objects now, a chunk "
          f"per encoder call: {write_base:.2f})")
    row("total", parse_base + compile_base + naive_s, parse_new + compile_new + write_new)


def child(args: list[str]) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MiB, stderr) of one child process, which must succeed."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                             env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode()
    if p.returncode:
        sys.exit(f"{' '.join(args)} failed: {stderr}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stderr.strip()


def end_to_end(n: int, seed: int, baseline: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rules_file = Path(tmp) / "hicn.rules"
        rules_file.write_text(workload(n, seed))
        out = Path(tmp) / "out"
        wall, cpu_s, peak, said = child([sys.executable, "-m", "camus", "compile", str(SPEC),
                                        str(rules_file), "--out", str(out)])
        print(f"camus compile, {n} rules: {wall:.2f} s wall, {cpu_s:.2f} s CPU, peak RSS "
              f"{peak:.0f} MiB (parse + compile + write; goal <= 20 s)")
        print(f"  {said}")
        if not baseline:
            return
        slow_out = Path(tmp) / "general"
        b_wall, b_cpu, b_peak, _ = child([sys.executable, __file__, "--general", str(rules_file),
                                          str(slow_out)])
        assert filecmp.cmp(out / "entries.json", slow_out / "entries.json", shallow=False), \
            "entries.json differs from the general path's"
        print(f"general path, {n} rules: {b_wall:.2f} s wall, {b_cpu:.2f} s CPU, peak RSS "
              f"{b_peak:.0f} MiB (same entries.json)")
        print(f"general / camus compile: {b_cpu / cpu_s:.1f}x CPU, {b_peak / peak:.1f}x peak RSS")


def general(rules_file: str, out: str) -> None:
    """The baseline child: what `camus compile` did before the fast paths, phase by phase."""
    spec = load_spec(SPEC)
    with no_cyclic_gc():
        rules = general_parse(Path(rules_file).read_text(), spec)
    with exact_only.general_only():
        c = compile_rules(spec, rules)
    Path(out).mkdir()
    with open(Path(out) / "entries.json", "w") as fh:
        one_dumps_per_entry(c.entries, fh)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=200_000)
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-baseline", action="store_true", help="skip the general path at --big")
    ap.add_argument("--general", nargs=2, metavar=("RULES", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.general:
        general(*args.general)
        return
    # The children first: a child's peak RSS counts what it shared with this process when
    # forked, which after the phases is a few hundred MB.
    if args.big:
        end_to_end(args.big, args.seed, not args.no_baseline)
    if args.rules:
        phases(args.rules, args.seed)


if __name__ == "__main__":
    main()
