"""Benchmark: a Siena-style synthetic workload, camus entries against one big table (paper Fig. 12).

The generator follows the published description of Siena's synthetic benchmark (Carzaniga et
al.): each subscription is a conjunction of `--predicates` constraints on distinct attributes
drawn from `--attributes` integer attributes; each constraint's operator comes from a mix
(`--ops`, default equality 40 %, less-than 30 %, greater-than 30 %) and its value from a
uniform or Zipf distribution over 0..`--values`-1; the action forwards to one of 200 hosts.

The baseline, in the same run, is one big ternary table holding each subscription as one row
per combination of the prefixes its ranges expand into (a range on a 16-bit attribute is up to
30 prefixes). It is a lower bound: a table that must return the union of every matching
subscription's ports also needs rows for their overlaps. Printed: subscriptions, predicates,
camus entries, baseline rows, their ratio, and the compile's CPU time.

    python bench/siena.py [--subs 100,1000,5000] [--predicates 1,2,3] [--zipf] [--seed S]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler, not an installed one

from compiler.compile import TooLarge, check_size, compile_rules, no_cyclic_gc  # noqa: E402
from compiler.estimate import DEFAULT_MAX_ENTRIES  # noqa: E402
from compiler.lanes import parse_lanes  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import parse_spec  # noqa: E402
from pipeline.match_kinds import prefixes  # noqa: E402

WIDTH = 16


def spec_text(attributes: int) -> str:
    fields = "\n".join(f"    bit<{WIDTH}> a{i};" for i in range(attributes))
    pragmas = "\n".join(f"@pragma query_field(event.a{i})" for i in range(attributes))
    return f"header event {{\n{fields}\n}}\n@pragma udp_port(5555)\n{pragmas}\n"


def workload(rng: random.Random, subs: int, predicates: int, attributes: int, values: int,
             ops: dict[str, float], zipf: bool) -> list[list[tuple[int, str, int]]]:
    """Subscriptions as lists of (attribute, op, value)."""
    weights = [1 / (k + 1) for k in range(values)] if zipf else None
    names, mix = list(ops), list(ops.values())
    out = []
    for _ in range(subs):
        attrs = rng.sample(range(attributes), predicates)
        vals = rng.choices(range(values), weights=weights, k=predicates)
        out.append([(a, rng.choices(names, mix)[0], v) for a, v in zip(attrs, vals)])
    return out


def rules_text(rng: random.Random, subs) -> str:
    return "\n".join(" and ".join(f"a{a} {op} {v}" for a, op, v in s) +
                     f" : fwd({rng.randint(1, 200)})" for s in subs)


def big_table_rows(subs) -> int:
    top = (1 << WIDTH) - 1
    rows = 0
    for s in subs:
        per = []
        for _, op, v in s:
            if op == "==":
                per.append(1)
            elif op == "<":
                per.append(len(prefixes(0, v - 1, WIDTH)) if v > 0 else 0)
            else:  # ">"
                per.append(len(prefixes(v + 1, top, WIDTH)) if v < top else 0)
        rows += math.prod(per)
    return rows


def compile_once(spec, rules, lanes) -> tuple[str, int, float]:
    """(entries or "refused", lanes used, CPU seconds) of one compile under the budget."""
    t0 = time.process_time()
    if lanes == 1:
        # One diagram over budget by the estimate is not built: under 10,000 conjunctions the
        # compiler would try (and here stop after minutes of splitting; see BENCHMARKS.md).
        predicted = check_size(spec, rules, None, False, 0)
        if predicted.entries > DEFAULT_MAX_ENTRIES:
            return f"over budget (estimate {predicted.entries:.1e})", 0, time.process_time() - t0
    try:
        c = compile_rules(spec, rules, max_entries=DEFAULT_MAX_ENTRIES, lanes=lanes)
    except TooLarge as exc:  # the estimate is over the budget: say so, do not wait
        said = str(exc).split(" with the field order")[0].split(" in ")[0]
        return "refused (" + said.removeprefix("the rules would compile to ") + ")", 0, \
            time.process_time() - t0
    return f"{c.stats['entries']['total']:,}", len(c.stats.get("lanes", [1])), \
        time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subs", default="100,1000,5000")
    ap.add_argument("--predicates", default="1,2,3")
    ap.add_argument("--attributes", type=int, default=8)
    ap.add_argument("--values", type=int, default=1000)
    ap.add_argument("--ops", default="==:0.4,<:0.3,>:0.3")
    ap.add_argument("--zipf", action="store_true", help="Zipf values (default uniform)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lanes", default="auto", help="the lanes compile's --lanes (default auto)")
    args = ap.parse_args()
    lanes = parse_lanes(args.lanes)
    ops = {k: float(w) for k, w in (p.split(":") for p in args.ops.split(","))}
    spec = parse_spec(spec_text(args.attributes), name="siena")
    print(f"| subs | preds | one diagram: entries | CPU s | lanes: entries | lanes | CPU s "
          f"| big table rows | rows / lane entries |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in map(int, args.subs.split(",")):
        for k in map(int, args.predicates.split(",")):
            rng = random.Random(args.seed * 1_000_003 + n * 31 + k)
            subs = workload(rng, n, k, args.attributes, args.values, ops, args.zipf)
            with no_cyclic_gc():
                rules = parse_rules(rules_text(rng, subs), spec)
            rows = big_table_rows(subs)
            one, _, one_cpu = compile_once(spec, rules, 1)
            split, used, split_cpu = compile_once(spec, rules, lanes)
            ratio = rows / int(split.replace(",", "")) if used else float("nan")
            print(f"| {n:,} | {k} | {one} | {one_cpu:.2f} | {split} | {used} | {split_cpu:.2f} "
                  f"| {rows:,} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
