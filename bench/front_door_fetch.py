"""A consumer through `camus serve --kafka` against one straight to the cluster, on three
Kafka brokers: the latency of a record streaming into one partition while the consumer also
reads partitions led by the two other brokers, which stay idle (issue 27).

A Fetch through camus names all six partitions (camus is the clients' only broker) and is
split by leader: this measures whether a quiet broker's long poll holds back the busy one's
records (docs/cluster.md, "The front door"). Three KRaft nodes from
tests/cluster/kafka_cluster.py (Kafka's jars: $KAFKA_LIBS or ../shared/peers/kafka/libs), a
6-partition topic with replication factor 3 whose leaders are on every broker; a
confluent-kafka producer (linger.ms=0) sends one record to partition 0 every 20 ms for S
seconds, its send time in the value; a confluent-kafka consumer assigned all six partitions
at their end (fetch.wait.max.ms=500, librdkafka's default) takes receive time - send time.
Direct first, then through camus, R times alternating; p50 and p99 of each way's latencies
over all rounds, and their ratios camus / direct.

Run: `python bench/front_door_fetch.py [--seconds S] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
QUIET = {"log_level": 0}


def measure(bootstrap: str, cluster: str, topic: str, seconds: float) -> list[float]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "fetch.wait.max.ms": 500, **QUIET})
    c.assign([TopicPartition(topic, i, -1) for i in range(6)])  # -1: the end
    for _ in range(10):  # assigned and fetching before the stream starts
        c.poll(0.2)
    p = Producer({"bootstrap.servers": cluster, "linger.ms": 0, **QUIET})
    stop = time.time() + seconds

    def stream():
        while time.time() < stop:
            p.produce(topic, repr(time.time()).encode(), partition=0)
            p.poll(0)
            time.sleep(0.02)
        p.flush(30)
    sender = threading.Thread(target=stream)
    sender.start()
    latencies = []
    while time.time() < stop + 2:
        m = c.poll(0.1)
        if m is not None and not m.error():
            latencies.append((time.time() - float(m.value())) * 1000)
    sender.join()
    c.close()
    return latencies


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    try:
        from tests.cluster.kafka_cluster import KafkaCluster, missing
    except ImportError:
        raise SystemExit("needs tests/cluster/kafka_cluster.py (issue 27's cluster tests)")
    if missing():
        raise SystemExit(missing())
    from confluent_kafka.admin import AdminClient, NewTopic
    cluster = KafkaCluster(Path(tempfile.mkdtemp(prefix="fd-fetch-")))
    door = None
    try:
        cluster.start()
        door = subprocess.Popen([sys.executable, "-m", "camus.cli", "serve", "--kafka",
                                 cluster.bootstrap, "--listen", "127.0.0.1:0", "-q"], cwd=REPO,
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        address = re.search(r"listening on ([\d.]+:\d+)", door.stdout.readline()).group(1)
        topic = f"fd-fetch-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
        admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(60)
        leaders = {p.leader for p in admin.list_topics(topic, timeout=30).topics[topic].partitions.values()}
        print(f"topic {topic}: leaders {sorted(leaders)}")
        found: dict[str, list[float]] = {"direct": [], "camus": []}
        for r in range(args.rounds):
            order = [("direct", cluster.bootstrap), ("camus", address)]
            if r % 2:
                order.reverse()
            for name, bootstrap in order:
                got = measure(bootstrap, cluster.bootstrap, topic, args.seconds)
                found[name] += got
                print(f"round {r + 1} {name}: {len(got)} records, p50 {percentile(got, 0.5):.1f} ms, "
                      f"p99 {percentile(got, 0.99):.1f} ms", flush=True)
        d, c = found["direct"], found["camus"]
        print(f"all rounds: direct p50 {percentile(d, 0.5):.1f} ms p99 {percentile(d, 0.99):.1f} ms; "
              f"camus p50 {percentile(c, 0.5):.1f} ms p99 {percentile(c, 0.99):.1f} ms; camus/direct "
              f"p50 {percentile(c, 0.5) / percentile(d, 0.5):.2f}, p99 "
              f"{percentile(c, 0.99) / percentile(d, 0.99):.2f} (load average {os.getloadavg()[0]:.1f})")
    finally:
        if door is not None:
            door.terminate()
            door.wait(10)
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
