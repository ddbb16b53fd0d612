"""Syncing a 15,000-entry view through P4Runtime: bmv2 against camus's remote switch, with
the embedded switch as the baseline, all in one run (issue 23 item 5).

One view whose filter is `--alternatives` random 5-field boxes (bench/compile_stall.py's:
40 boxes give about 15,800 table writes) is subscribed on a fresh `shim.datapath.DataPath`
per target and synced (`DataPath.sync()`: the compile, the diff and the writes, one Write
per dependent step of the diff, each cut at `--batch` updates). The compile is the same on
every target, so a remote target's time less the embedded switch's is its writing, and
writes / (remote - embedded) its write rate. Each remote target is measured at every batch
size of `--batches` (500 was the client's default before this measurement). After every
sync the device is read back (a P4Runtime wildcard Read, the remote target's audit) and
must hold every entry; the read's time is printed too.

    python bench/bmv2_sync.py                          # switch and bmv2, batches 500 and 10000
    python bench/bmv2_sync.py --targets bmv2 --batches 100,500,2000,10000

`bmv2` needs p4c-bm2-ss and simple_switch_grpc on PATH and root (its namespace and veths).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compile_stall import FIELDS, range_filter  # noqa: E402  (the same many-range view)
from controller.targets import open_target  # noqa: E402
from shim.datapath import DataPath  # noqa: E402
from shim.schema import parse_schema  # noqa: E402
from shim.subscriptions import view_filter  # noqa: E402

TOPIC = 1


def sync(spec: str, alternatives: int, batch: int | None) -> dict:
    target = open_target(spec)
    if batch is not None:
        target.batch = batch
    dp = DataPath(target)
    try:
        schema = parse_schema(",".join(f"{x}:u32=$.{x}" for x in FIELDS))
        dp.subscribe(dp.allocate_port(), TOPIC, None, view_filter(dp.spec, schema, range_filter(alternatives)))
        start = time.perf_counter()
        writes = dp.sync()
        took = time.perf_counter() - start
        want = len(dp.entries["table_entries"])
        read = None
        if batch is not None:
            start = time.perf_counter()
            held = len(target.entries())
            read = time.perf_counter() - start
            if held != want:
                raise SystemExit(f"MISMATCH: {spec} holds {held} entries after the sync, not {want}")
        return {"writes": writes, "entries": want, "seconds": took, "read": read}
    finally:
        dp.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alternatives", type=int, default=40, help="boxes in the view's filter")
    ap.add_argument("--targets", default="switch,bmv2", help="remote target specs, comma-separated")
    ap.add_argument("--baseline", default="embedded:native")
    ap.add_argument("--batches", default="500,10000", help="updates per WriteRequest, comma-separated")
    args = ap.parse_args()
    base = sync(args.baseline, args.alternatives, None)
    print(f"a view of {args.alternatives} boxes: {base['writes']} writes, {base['entries']} entries")
    print(f"{args.baseline:>16}: sync {base['seconds']:.2f} s (the compile; baseline)")
    for spec in args.targets.split(","):
        for batch in map(int, args.batches.split(",")):
            r = sync(spec, args.alternatives, batch)
            writing = max(r["seconds"] - base["seconds"], 1e-9)
            print(f"{spec:>16}: batch {batch:>6}: sync {r['seconds']:.2f} s, ratio to baseline "
                  f"{r['seconds'] / base['seconds']:.1f}x, writing about {r['writes'] / writing:,.0f} "
                  f"writes/s; read back {r['entries']} entries in {r['read']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
