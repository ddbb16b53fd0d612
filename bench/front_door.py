"""What the front door costs a producer: produce through `camus serve --kafka` into an Apache
Kafka cluster against produce straight to the same cluster, same client, same run (issue 27).

The cluster is `--kafka HOST:PORT` (default $KAFKA_PEER, else 127.0.0.1:19092: start one with
../shared/peers/kafka/kafka.sh start). The script starts `camus serve --kafka` on a free
loopback port itself and stops it at the end. One confluent-kafka producer configuration
(acks=all, enable.idempotence=true, linger.ms=5, librdkafka's default batch size) sends N
records of 100 bytes into a fresh 4-partition topic, records/s from the first produce() until
flush() returns, every record acknowledged (else exit 1). R rounds; in each, both ways run,
the one going first alternating; reported: each round's rate both ways, and the median over
rounds of camus / direct. Before measuring, an untimed warm-up of 20,000 records each way.
Informational, same run: consuming the last round's N records (a confluent-kafka consumer in
a fresh group, records/s from its first record to its Nth), both ways, alternating.

The machine is shared and noisy: compare ratios from the same run, not absolute figures.

Run: `python bench/front_door.py [--kafka HOST:PORT] [--records N] [--rounds R] [--json FILE]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VALUE = b"x" * 100


def start_front_door(kafka: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "camus.cli", "serve", "--kafka", kafka,
                             "--listen", "127.0.0.1:0", "-q"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=sys.stderr, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    line = proc.stdout.readline()
    m = re.search(r"listening on ([\d.]+:\d+)", line)
    if m is None:
        proc.kill()
        raise SystemExit(f"camus serve --kafka {kafka} did not start: {line!r}")
    return proc, m.group(1)


def create_topic(kafka: str, partitions: int = 4) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"fd-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka, "log_level": 0})  # alive until the result
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    return name


def produce(bootstrap: str, topic: str, records: int) -> float:
    """Records/s for `records` acknowledged records."""
    from confluent_kafka import Producer
    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "log_level": 0})
    p.list_topics(topic, timeout=30)  # connected and the topic known before the clock starts
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, VALUE, on_delivery=lambda err, msg: err and failed.append(err))
                break
            except BufferError:  # librdkafka's queue is full: let deliveries drain
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - start
    if left or failed:
        raise SystemExit(f"{bootstrap}: {left} records unsent, {len(failed)} failed: {failed[:3]}")
    return records / elapsed


def consume(bootstrap: str, topic: str, records: int) -> float:
    """Records/s reading `records` records of `topic` from the beginning in a fresh group."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fd-bench-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "log_level": 0})
    c.subscribe([topic])
    seen, start, deadline = 0, None, time.monotonic() + 300
    while seen < records and time.monotonic() < deadline:
        for m in c.consume(10000, 1):
            if not m.error():
                start = start or time.perf_counter()
                seen += 1
    c.close()
    if seen < records:
        raise SystemExit(f"{bootstrap}: read {seen} of {records} records")
    return records / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kafka", default=os.environ.get("KAFKA_PEER", "127.0.0.1:19092"))
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    proc, door = start_front_door(args.kafka)
    rows = []
    try:
        for bootstrap in (args.kafka, door):
            produce(bootstrap, create_topic(args.kafka), 20_000)
        for r in range(args.rounds):
            order = [("direct", args.kafka), ("camus", door)]
            if r % 2:
                order.reverse()
            rates = {}
            for name, bootstrap in order:
                topic = create_topic(args.kafka)
                rates[name] = produce(bootstrap, topic, args.records)
            rates["ratio"] = rates["camus"] / rates["direct"]
            rows.append(rates)
            print(f"round {r + 1}: direct {rates['direct']:,.0f} records/s, through camus "
                  f"{rates['camus']:,.0f} records/s, camus/direct {rates['ratio']:.3f}", flush=True)
        reads = []
        for r in range(args.rounds):
            order = [("direct", args.kafka), ("camus", door)]
            if r % 2:
                order.reverse()
            rates = {name: consume(bootstrap, topic, args.records) for name, bootstrap in order}
            rates["ratio"] = rates["camus"] / rates["direct"]
            reads.append(rates)
            print(f"consume round {r + 1}: direct {rates['direct']:,.0f} records/s, through camus "
                  f"{rates['camus']:,.0f} records/s, camus/direct {rates['ratio']:.3f}", flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
    median = statistics.median(r["ratio"] for r in rows)
    print(f"consume: median camus/direct {statistics.median(r['ratio'] for r in reads):.3f}")
    print(f"median camus/direct over {len(rows)} rounds: {median:.3f} "
          f"({args.records:,} records of {len(VALUE)} bytes, acks=all, idempotent, linger.ms=5; "
          f"load average {os.getloadavg()[0]:.1f})")
    if args.json:
        args.json.write_text(json.dumps({"rounds": rows, "median_ratio": median,
                                         "consume_rounds": reads, "records": args.records},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
