"""Produce with views with state against the same views without, in process: records/s.

An in-memory broker (no data dir, native switch) with one source topic
(`camus.schema=stock:str8=$.stock,price:u32=$.price`) and K views of it, either stateless
(`stock == "GOOGL" and price > 50`) or with state (`stock == "GOOGL" and avg(price) > 50`:
fed their own copy of every record, docs/stateful.md "Kafka views"). Each round appends the
same batch of `--records` JSON records (stock one of 4 symbols, price 0..99, timestamps 1 ms
apart, so across seconds) through `Broker.append`, for each configuration in turn
(alternating, so the shared machine's load falls on both alike); the best round of each is
reported as records per second of wall time, with the ratio with state / without for each K.

    python bench/stateful_views.py            # K = 1 and 4, best of 5, 10,000 records
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

# This checkout's packages, not whatever an editable install maps them to.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shim.broker import Broker, Config  # noqa: E402
from shim.protocol.records import Record, decode_batches, encode_batch  # noqa: E402

SCHEMA = "stock:str8=$.stock,price:u32=$.price"
FILTERS = {"stateless": 'stock == "GOOGL" and price > 50',
           "state": 'stock == "GOOGL" and avg(price) > 50'}


def make_batch(n: int, t0: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    return encode_batch([Record(i, t0 + i, None, json.dumps(
        {"stock": rng.choice(["GOOGL", "MSFT", "AAPL", "IBM"]), "price": rng.randrange(100)}
    ).encode()) for i in range(n)])


def broker(kind: str, views: int) -> Broker:
    b = Broker(Config(default_partitions=1))
    b.create_topic("src", 1, {"camus.schema": SCHEMA, "max.message.bytes": str(64 << 20)})
    for i in range(views):
        b.create_topic(f"v{i}", 1, {"camus.source": "src", "camus.filter": FILTERS[kind]})
    return b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--views", type=int, nargs="+", default=[1, 4])
    args = ap.parse_args()
    configs = [(kind, k) for k in args.views for kind in FILTERS]
    brokers = {c: broker(*c) for c in configs}
    best = dict.fromkeys(configs, float("inf"))
    selected = {}
    for r in range(args.rounds):
        raw = make_batch(args.records, 1_764_000_000_000 + r * 3_600_000)
        for c in configs:
            b = brokers[c]
            t = time.perf_counter()
            b.append(b.catalog.get("src"), 0, raw, decode_batches(raw))
            best[c] = min(best[c], time.perf_counter() - t)
            selected[c] = b.logs[("v0", 0)].next_offset and len(
                [1 for bt in decode_batches(b.logs[("v0", 0)].read(0, 1 << 40)) for _ in bt.records])
    print(f"{args.records} records per round, best of {args.rounds}")
    print("views  kind        records/s   records in v0 (all rounds)")
    for kind, k in configs:
        print(f"{k:5d}  {kind:10s} {args.records / best[(kind, k)]:10,.0f}   {selected[(kind, k)]}")
    for k in args.views:
        ratio = best[("stateless", k)] / best[("state", k)]
        print(f"K={k}: with state / without = {ratio:.2f}x")


if __name__ == "__main__":
    main()
