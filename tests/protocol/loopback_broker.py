"""A throwaway in-memory Kafka broker on 127.0.0.1, answering through `shim.protocol`.

Just enough for real clients to go through their motions: one broker, topics
auto-created with one partition, an in-memory log per partition (batches stored as
the producer sent them, base offsets patched in place), a one-member consumer
group, and a token long-poll. It exists for the tests and the fixture capture, not
as the product's server; every frame it receives can be handed to `on_request`.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import Callable

from shim.protocol import ErrorCode, ProtocolError, ServerConnection, encode_response
from shim.protocol import api_versions, group_apis
from shim.protocol.records import decode_batches, patch_base_offset, read_batch_header


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, "camus-loopback/" + name)


class Broker:
    def __init__(self, port: int) -> None:
        self.port = port
        self.lock = threading.Lock()
        self.topics: dict[str, int] = {}
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.next_offset: dict[tuple[str, int], int] = {}
        self.members: dict[str, bytes] = {}
        self.assignments: dict[str, bytes] = {}

    # --- the log ------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: bytes) -> int:
        """Store the batches in `records`; returns the base offset assigned."""
        key = (topic, partition)
        with self.lock:
            self.topics.setdefault(topic, partition + 1)
            base = self.next_offset.get(key, 0)
            offset, pos = base, 0
            for batch in decode_batches(records):
                raw = patch_base_offset(records[pos : pos + batch.size], offset)
                self.logs.setdefault(key, []).append(bytes(raw))
                offset += batch.record_count
                pos += batch.size
            self.next_offset[key] = offset
            return base

    def read(self, topic: str, partition: int, offset: int) -> bytes:
        with self.lock:
            return b"".join(
                b for b in self.logs.get((topic, partition), ()) if read_batch_header(b).last_offset >= offset
            )

    def _name(self, ref: dict) -> str:
        if ref.get("name"):
            return ref["name"]
        return next((n for n in self.topics if topic_id(n) == ref.get("topic_id")), "")

    # --- answers ------------------------------------------------------------------

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
                brokers=[broker], cluster_id="camus-loopback", controller_id=0,
                topics=[
                    {"name": t, "topic_id": topic_id(t), "partitions": [
                        {"partition_index": p, "leader_id": 0, "leader_epoch": 0, "replica_nodes": [0], "isr_nodes": [0]}
                        for p in range(self.topics[t])]}
                    for t in asked
                ],
            )
        if name == "Produce":
            return req.response(responses=[
                {"name": getattr(t, "name", None), "topic_id": getattr(t, "topic_id", None), "partition_responses": [
                    {"index": p.index, "base_offset": self.append(self._name(
                        {"name": getattr(t, "name", None), "topic_id": getattr(t, "topic_id", None)}),
                        p.index, p.records or b""), "log_start_offset": 0}
                    for p in t.partition_data]}
                for t in body.topic_data])
        if name == "InitProducerId":
            return req.response(producer_id=1000, producer_epoch=0)
        if name == "FindCoordinator":
            _, keys = group_apis.coordinator_keys(req)
            return group_apis.coordinator_response(req, [{"key": k, **broker} for k in keys])
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
        if name in ("Heartbeat", "LeaveGroup", "OffsetFetch", "OffsetCommit", "DeleteTopics", "CreatePartitions"):
            return req.error_response(ErrorCode.none)
        if name == "ListOffsets":
            return req.response(topics=[
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "timestamp": -1, "leader_epoch": 0,
                     "offset": 0 if p.timestamp == -2 else self.next_offset.get((t.name, p.partition_index), 0)}
                    for p in t.partitions]}
                for t in body.topics])
        if name == "Fetch":
            return self._fetch(req)
        if name == "CreateTopics":
            for t in body.topics:
                self.topics[t.name] = max(t.num_partitions, 1)
            return req.response(topics=[{"name": t.name, "topic_id": topic_id(t.name), "num_partitions": t.num_partitions,
                                         "replication_factor": 1} for t in body.topics])
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
            return req.response(cluster_id="camus-loopback", controller_id=0, brokers=[broker])
        return req.error_response(ErrorCode.unsupported_version)

    def _fetch(self, req) -> object:
        def partitions():
            out = []
            for t in req.body.topics:
                topic = self._name({"name": getattr(t, "topic", None), "topic_id": getattr(t, "topic_id", None)})
                ref = {"topic": topic, "topic_id": topic_id(topic)}
                parts = []
                for p in t.partitions:
                    hw = self.next_offset.get((topic, p.partition), 0)
                    parts.append({"partition_index": p.partition, "high_watermark": hw, "last_stable_offset": hw,
                                  "log_start_offset": 0, "preferred_read_replica": -1,
                                  "records": self.read(topic, p.partition, p.fetch_offset)})
                out.append({**ref, "partitions": parts})
            return out

        responses = partitions()
        if not any(p["records"] for t in responses for p in t["partitions"]):
            time.sleep(min(req.body.max_wait.total_seconds(), 0.1))  # a token long-poll
            responses = partitions()
        return req.response(responses=responses)


def serve(on_request: Callable[[ServerConnection, object], None] | None = None):
    """Start a broker on 127.0.0.1:<ephemeral>; returns (server, broker). Call server.shutdown()."""

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
                    try:
                        req = conn.next_request()
                    except ProtocolError as exc:
                        print("loopback broker: protocol error:", exc, file=sys.stderr)
                        if exc.response is None:
                            return
                        sock.sendall(exc.response)
                        continue
                    if req is None:
                        break
                    if on_request is not None:
                        on_request(conn, req)
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
