"""The produce handler alone, in process: records/s on one 10,000-record batch.

Calls `shim.handlers.produce.handle_produce` on an in-memory broker (no data dir, native
switch) with a stand-in request holding one partition's records: the JSON records of
bench/kafka_vs_camus.py (`{"id":…,"sel":…,"ts":…,"pad":"x…"}`, about 100 bytes, `sel`
uniform in 0..99), one uncompressed batch. Two topics: "plain" (no schema, no view: the
records only need validating) and "viewed" (`camus.schema=sel:u8=$.sel` and a view
`sel == 7`, so every record is extracted, reframed and switched). Each measurement
produces the same batch `--rounds` times into the topic and reports the best round
(least disturbed by the shared machine), as records per second of wall time.

    python bench/produce_path.py            # best of 5, 10,000 records
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

# This checkout's packages, not whatever an editable install maps `shim` to (running a
# script puts bench/, not the checkout, first on sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shim.protocol import native as fast_paths  # noqa: E402
from shim.broker import Broker, Config  # noqa: E402
from shim.handlers.produce import handle_produce  # noqa: E402
from shim.protocol.records import Record, encode_batch  # noqa: E402


def make_batch(n: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    recs = []
    for i in range(n):
        doc = {"id": i, "sel": rng.randrange(100), "ts": time.time(), "pad": ""}
        raw = json.dumps(doc, separators=(",", ":"))
        doc["pad"] = "x" * max(0, 100 - len(raw))
        recs.append(Record(i, now, None, json.dumps(doc, separators=(",", ":")).encode()))
    return encode_batch(recs)


class _Request:
    def __init__(self, topic: str, raw: bytes) -> None:
        part = SimpleNamespace(index=0, records=raw)
        self.body = SimpleNamespace(acks=1, transactional_id=None, topic_data=[
            SimpleNamespace(name=topic, topic_id=None, partition_data=[part])])

    def response(self, **kw):
        return kw


def run(topic: str, raw: bytes, n: int, rounds: int) -> float:
    broker = Broker(Config(default_partitions=1))
    big = {"max.message.bytes": str(64 << 20)}  # 10,000 records of ~110 bytes exceed 1 MiB
    broker.create_topic("plain", 1, big)
    broker.create_topic("viewed", 1, {**big, "camus.schema": "sel:u8=$.sel"})
    broker.create_topic("viewed.sel7", 1, {"camus.source": "viewed", "camus.filter": "sel == 7"})
    ctx = SimpleNamespace(broker=broker)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = handle_produce(ctx, _Request(topic, raw))
        best = min(best, time.perf_counter() - t0)
        code = out["responses"][0]["partition_responses"][0]["error_code"]
        assert code == 0, out
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    raw = make_batch(args.records)
    print(f"shim from {Path(fast_paths.__file__).parents[2]}, "
          f"Kafka fast paths: {'native' if fast_paths.native else 'Python'}")
    for topic in ("plain", "viewed"):
        rate = run(topic, raw, args.records, args.rounds)
        print(f"{topic:7s} {rate:12,.0f} records/s  {1e6 / rate:6.2f} us/record")


if __name__ == "__main__":
    main()
