"""Views materialised into an Apache Kafka cluster: rate with one and two camus instances,
and the lag from a source append to its view record (issue 27 item 5).

Starts a three-node KRaft cluster of Apache Kafka 4.3.1 from the Maven jars
(`tests/cluster/kafka_cluster.py`: replication 3, min.insync.replicas 2, -Xmx384m each) and
`camus cluster materialise` instances as child processes, all on this machine, and measures
in one run:

* rate: N records (default 200,000; ~80-byte JSON `{"n", "sel", "pad"}`, `sel` uniform in
  0..99) are produced into a 4-partition source first; then a view `sel < 50` (half the
  records) is created for a deployment of one instance, and the time from its creation
  (the command's return) until its consumer group has committed every source offset gives
  records/s (this includes the instance noticing the view in its catalog, within a second,
  opening its transactional producer and joining the group); the
  steady rate, between 10 % and 90 % of the source committed, is printed too. The same again
  with a fresh deployment of two instances. The baseline, same run: a read_committed
  confluent-kafka consumer reading the N source records (what reading the source alone costs
  on this machine), so each rate is also a ratio to it.
* lag: a source topic with `message.timestamp.type=LogAppendTime` and a view of it (`sel <
  50`) materialised by the one-instance deployment; records are produced at a fixed rate
  (default 1,000/s for 20 s, the first 5 s not counted); a read_committed consumer of the
  view takes its receive time minus the record's timestamp, which is the source's append
  time (the view record keeps it); the baseline, same run, is a read_committed consumer of the
  source itself measured the same way, and a second baseline isolates what camus adds to
  Kafka's transactions: a plain confluent-kafka consume-transform-produce loop (this file's
  `--copy-loop`, a child process: the same client settings, batches and transactions, the
  filter applied in Python to the parsed JSON instead of through the switch) copying the
  same source into a topic read the same way. p50 and p99 in ms.

Run: `python bench/cluster_views.py [--records N] [--rate R] [--seconds S] [--json FILE]`
with KAFKA_LIBS=DIR (Kafka's jars; see tests/cluster/kafka_cluster.py). The machine has two
cores for three JVMs, the instances, the producer and the consumers: compare ratios.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from shim.cluster.catalog import group_id  # noqa: E402
from tests.cluster.instances import Instance  # noqa: E402
from tests.cluster.kafka_cluster import KafkaCluster, missing  # noqa: E402
from tests.cluster.kafka_io import committed, end_offsets  # noqa: E402

SCHEMA = "sel:u8=$.sel"
FILTER = "sel < 50"
PARTITIONS = 4


def camus(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "camus.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise SystemExit(f"camus {' '.join(args)}: {done.stderr}")


def create(bootstrap: str, name: str, configs: dict | None = None) -> None:
    """A topic of PARTITIONS partitions, replication 3."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 3, config=configs or {})])[name].result(60)


def produce(bootstrap: str, topic: str, n: int, rate: float | None = None,
            start_n: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5 if rate is None else 0})
    rng = random.Random(start_n)
    began = time.monotonic()
    for i in range(n):
        doc = {"n": start_n + i, "sel": rng.randrange(100), "pad": "x" * 40}
        while True:
            try:
                p.produce(topic, json.dumps(doc).encode())
                break
            except BufferError:
                p.poll(0.05)
        if rate is not None:
            p.poll(0)
            ahead = (i + 1) / rate - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
        elif i % 1000 == 999:
            p.poll(0)
    assert p.flush(120) == 0


