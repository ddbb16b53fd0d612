"""The remote target (`camus switch serve` over P4Runtime and loopback UDP) against the
embedded switch, on the same workload through the broker's data path.

One `shim.datapath.DataPath` per target, in an asyncio loop as the broker runs it, with two
views over one source topic (`sel < 10` and `sel >= 50`, `sel` uniform in 0..99, so 60 % of
the records are delivered, some to both) and one member-style counting port (`sel == 7`).
Records are the ~100-byte JSON records of bench/produce_path.py, sent in batches of
`--batch`; a batch is done when the target has reported it (`then`). Figures per target:
records/s over the whole run (sends kept `--window` batches ahead of reports), and the
latency of one batch sent alone (send -> report), median and p99 over `--probes` batches.
The embedded switch is the baseline, measured in the same run; the ratio is remote over
embedded. Also printed: how many copies came back from the device and how many had to be
repaired from the source (none is the expected answer on loopback). Then the control side:
one view whose filter is `--alternatives` random 5-field boxes (bench/compile_stall.py's),
subscribed and synced on each target (`DataPath.sync()`: compile, diff and the writes; the
compile is the same for both, so the difference is the writing).

    python bench/remote_target.py                      # 20,000 records, batches of 100
    python bench/remote_target.py --records 5000 --target switch:python
    python bench/remote_target.py --alternatives 40
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compile_stall import FIELDS, range_filter  # noqa: E402  (the same many-range view)
from controller.targets import open_target  # noqa: E402
from shim.datapath import DataPath  # noqa: E402
from shim.protocol.records import Record  # noqa: E402
from shim.schema import parse_schema  # noqa: E402
from shim.subscriptions import view_filter  # noqa: E402

TOPIC = 1


def batches(n: int, size: int, seed: int = 1) -> list[list[Record]]:
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    recs = []
    for i in range(n):
        doc = {"id": i, "sel": rng.randrange(100), "pad": ""}
        doc["pad"] = "x" * max(0, 100 - len(json.dumps(doc)))
        recs.append(Record(i, now, None, json.dumps(doc).encode()))
    return [recs[i:i + size] for i in range(0, n, size)]


async def measure(spec: str, work: list[list[Record]], window: int, probes: int) -> dict:
    dp = DataPath(open_target(spec))
    try:
        dp.compile_in_background()
        schema = parse_schema("sel:u8=$.sel")
        for expr, log in (("sel < 10", True), ("sel >= 50", True), ("sel == 7", False)):
            dp.subscribe(dp.allocate_port(), TOPIC, None, view_filter(dp.spec, schema, expr), log=log)
        ready = asyncio.get_running_loop().create_future()
        dp.when_applied(lambda: ready.set_result(None))
        await ready
        delivered = 0

        def sent_one(done: asyncio.Semaphore):
            def then(out):
                nonlocal delivered
                delivered += sum(map(len, out.values()))
                done.release()
            return then

        # Throughput: at most `window` batches under way.
        slots = asyncio.Semaphore(window)
        start = time.perf_counter()
        for b in work:
            await slots.acquire()
            dp.send(TOPIC, 0, schema, b, sent_one(slots))
        for _ in range(window):
            await slots.acquire()
        took = time.perf_counter() - start
        records = sum(map(len, work))
        # Latency: one batch alone.
        lat = []
        for b in work[:probes]:
            one = asyncio.Semaphore(0)
            t0 = time.perf_counter()
            dp.send(TOPIC, 0, schema, b, sent_one(one))
            await one.acquire()
            lat.append((time.perf_counter() - t0) * 1000)
        lat.sort()
        stats = getattr(dp.target, "stats", None)
        return {"rate": records / took, "median_ms": statistics.median(lat),
                "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                "delivered": delivered, "stats": stats}
    finally:
        dp.close()


def measure_writes(spec: str, alternatives: int) -> tuple[int, float]:
    dp = DataPath(open_target(spec))
    try:
        schema = parse_schema(",".join(f"{x}:u32=$.{x}" for x in FIELDS))
        dp.subscribe(dp.allocate_port(), TOPIC, None, view_filter(dp.spec, schema, range_filter(alternatives)))
        start = time.perf_counter()
        writes = dp.sync()
        return writes, time.perf_counter() - start
    finally:
        dp.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--window", type=int, default=8, help="batches under way at once")
    ap.add_argument("--probes", type=int, default=100, help="batches timed alone for latency")
    ap.add_argument("--target", default="switch", help="the remote target spec (default switch)")
    ap.add_argument("--baseline", default="embedded:native")
    ap.add_argument("--alternatives", type=int, default=20,
                    help="boxes in the filter of the write measurement (0: skip it)")
    args = ap.parse_args()
    work = batches(args.records, args.batch)
    print(f"{args.records} records in batches of {args.batch}, {args.window} batches under way; "
          f"latency of {args.probes} batches sent alone")
    results = {}
    for spec in (args.baseline, args.target):
        r = results[spec] = asyncio.run(measure(spec, work, args.window, args.probes))
        extra = ""
        if r["stats"] is not None:
            s = r["stats"]
            extra = f"  (copies back {s.received}, repaired {s.repaired}, unexpected {s.unexpected})"
        print(f"{spec:>16}: {r['rate']:>10,.0f} records/s  latency median {r['median_ms']:.2f} ms  "
              f"p99 {r['p99_ms']:.2f} ms  delivered {r['delivered']}{extra}")
    base, remote = results[args.baseline], results[args.target]
    if base["delivered"] != remote["delivered"]:
        print(f"MISMATCH: {args.target} delivered {remote['delivered']}, "
              f"{args.baseline} {base['delivered']}")
        return 1
    print(f"ratio {args.target}/{args.baseline}: throughput {remote['rate'] / base['rate']:.4f}, "
          f"median latency {remote['median_ms'] / base['median_ms']:.1f}x")
    if args.alternatives:
        (n, t_base), (_, t_remote) = (measure_writes(s, args.alternatives)
                                      for s in (args.baseline, args.target))
        print(f"a view of {args.alternatives} boxes, {n} writes: sync {t_base:.2f} s on "
              f"{args.baseline}, {t_remote:.2f} s on {args.target} (writing: about "
              f"{n / max(t_remote - t_base, 1e-9):,.0f} writes/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
