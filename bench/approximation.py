"""What the broker's α fallback costs: the same views, exact on the switch and approximated.

A data path on the embedded native switch (`shim.datapath.DataPath`, no sockets) with
`--views` range views (`price > P and qty < Q`, constants uniform in 0..10,000) over one
topic (`camus.schema=price:u32=$.price,qty:u32=$.qty`), then `--records` JSON records
(price and qty uniform in 0..11,000) sent through it in batches of 1,000, as the broker
sends a produced batch. Two configurations, alternating round by round, best round of each:

* exact: `max_entries=0` (no budget), the views' exact rules on the switch;
* approximated: `max_entries` = the exact entries / `--shrink`, so the data path rounds the
  views' bounds (α per field from the estimate) and re-checks every record a view receives.

Printed per configuration: table entries, α, records/s through the data path (extracting,
framing, switching, rebuilding the delivered records, and for the approximation the
re-check; of wall time, and per CPU second of this process, which a loaded machine
disturbs less), records the views kept, records re-checked and dropped as false positives (the
extra traffic, as a share of what the views kept). Both must leave each view the same
records (checked).

    python bench/approximation.py                 # 50 views, 20,000 records, 5 rounds
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from pathlib import Path

# This checkout's packages first (running a script puts bench/ first on sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.targets import open_target  # noqa: E402
from shim.approximation import format_alpha  # noqa: E402
from shim.datapath import DataPath  # noqa: E402
from shim.protocol.records import Record  # noqa: E402
from shim.schema import parse_schema  # noqa: E402
from shim.subscriptions import view_filter  # noqa: E402

SCHEMA = parse_schema("price:u32=$.price,qty:u32=$.qty")
BATCH = 1_000


def build(filters: list[str], max_entries: int) -> tuple[DataPath, list[int]]:
    dp = DataPath(open_target("embedded:native"), max_entries)
    ports = []
    for text in filters:
        port = dp.allocate_port()
        dp.subscribe(port, 1, None, view_filter(dp.spec, SCHEMA, text))
        ports.append(port)
    dp.sync()
    return dp, ports


def one_round(dp: DataPath, batches: list[list[Record]]
              ) -> tuple[float, float, dict[int, list[int]]]:
    kept: dict[int, list[int]] = {}

    def then(out):
        for port, got in out.items():
            kept.setdefault(port, []).extend(o for o, _ in got)

    t0, c0 = time.perf_counter(), time.process_time()
    for batch in batches:
        dp.send(1, 0, SCHEMA, batch, then)
    return time.perf_counter() - t0, time.process_time() - c0, kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--views", type=int, default=50)
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shrink", type=int, default=8, help="budget = exact entries / this")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    rng = random.Random(16)
    filters = [f"price > {rng.randrange(10_000)} and qty < {rng.randrange(10_000)}"
               for _ in range(args.views)]
    docs = [{"price": rng.randrange(11_000), "qty": rng.randrange(11_000)}
            for _ in range(args.records)]
    records = [Record(i, 1, None, json.dumps(d).encode()) for i, d in enumerate(docs)]
    batches = [records[i:i + BATCH] for i in range(0, len(records), BATCH)]

    exact, ports = build(filters, 0)
    budget = max(1, exact.held.entries // args.shrink)
    approx, ports2 = build(filters, budget)
    assert ports == ports2
    best = {"exact": float("inf"), "approximated": float("inf")}
    cpu = dict(best)
    kept = {}
    for _ in range(args.rounds):
        for name, dp in (("exact", exact), ("approximated", approx)):
            seconds, cpu_seconds, got = one_round(dp, batches)
            best[name] = min(best[name], seconds)
            cpu[name] = min(cpu[name], cpu_seconds)
            kept[name] = got
    assert kept["exact"] == kept["approximated"], "the views' records differ"

    rounds = args.rounds
    print(f"{args.views} views, {args.records:,} records in batches of {BATCH:,}, "
          f"best of {rounds} alternating rounds")
    base = args.records / best["exact"]
    cpu_base = args.records / cpu["exact"]
    for name, dp in (("exact", exact), ("approximated", approx)):
        views_kept = sum(map(len, kept[name].values()))
        rate, cpu_rate = args.records / best[name], args.records / cpu[name]
        checked = sum(dp.stats.rechecked.values()) // rounds
        dropped = sum(dp.stats.false_positives.values()) // rounds
        print(f"{name:>12}: {dp.held.entries:>6,} entries (budget "
              f"{dp.budget.max_entries or 'none'}), alpha {format_alpha(dp.held.alpha)}; "
              f"{rate:,.0f} records/s of wall time ({rate / base:.2f} x exact), "
              f"{cpu_rate:,.0f} per CPU second ({cpu_rate / cpu_base:.2f} x exact); views kept "
              f"{views_kept:,}, re-checked {checked:,}, dropped {dropped:,} "
              f"({dropped / max(1, views_kept):.1%} extra traffic)")


if __name__ == "__main__":
    main()
