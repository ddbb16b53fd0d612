"""The demos' Kafka half: a stream through `camus serve` into views, read by ordinary consumers.

Each demo publishes its stream to a source topic whose `camus.schema` declares the fields a
filter may name as byte ranges of the record value, and creates one view per filter: a topic
whose `camus.source` names the source and whose `camus.filter` selects records, created
through the ordinary CreateTopics API. `camus serve` evaluates the filters in its embedded
switch, so a consumer of a view receives only the selected records, at their original offsets.
What a demo's topic, schema and filters are lives in its own `kafka_view` module.

`camus serve` runs as a child process on 127.0.0.1 (in memory) with its output in a log file;
the clients are kafka-python's, installed with the `test` extra, not a core dependency.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_SECONDS = 30.0
LISTENING = re.compile(r"listening on ([\d.]+:\d+)")  # what `camus serve` prints once it listens


class ServeProcess:
    """`camus serve --listen 127.0.0.1:0` as a child process; `bootstrap` once it listens.

    The port is the one the server bound and announced, so no other process can take it in
    between. Its output goes to a file, not a pipe: a pipe nobody reads would stall it."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "camus", "serve", "--listen", "127.0.0.1:0"],
                                     stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + START_SECONDS
        while (m := LISTENING.search(log_path.read_text(errors="replace"))) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"camus serve did not start (exit code {self.proc.returncode}); "
                                   f"its log ends: {tail}")
            time.sleep(0.05)
        self.bootstrap = m.group(1)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create_topics(bootstrap: str, client: str, source: str, schema: str, views: Mapping[str, str]) -> None:
    """The source topic with its `camus.schema`, then one view per {name: filter}."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client)
    try:
        admin.create_topics([NewTopic(source, 1, 1, topic_configs={"camus.schema": schema})])
        admin.create_topics([NewTopic(name, 1, 1, topic_configs={"camus.source": source, "camus.filter": f})
                             for name, f in views.items()])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, values: Iterable[bytes]) -> int:
    """Every value as one record of `topic`, in order (one partition); returns the count."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1)
    n = 0
    try:
        for value in values:
            producer.send(topic, value)
            n += 1
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)
    return n


def consume(bootstrap: str, client: str, expected: Mapping[str, int], idle_seconds: float = 3.0,
            limit_seconds: float = 60.0) -> dict[str, list[tuple[int, bytes]]]:
    """(offset, value) per topic in `expected`, read by one consumer-group member. It stops when
    every topic has its expected count and nothing follows for half a second (an extra record
    would still show), when records came and then stopped for `idle_seconds`, or after
    `limit_seconds`; joining the group may take a while, so silence before the first record
    is not the end."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(*expected, bootstrap_servers=bootstrap, group_id=client,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got: dict[str, list[tuple[int, bytes]]] = {topic: [] for topic in expected}
    started = last = time.monotonic()
    try:
        while time.monotonic() - started < limit_seconds:
            batch = consumer.poll(timeout_ms=200)
            now = time.monotonic()
            if any(batch.values()):
                for tp, records in batch.items():
                    got[tp.topic].extend((r.offset, r.value) for r in records)
                last = now
                continue
            quiet = now - last
            done = all(len(got[topic]) >= n for topic, n in expected.items())
            if (done and quiet > 0.5) or (any(got.values()) and quiet > idle_seconds):
                break
    finally:
        consumer.close()
    return got


@dataclass
class ViewsRead:
    """What `through_views` read: (offset, value) per view, and how long each half took."""

    received: dict[str, list[tuple[int, bytes]]]
    produce_seconds: float
    consume_seconds: float


def through_views(log_path: Path, client: str, source: str, schema: str, views: Mapping[str, str],
                  values: Iterable[bytes], expected: Mapping[str, int]) -> ViewsRead:
    """A `camus serve` for one run: the topics created, `values` produced to `source`, and every
    view read (`expected` records per view name: when to stop reading, see `consume`). The
    client id `client` names the admin client and the consumer group."""
    with ServeProcess(log_path) as serve:
        create_topics(serve.bootstrap, client, source, schema, views)
        started = time.perf_counter()
        produce(serve.bootstrap, source, values)
        produced = time.perf_counter()
        received = consume(serve.bootstrap, client, {name: expected[name] for name in views})
        return ViewsRead(received, produced - started, time.perf_counter() - produced)
