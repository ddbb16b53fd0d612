"""The ITCH feed as a Kafka topic, and one filtered view per subscriber, served by `camus serve`.

Each record's value is one raw ITCH 5.0 message (type byte first, no length prefix, exactly
the bytes of a MoldUDP64 block); one partition keeps the feed's order, so a record's offset
is its message's sequence number minus one. The topic's `camus.schema` declares the Add
Order fields as byte ranges of the value (wire-formats.md 1.3), under the names the P4 spec
uses, so a subscriber's filter reads the same in both places:

    type:str1=bytes:0:1, buy_sell_indicator:str1=bytes:19:1, shares:u32=bytes:20:4,
    stock:str8=bytes:24:8, price:u32=bytes:32:4

A view is a topic created through the ordinary CreateTopics API with `camus.source=itch`
and `camus.filter=(type == "A" or type == "F") and (FILTER)`. The type guard is what the P4
spec's `message_type` annotation does on the switch: other messages are shorter (their
stock bytes are missing, which the schema turns into spaces) or hold other fields at those
offsets (an Order Replace has its new order number there), so no filter may look at them.
Consumers of a view read the selected messages with their original offsets, gaps included.

The clients are kafka-python's (installed with the `test` extra); `camus serve` runs as a
child process on 127.0.0.1 with its log in a file.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from apps.itch_filter.subscription import Subscription

TOPIC = "itch"
SCHEMA = ("type:str1=bytes:0:1,buy_sell_indicator:str1=bytes:19:1,shares:u32=bytes:20:4,"
          "stock:str8=bytes:24:8,price:u32=bytes:32:4")
ADD_ORDER_GUARD = '(type == "A" or type == "F")'
START_SECONDS = 30.0


def view_name(s: Subscription) -> str:
    return f"itch-{s.name}"


def view_filter(s: Subscription) -> str:
    return f"{ADD_ORDER_GUARD} and ({s.filter})"


class Broker:
    """`camus serve --listen 127.0.0.1:0` as a child process; `bootstrap` once it listens."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "camus.cli", "serve", "--listen", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     cwd=Path(__file__).resolve().parents[2])
        line = _readline(self.proc, START_SECONDS)
        m = re.search(r"listening on ([\d.]+):(\d+)", line)
        if m is None:
            self.close()
            raise RuntimeError(f"camus serve did not start: {line!r}; log in {log_path}")
        self.bootstrap = f"{m.group(1)}:{m.group(2)}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc.stdout.close()
        self._log.close()

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    import select

    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


def create_topics(bootstrap: str, subscriptions: Sequence[Subscription]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="camus-itch-demo")
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={"camus.schema": SCHEMA})])
        admin.create_topics([NewTopic(view_name(s), 1, 1, topic_configs={
            "camus.source": TOPIC, "camus.filter": view_filter(s)}) for s in subscriptions])
    finally:
        admin.close()


def produce(bootstrap: str, messages: Iterable[bytes]) -> int:
    """Every ITCH message as one record of the feed topic, in order; returns the count."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1)
    n = 0
    try:
        for m in messages:
            producer.send(TOPIC, m)
            n += 1
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)
    return n


def consume_views(bootstrap: str, subscriptions: Sequence[Subscription], expected: dict[str, int],
                  idle_seconds: float = 3.0, limit_seconds: float = 60.0) -> dict[str, list[tuple[int, bytes]]]:
    """(offset, value) per subscriber's view: until every view has its expected count and nothing
    more comes for half a second, or nothing comes for `idle_seconds`, or `limit_seconds`."""
    from kafka import KafkaConsumer

    names = {view_name(s): s.name for s in subscriptions}
    consumer = KafkaConsumer(*names, bootstrap_servers=bootstrap, group_id="camus-itch-demo",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got: dict[str, list[tuple[int, bytes]]] = {s.name: [] for s in subscriptions}
    started = last = time.monotonic()
    try:
        while time.monotonic() - started < limit_seconds:
            batch = consumer.poll(timeout_ms=200)
            now = time.monotonic()
            if batch:
                for tp, records in batch.items():
                    got[names[tp.topic]].extend((r.offset, r.value) for r in records)
                last = now
                continue
            done = all(len(got[n]) >= expected[n] for n in got)
            if now - last > idle_seconds or (done and now - last > 0.5):
                break
    finally:
        consumer.close()
    return got
