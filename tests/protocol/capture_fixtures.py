"""Capture real Kafka clients' request frames as golden fixtures for the protocol tests.

Run from the repo root (needs `pip install -e '.[test]'`; Java is optional):

    python tests/protocol/capture_fixtures.py [--java-libs DIR] [--out tests/protocol/fixtures]

It starts a throwaway broker on 127.0.0.1 (an ephemeral port; nothing else is
contacted) that answers with `shim.protocol` just enough for confluent-kafka
(librdkafka), kafka-python and, when `--java-libs` points at Kafka's jars
(`../shared/peers/kafka/kafka.sh jars`), the Java ProducerPerformance tool, to
produce with every compression.type, run a consumer group, and use the admin API.
Every request frame (size prefix included) is written as
`<client>-<api>-v<version>[-<tag>].bin`; the first frame of each name wins. Being
answered by our own codec, a successful run is also a smoke test of it against
real clients.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from shim.protocol import ErrorCode, ProtocolError, ServerConnection, encode_response  # noqa: E402
from shim.protocol import api_versions, groups, offsets  # noqa: E402
from shim.protocol.records import decode_batches  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TOPIC = "fixtures"


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, "camus-fixture/" + name)


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


class Broker:
    """Just enough broker for clients to go through their motions."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.offset = 0
        self.members: dict[str, bytes] = {}
        self.assignments: dict[str, bytes] = {}
        self.topics = {TOPIC: 1}

    def _topic_name(self, ref: dict) -> str:
        if ref.get("name"):
            return ref["name"]
        for name in self.topics:
            if topic_id(name) == ref.get("topic_id"):
                return name
        return TOPIC

    def answer(self, req) -> object:
        name, v, body = req.api.name, req.api_version, req.body
        broker = {"node_id": 0, "broker_id": 0, "host": "127.0.0.1", "port": self.port}
        if name == "ApiVersions":
            return api_versions.response(req)
        if name == "Metadata":
            asked = [t.name for t in body.topics] if body.topics else list(self.topics)
            for t in asked:
                self.topics.setdefault(t, 1)
            return req.response(
                brokers=[broker], cluster_id="camus-fixtures", controller_id=0,
                topics=[
                    {"name": t, "topic_id": topic_id(t), "partitions": [
                        {"partition_index": p, "leader_id": 0, "leader_epoch": 0, "replica_nodes": [0], "isr_nodes": [0]}
                        for p in range(self.topics[t])]}
                    for t in asked
                ],
            )
        if name == "Produce":
            responses = []
            for t in body.topic_data:
                parts = []
                for p in t.partition_data:
                    count = sum(b.record_count for b in decode_batches(p.records or b""))
                    parts.append({"index": p.index, "base_offset": self.offset, "log_start_offset": 0})
                    self.offset += count
                responses.append({"name": getattr(t, "name", None), "topic_id": getattr(t, "topic_id", None),
                                  "partition_responses": parts})
            return req.response(responses=responses)
        if name == "InitProducerId":
            return req.response(producer_id=1000, producer_epoch=0)
        if name == "FindCoordinator":
            key_type, keys = groups.coordinator_keys(req)
            return groups.coordinator_response(req, [{"key": k, **broker} for k in keys])
        if name == "JoinGroup":
            if not body.member_id and v >= 4:
                return req.response(error_code=ErrorCode.member_id_required, member_id="member-1", generation_id=-1)
            member = body.member_id or "member-1"
            self.members = {member: body.protocols[0].metadata}
            return req.response(generation_id=1, protocol_type="consumer", protocol_name=body.protocols[0].name,
                                leader=member, member_id=member,
                                members=[{"member_id": m, "metadata": md} for m, md in self.members.items()])
        if name == "SyncGroup":
            for a in body.assignments:
                self.assignments[a.member_id] = a.assignment
            return req.response(protocol_type="consumer", protocol_name="range",
                                assignment=self.assignments.get(body.member_id, b""))
        if name in ("Heartbeat", "LeaveGroup"):
            return req.error_response(ErrorCode.none)
        if name == "OffsetFetch":
            return req.error_response(ErrorCode.none)
        if name == "OffsetCommit":
            return req.error_response(ErrorCode.none)
        if name == "ListOffsets":
            return req.response(topics=[
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "offset": 0, "timestamp": -1, "leader_epoch": 0}
                    for p in t.partitions]}
                for t in body.topics])
        if name == "Fetch":
            time.sleep(0.05)  # a token long-poll so clients do not spin
            return req.response(responses=[
                {"topic": t.topic if v < 13 else None, "topic_id": getattr(t, "topic_id", None), "partitions": [
                    {"partition_index": p.partition, "high_watermark": self.offset, "last_stable_offset": self.offset,
                     "log_start_offset": 0, "preferred_read_replica": -1, "records": b""}
                    for p in t.partitions]}
                for t in body.topics])
        if name == "CreateTopics":
            for t in body.topics:
                self.topics[t.name] = max(t.num_partitions, 1)
            return req.response(topics=[{"name": t.name, "topic_id": topic_id(t.name), "num_partitions": t.num_partitions,
                                         "replication_factor": 1} for t in body.topics])
        if name in ("DeleteTopics", "CreatePartitions"):
            return req.error_response(ErrorCode.none)
        if name == "DescribeConfigs":
            return req.response(results=[
                {"resource_type": r.resource_type, "resource_name": r.resource_name,
                 "configs": [{"name": "retention.ms", "value": "604800000", "config_source": 5}]}
                for r in body.resources])
        if name == "DescribeGroups":
            return req.response(groups=[{"group_id": g, "group_state": "Stable", "protocol_type": "consumer",
                                         "protocol_data": "range"} for g in body.groups])
        if name == "ListGroups":
            return req.response(groups=[{"group_id": "fixture-group", "protocol_type": "consumer",
                                         "group_state": "Stable", "group_type": "classic"}])
        if name == "DescribeCluster":
            return req.response(cluster_id="camus-fixtures", controller_id=0, brokers=[broker])
        return req.error_response(ErrorCode.unsupported_version)


