"""Highway monitoring: the switch's rate as the number of monitored regions grows, against a
monitoring server that filters the reports itself (issue 26 item 5).

The workload is `camus demo highway`'s (apps/highway: the seeded traffic model, regions on its
highways, one rule `x > X0 and x < X1 and y > Y0 and y < Y1 and spd > 55 : fwd(n)` per
region). For each region count, in the same run on the same reports:

* switch: the rules compiled by `compiler.compile`, the reports' frames through the native
  data plane (`process_packed`: parse, stage walk, replication to every region's port, egress),
  reports per second of CPU time (`time.process_time`, so per core), median of the rounds;
* host: what a monitoring server without camus does with every report: check it against every
  region's rule (`compiler.semantics.evaluate`, a sample of reports, extrapolated);
* the ratio switch / host, and the switch's rate against its own at the fewest regions (the
  paper's point: the filters sit in table memory, so their number barely moves the rate).

Run: `python bench/highway.py` (`--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's camus, not an installed one

from apps.highway import wire  # noqa: E402
from apps.highway.regions import place, rules_text  # noqa: E402
from apps.highway.traffic import TrafficConfig, drive  # noqa: E402
from compiler.compile import compile_rules  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.semantics import evaluate  # noqa: E402
from compiler.spec import load_spec  # noqa: E402
from switch.dataplane import load  # noqa: E402
from switch.native_dataplane import pack  # noqa: E402

SPEC = ROOT / "p4" / "highway" / "highway.p4"
FIELDS = ("position_report.x", "position_report.y", "position_report.spd")


def switch_rate(compiled, buf: bytes, lengths: bytes, n: int, rounds: int) -> tuple[float, int]:
    """Reports per CPU second through the native data plane (median of `rounds`); copies out."""
    dp = load(compiled.pipeline, compiled.entries, impl="native")
    rates, copies = [], 0
    for _ in range(rounds):
        t = time.process_time()
        _, records = dp.process_packed(buf, lengths, 0)
        rates.append(n / max(time.process_time() - t, 1e-9))
        copies = len(records) // 16
    return statistics.median(rates), copies


def host_rate(rules, reports, sample: int) -> float:
    """Reports per CPU second checked against every rule by the reference evaluator."""
    chosen = reports[:: max(1, len(reports) // sample)][:sample]
    t = time.process_time()
    for r in chosen:
        evaluate(rules, dict(zip(FIELDS, (r.x, r.y, r.spd))))
    return len(chosen) / max(time.process_time() - t, 1e-9)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer reports, regions and rounds")
    args = p.parse_args(argv)
    config = TrafficConfig(cars=2000, duration=1.0 if args.quick else 5.0)
    counts = (10, 100) if args.quick else (10, 30, 100, 300, 500)
    rounds, sample = (3, 100) if args.quick else (7, 400)
    traffic = drive(config)
    frames = [wire.frame(r) for r in traffic.reports]
    buf, lengths = pack(frames)
    spec = load_spec(SPEC)
    print(f"{len(frames):,} position reports ({config.cars:,} cars, {config.duration:g} s, seed {config.seed}); "
          f"native data plane, median of {rounds} rounds; host: evaluate() on {sample} reports")
    print(f"{'regions':>7} {'entries':>8} {'states':>7} {'copies/report':>13} {'switch reports/s':>17} "
          f"{'host reports/s':>15} {'switch/host':>11} {'switch vs fewest':>16}")
    first = None
    for count in counts:
        rules = parse_rules(rules_text(place(count, traffic.highways, config, config.seed)), spec)
        compiled = compile_rules(spec, rules)
        rate, copies = switch_rate(compiled, buf, lengths, len(frames), rounds)
        host = host_rate(rules, traffic.reports, sample)
        first = first or rate
        print(f"{count:>7} {compiled.stats['entries']['total']:>8,} {compiled.stats['states']:>7,} "
              f"{copies / len(frames):>13.3f} {rate:>17,.0f} {host:>15,.0f} {rate / host:>11,.0f} "
              f"{rate / first:>16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
