"""Capture real Kafka clients' request frames as golden fixtures for the protocol tests.

Run from the repo root (needs `pip install -e '.[test]'`; Java is optional):

    python tests/protocol/capture_fixtures.py [--java-libs DIR] [--out tests/protocol/fixtures]

It starts `loopback_broker` on 127.0.0.1 (an ephemeral port; nothing else is
contacted), which answers with `shim.protocol` just enough for confluent-kafka
(librdkafka), kafka-python and, when `--java-libs` points at Kafka's jars
(`../shared/peers/kafka/kafka.sh jars`), the Java ProducerPerformance tool, to
produce with every compression.type, run a consumer group, and use the admin API.
`--kafka-api-versions HOST:PORT` instead asks a real Kafka broker (Kafka 4.3.1 from
`../shared/peers/kafka/kafka.sh start`) for its ApiVersions and writes
`kafka-<release>-api-versions.json`, the ranges camus must advertise.
Every request frame (size prefix included) is written as
`<client>-<api>-v<version>[-<tag>].bin`; the first frame of each name wins. Being
answered by our own codec, a successful run is also a smoke test of it against
real clients.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from loopback_broker import serve  # noqa: E402
from shim.protocol.records import decode_batches  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TOPIC = "fixtures"


class Capture:
    """Names and stores frames; the tag (e.g. the compression) is set per scenario."""

    def __init__(self, out: pathlib.Path) -> None:
        self.out = out
        self.client = "unknown"
        self.tag = ""
        self.saved: dict[str, int] = {}
        self.lock = threading.Lock()

    def save(self, api_name: str, version: int, frame: bytes, tag: str = "") -> None:
        tag = tag or ""
        name = f"{self.client}-{api_name.lower()}-v{version}{'-' + tag if tag else ''}.bin"
        with self.lock:
            if name in self.saved:
                return
            self.saved[name] = len(frame)
            (self.out / name).write_bytes(frame)


def record_frames(capture: Capture):
    """An `on_request` hook naming and saving each frame."""

    def hook(conn, req) -> None:
        tag = ""
        if req.api.name == "Produce":
            codecs = {b.compression.name.lower() for t in req.body.topic_data
                      for p in t.partition_data for b in decode_batches(p.records or b"")}
            tag = "-".join(sorted(codecs)) + ("-" + capture.tag if capture.tag else "")
        capture.save(req.api.name, req.api_version, conn.last_frame, tag)

    return hook


def run_confluent(bootstrap: str, capture: Capture) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    capture.client = "librdkafka"
    base = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000}
    for codec in CODECS:
        p = confluent_kafka.Producer({**base, "compression.type": codec, "linger.ms": 5})
        for i in range(5):
            p.produce(TOPIC, key=b"k%d" % i, value=b'{"price": %d, "stock": "GOOGL"}' % i, headers=[("side", b"B")])
        p.flush(10)
    capture.tag = "acks0"
    p = confluent_kafka.Producer({**base, "acks": 0})
    p.produce(TOPIC, value=b"fire and forget")
    p.flush(10)
    capture.tag = "idempotent"
    p = confluent_kafka.Producer({**base, "enable.idempotence": True})
    p.produce(TOPIC, value=b"idempotent")
    p.flush(10)
    capture.tag = ""
    c = confluent_kafka.Consumer({**base, "group.id": "fixture-group", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    c.subscribe([TOPIC])
    deadline = time.time() + 6
    while time.time() < deadline and not c.assignment():
        c.poll(0.2)
    c.poll(0.5)
    if c.assignment():
        c.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 3)], asynchronous=False)
    c.close()
    a = AdminClient(base)
    for fut in a.create_topics([NewTopic("created", 2, 1, config={"retention.ms": "1000"})]).values():
        fut.result(10)
    for fut in a.create_partitions([NewPartitions("created", 4)]).values():
        fut.result(10)
    for fut in a.describe_configs([ConfigResource("topic", TOPIC)]).values():
        fut.result(10)
    a.list_consumer_groups().result(10)
    for fut in a.describe_consumer_groups(["fixture-group"]).values():
        fut.result(10)
    a.describe_cluster().result(10)
    for fut in a.delete_topics(["created"]).values():
        fut.result(10)


def run_kafka_python(bootstrap: str, capture: Capture) -> None:
    import kafka
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic

    # kafka-python 2.0.x never asks for recent versions (it infers the broker's
    # release from ApiVersions v0): its frames are kept apart as "kafka-python2".
    major = int(kafka.__version__.split(".")[0])
    capture.client = "kafka-python" if major >= 3 else "kafka-python2"
    idempotence = {"enable_idempotence": False} if major >= 3 else {}
    for codec in CODECS:
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                                linger_ms=5, **idempotence)
        for i in range(5):
            p.send(TOPIC, key=b"k%d" % i, value=b'{"price": %d}' % i, headers=[("side", b"B")])
        p.flush(10)
        p.close(5)
    if major >= 3:
        capture.tag = "idempotent"
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
        p.send(TOPIC, value=b"idempotent")
        p.flush(10)
        p.close(5)
        capture.tag = ""
    c = kafka.KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="fixture-group",
                            auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=1500)
    deadline = time.time() + 6
    while time.time() < deadline and not c.assignment():
        c.poll(200)
    c.poll(500)
    if c.assignment():
        c.commit({kafka.TopicPartition(TOPIC, 0): kafka.OffsetAndMetadata(3, "", *([-1] if major >= 3 else []))})
    c.close()
    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    a.create_topics([NewTopic("created", 2, 1, topic_configs={"retention.ms": "1000"})])
    a.create_partitions({"created": NewPartitions(4)})
    a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    if major >= 3:
        a.list_groups()
        a.describe_groups(["fixture-group"])
        a.describe_cluster()
    else:
        a.list_consumer_groups()
        a.describe_consumer_groups(["fixture-group"])
    a.delete_topics(["created"])
    a.close()


def run_java(bootstrap: str, capture: Capture, libs: pathlib.Path) -> None:
    capture.client = "java"

    def tool(*args: str) -> None:
        try:
            subprocess.run(["java", "-Xmx256m", "-cp", f"{libs}/*", *args], timeout=60, check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            print(f"capture: {args[0]} timed out; its frames so far are kept", file=sys.stderr)

    for codec in CODECS:
        tool("org.apache.kafka.tools.ProducerPerformance", "--topic", TOPIC, "--num-records", "20",
             "--record-size", "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
             f"compression.type={codec}", "acks=all", "linger.ms=5")
    # A consumer group (nothing to read: it runs into its timeout) and the admin tools.
    tool("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", TOPIC,
         "--messages", "1", "--timeout", "4000", "--group", "fixture-group")
    tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", "created",
         "--partitions", "2", "--config", "retention.ms=1000")
    tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--alter", "--topic", "created",
         "--partitions", "4")
    tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--delete", "--topic", "created")
    tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--describe",
         "--entity-type", "topics", "--entity-name", TOPIC)
    tool("org.apache.kafka.tools.ClusterTool", "cluster-id", "--bootstrap-server", bootstrap)
    tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bootstrap, "--list")
    tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bootstrap,
         "--describe", "--group", "fixture-group")


def capture_kafka_api_versions(address: str, out: pathlib.Path, release: str = "4.3.1") -> None:
    """What a real Kafka broker advertises, written beside the frames."""
    import json
    import socket
    import struct

    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from protocol_helpers import decode_response, encode_request

    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(encode_request(18, 3, ApiVersionsRequest(client_software_name="camus",
                                                           client_software_version="1"), 1))
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    _, body, _ = decode_response(18, 3, struct.pack(">i", size) + data)
    doc = {"source": f"ApiVersions v3 answered by Apache Kafka {release} at {address}, captured by "
                     "tests/protocol/capture_fixtures.py --kafka-api-versions HOST:PORT",
           "api_keys": [[k.api_key, k.min_version, k.max_version] for k in body.api_keys]}
    (out / f"kafka-{release}-api-versions.json").write_text(json.dumps(doc) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).parent / "fixtures")
    ap.add_argument("--java-libs", type=pathlib.Path, default=None)
    ap.add_argument("--only", choices=["librdkafka", "kafka-python", "java"], action="append")
    ap.add_argument("--kafka-api-versions", metavar="HOST:PORT",
                    help="only record what the real Kafka broker at HOST:PORT advertises")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.kafka_api_versions:
        capture_kafka_api_versions(args.kafka_api_versions, args.out)
        return
    capture = Capture(args.out)
    server, _ = serve(record_frames(capture))
    bootstrap = f"127.0.0.1:{server.server_address[1]}"
    only = set(args.only or ["librdkafka", "kafka-python", "java"])
    try:
        if "librdkafka" in only:
            run_confluent(bootstrap, capture)
        if "kafka-python" in only:
            run_kafka_python(bootstrap, capture)
        if "java" in only and args.java_libs:
            run_java(bootstrap, capture, args.java_libs)
    finally:
        server.shutdown()
        server.server_close()
    for name, size in sorted(capture.saved.items()):
        print(f"{size:7d}  {name}")


if __name__ == "__main__":
    main()