def serve(capture: Capture) -> tuple[socketserver.ThreadingTCPServer, Broker]:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn = ServerConnection()
            sock: socket.socket = self.request
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                conn.receive_data(data)
                while True:
                    # Keep the raw frame too: peek its size before decoding.
                    try:
                        req = conn.next_request()
                    except ProtocolError as exc:
                        print("capture: protocol error:", exc, file=sys.stderr)
                        if exc.response is None:
                            return
                        sock.sendall(exc.response)
                        continue
                    if req is None:
                        break
                    frame = conn.last_frame
                    tag = ""
                    if req.api.name == "Produce":
                        codecs = {b.compression.name.lower() for t in req.body.topic_data
                                  for p in t.partition_data for b in decode_batches(p.records or b"")}
                        tag = "-".join(sorted(codecs)) + ("-" + capture.tag if capture.tag else "")
                    capture.save(req.api.name, req.api_version, frame, tag)
                    if req.expects_response:
                        try:
                            sock.sendall(encode_response(req, broker.answer(req)))
                        except OSError:  # the client hung up first (e.g. closing a producer)
                            return

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    broker = Broker(server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, broker


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

    capture.client = "kafka-python"
    for codec in CODECS:
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                                linger_ms=5, enable_idempotence=False)
        for i in range(5):
            p.send(TOPIC, key=b"k%d" % i, value=b'{"price": %d}' % i, headers=[("side", b"B")])
        p.flush(10)
        p.close(5)
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
        c.commit({kafka.TopicPartition(TOPIC, 0): kafka.OffsetAndMetadata(3, "", -1)})
    c.close()
    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    a.create_topics([NewTopic("created", 2, 1, topic_configs={"retention.ms": "1000"})])
    a.create_partitions({"created": NewPartitions(4)})
    a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    a.list_groups()
    a.describe_groups(["fixture-group"])
    a.describe_cluster()
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
    tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, "--describe",
         "--entity-type", "topics", "--entity-name", TOPIC)
    tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bootstrap, "--list")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).parent / "fixtures")
    ap.add_argument("--java-libs", type=pathlib.Path, default=None)
    ap.add_argument("--only", choices=["librdkafka", "kafka-python", "java"], action="append")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    capture = Capture(args.out)
    server, _ = serve(capture)
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
