"""The INT stream as a Kafka topic, and the `int-anomalies` view ordinary consumers read.

Each record's value is one INT report exactly as it rode in UDP: the shim, the INT-MD
header, the hop stack and the sender's payload after it (the UDP payload of the INT packet).
The topic `int-telemetry` declares the top record's fields as byte ranges of that value
(`camus.schema`, shim/schema.py), and the view `int-anomalies` is a topic whose configs name
the source and a filter over those fields (`camus.source`, `camus.filter`), created through
the ordinary CreateTopics API. `camus serve` evaluates the filter in its embedded switch, so
a consumer of the view receives only the anomalies, with their original offsets.

`render_json` is the JSON rendering of a value (use it as a consumer's value deserializer).
`BrokerProcess` runs `camus serve` on 127.0.0.1 for the demo; the clients are kafka-python's.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from apps.int_events.fabric import packet_number
from apps.int_events.int_md import MD_HEADER_BYTES, SHIM_BYTES, decode

TELEMETRY_TOPIC = "int-telemetry"
VIEW = "int-anomalies"
_TOP = SHIM_BYTES + MD_HEADER_BYTES  # the top record starts right after the MD header
SCHEMA = ",".join((
    f"switch_id:u32=bytes:{_TOP}:4",
    f"ingress_port:u16=bytes:{_TOP + 4}:2",
    f"egress_port:u16=bytes:{_TOP + 6}:2",
    f"hop_latency:u32=bytes:{_TOP + 8}:4",
    f"queue_id:u8=bytes:{_TOP + 12}:1",
    f"queue_occupancy:u32=bytes:{_TOP + 13}:3",
))
START_SECONDS = 20.0


def render_json(value: bytes) -> dict:
    """One record value (an INT report) as a JSON-ready dict, most recent hop first."""
    stack, rest = decode(value)
    number, time_ns = packet_number(rest)
    return {
        "packet": number,
        "time_ns": time_ns,
        "original_port": stack.original_port,
        "remaining_hop_count": stack.remaining_hop_count,
        "flags": {"discard": stack.discard, "hop_count_exceeded": stack.hop_count_exceeded,
                  "mtu_exceeded": stack.mtu_exceeded},
        "hops": [{"node_id": h.node_id, "ingress_port": h.ingress_port, "egress_port": h.egress_port,
                  "hop_latency": h.hop_latency, "queue_id": h.queue_id, "queue_occupancy": h.queue_occupancy}
                 for h in stack.hops],
    }


def create_topics(bootstrap: str, view_filter: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="camus-int-demo")
    try:
        admin.create_topics([NewTopic(TELEMETRY_TOPIC, 1, 1, topic_configs={"camus.schema": SCHEMA})])
        admin.create_topics([NewTopic(VIEW, 1, 1, topic_configs={"camus.source": TELEMETRY_TOPIC,
                                                                 "camus.filter": view_filter})])
    finally:
        admin.close()


def publish(bootstrap: str, values: Iterable[bytes]) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1)
    n = 0
    try:
        for value in values:
            producer.send(TELEMETRY_TOPIC, value)
            n += 1
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)
    return n


def consume_view(bootstrap: str, expected: int, idle_seconds: float = 3.0,
                 limit_seconds: float = 60.0) -> list[tuple[int, bytes]]:
    """(offset, value) of the view's records, read by a consumer-group member. It stops when
    `expected` records came and nothing follows for half a second (an extra one would still
    show), when records came and then stopped for `idle_seconds`, or after `limit_seconds`;
    joining the group may take a while, so silence before the first record is not the end."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(VIEW, bootstrap_servers=bootstrap, group_id="camus-int-demo",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got: list[tuple[int, bytes]] = []
    started = last = time.monotonic()
    try:
        while time.monotonic() - started < limit_seconds:
            batch = consumer.poll(timeout_ms=200)
            records = [r for rs in batch.values() for r in rs]
            now = time.monotonic()
            if records:
                got.extend((r.offset, r.value) for r in records)
                last = now
                continue
            quiet = now - last
            if (len(got) >= expected and quiet > 0.5) or (got and quiet > idle_seconds):
                break
    finally:
        consumer.close()
    return got


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """`camus serve` in a child process on 127.0.0.1 (in memory), its log in `log_path`,
    stopped on exit."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> BrokerProcess:
        # The log goes to a file, not a pipe: a pipe nobody reads would stall a chatty broker.
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "camus", "serve", "--listen", self.bootstrap],
                                     stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._log.close()
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"camus serve exited with {self.proc.returncode}: {tail}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.__exit__(None, None, None)
        raise RuntimeError(f"camus serve did not listen on {self.bootstrap} within {START_SECONDS:.0f} s")

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self._log.close()