def read_rate(bootstrap: str, topic: str, n: int) -> float:
    """Records/s of a read_committed consumer reading `n` records of `topic` from its start."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-read-{time.time()}",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    began = time.monotonic()
    c.subscribe([topic])
    got = 0
    while got < n:
        got += sum(1 for m in c.consume(10000, 1.0) if not m.error())
    took = time.monotonic() - began
    c.close()
    return n / took


def materialise(bootstrap: str, deployment: str, instances: int, source: str, n: int,
                view: str, logs: list) -> dict:
    """Start `instances` instances of a fresh deployment, create the view, time it to the
    end of the source."""
    started = [Instance(bootstrap, deployment, f"i{k}") for k in range(instances)]
    logs.extend(started)
    camus("cluster", "schema", "set", source, SCHEMA, "--kafka", bootstrap,
          "--deployment", deployment)
    camus("cluster", "view", "create", view, "--source", source, "--filter", FILTER,
          "--kafka", bootstrap, "--deployment", deployment)
    began = time.monotonic()  # the view is in the catalog from here
    group = group_id(deployment, view)
    ends = end_offsets(bootstrap, source)
    total = sum(ends.values())
    marks: dict[float, float] = {}
    while True:
        try:
            done = sum(max(0, o) for o in committed(bootstrap, group, source).values())
        except Exception:  # noqa: BLE001 - the group not formed yet
            done = 0
        now = time.monotonic() - began
        for frac in (0.1, 0.9):
            if frac not in marks and done >= frac * total:
                marks[frac] = now
        if done >= total:
            break
        time.sleep(0.2)
    took = time.monotonic() - began
    steady = 0.8 * total / (marks[0.9] - marks[0.1]) if marks[0.9] > marks[0.1] else float("nan")
    return {"instances": instances, "seconds": took, "records_per_s": n / took,
            "steady_records_per_s": steady}


def lag(bootstrap: str, source: str, views: dict[str, str], rate: float, seconds: float,
        warmup: float) -> dict:
    """Receive time minus source append time, ms, for a reader of the source and one of
    each of `views` ({label: topic})."""
    topics = {"source": source, **views}
    samples: dict[str, list[float]] = {label: [] for label in topics}
    stop = threading.Event()
    ready = threading.Barrier(len(topics) + 1)

    def reader(label: str, topic: str) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-lag-{topic}",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 10})
        c.assign([TopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
        c.consume(1, 1.0)
        ready.wait()
        counting_from = time.time() + warmup
        while not stop.is_set():
            for m in c.consume(1000, 0.1):
                if m.error():
                    continue
                now = time.time() * 1000
                if now / 1000 >= counting_from:
                    samples[label].append(now - m.timestamp()[1])
        c.close()

    threads = [threading.Thread(target=reader, args=item) for item in topics.items()]
    for t in threads:
        t.start()
    ready.wait()
    produce(bootstrap, source, int(rate * seconds), rate=rate, start_n=10_000_000)
    time.sleep(3)
    stop.set()
    for t in threads:
        t.join()

    def pct(xs: list[float], q: float) -> float:
        return statistics.quantiles(xs, n=1000)[int(q * 1000) - 1] if len(xs) > 1 else float("nan")

    return {label: {"records": len(xs), "p50_ms": pct(xs, 0.5), "p99_ms": pct(xs, 0.99)}
            for label, xs in samples.items()}


def rates(b: str, records: int, instances: list, results: dict) -> None:
    create(b, "bsrc")
    t = time.monotonic()
    produce(b, "bsrc", records)
    print(f"produced {records} records in {time.monotonic() - t:.1f} s")
    base = read_rate(b, "bsrc", records)
    results["baseline_read_records_per_s"] = base
    print(f"baseline: read_committed consumer reads the source at {base:,.0f} records/s")
    for k in (1, 2):
        r = materialise(b, f"bench{k}", k, "bsrc", records, f"bview{k}", instances)
        results[f"instances_{k}"] = r
        print(f"{k} instance(s): {r['records_per_s']:,.0f} records/s from view creation "
              f"to the end ({r['seconds']:.1f} s; {r['records_per_s'] / base:.2f} x the "
              f"baseline), steady {r['steady_records_per_s']:,.0f} records/s")
    results["two_over_one"] = (results["instances_2"]["records_per_s"]
                               / results["instances_1"]["records_per_s"])
    print(f"two instances / one: {results['two_over_one']:.2f}")


def copy_loop(bootstrap: str, source: str, dest: str) -> None:
    """The baseline transform: Kafka's exactly-once loop with the filter in Python, as the
    materialiser runs it (poll, batch, one transaction per batch with the offsets)."""
    from confluent_kafka import TopicPartition as TP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-copy-{dest}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-copy-{dest}",
                  "linger.ms": 5, "retry.backoff.ms": 20, "transaction.timeout.ms": 10000})
    p.init_transactions(30)
    c.subscribe([source])
    print("copying", flush=True)
    while True:
        first = c.poll(0.1)
        if first is None:
            continue
        msgs = [m for m in [first, *c.consume(4999, 0)] if not m.error()]
        p.begin_transaction()
        last: dict[int, int] = {}
        for m in msgs:
            last[m.partition()] = m.offset()
            if json.loads(m.value())["sel"] < 50:
                p.produce(dest, m.value(), partition=m.partition(), timestamp=m.timestamp()[1])
        p.send_offsets_to_transaction([TP(source, q, o + 1) for q, o in last.items()],
                                      c.consumer_group_metadata(), 30)
        p.commit_transaction(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rate", type=float, default=1000.0, help="records/s for the lag figure")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of the lag stream")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--lag-only", action="store_true", help="skip the rate figures")
    ap.add_argument("--copy-loop", nargs=3, metavar=("BOOTSTRAP", "SOURCE", "DEST"),
                    help=argparse.SUPPRESS)  # the baseline's child process
    args = ap.parse_args()
    if args.copy_loop:
        copy_loop(*args.copy_loop)
        return 0
    why = missing()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    results: dict = {"records": args.records}
    with tempfile.TemporaryDirectory(prefix="camus-bench-cluster-") as tmp:
        cluster = KafkaCluster(Path(tmp) / "kafka")
        instances: list[Instance] = []
        try:
            cluster.start()
            b = cluster.bootstrap
            if args.lag_only:
                instances.append(Instance(b, "bench1", "i0"))
            else:
                rates(b, args.records, instances, results)
            create(b, "lsrc", {"message.timestamp.type": "LogAppendTime"})
            camus("cluster", "schema", "set", "lsrc", SCHEMA, "--kafka", b, "--deployment", "bench1")
            camus("cluster", "view", "create", "lview", "--source", "lsrc", "--filter", FILTER,
                  "--kafka", b, "--deployment", "bench1")
            create(b, "lcopy")
            copier = subprocess.Popen([sys.executable, __file__, "--copy-loop", b, "lsrc", "lcopy"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                copier.stdout.readline()
                time.sleep(5)  # both pick the source up and join their groups
                lags = lag(b, "lsrc", {"view": "lview", "plain Kafka copy loop": "lcopy"},
                           args.rate, args.seconds, 5.0)
            finally:
                copier.kill()
                copier.wait()
            results["lag"] = lags
            for label, row in lags.items():
                print(f"lag to a reader of the {label}: p50 {row['p50_ms']:.1f} ms, p99 "
                      f"{row['p99_ms']:.1f} ms ({row['records']} records)")
            results["lag_instance_report"] = [
                line for line in instances[0].stderr().splitlines() if "view lview:" in line][-1:]
            print(*results["lag_instance_report"])
        finally:
            for inst in instances:
                inst.stop()
                inst.log.close()
            cluster.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
