"""Kafka's resource limits hold against clients that hoard (issue 13, item 5).

`camus serve` with small limits in its --config, driven over raw sockets (requests framed
with kio, as a client frames them) and confluent-kafka: idle connections are closed, the
connection limit refuses the excess, a large request waits for the shared request memory
instead of being read, Fetch answers stay within fetch.max.bytes, and one request cannot
make more than 10,000 partitions. The time index behind ListOffsets by time is checked
against a scan of every record.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shim.log import PartitionLog
from shim.protocol.records import Record, encode_batch

from ..protocol.protocol_helpers import decode_response, encode_request
from .conftest import wait_until

API_VERSIONS = 18


def serve_with(camus_server, tmp_path, **limits):
    cfg = tmp_path / "limits.json"
    cfg.write_text(json.dumps(limits))
    return camus_server(extra=["--config", str(cfg)])


def connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def closed_by_peer(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def padded_api_versions(pad: int, correlation_id: int) -> bytes:
    """An ApiVersions v0 request whose frame carries `pad` more bytes (Kafka ignores bytes
    after a body), to make a request of any size that every broker answers."""
    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    framed = encode_request(API_VERSIONS, 0, ApiVersionsRequest(), correlation_id)
    payload = framed[4:] + b"\0" * pad
    return struct.pack(">i", len(payload)) + payload


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed mid-answer")
        out += chunk
    return bytes(out)


def read_answer(s: socket.socket, timeout: float) -> int | None:
    """The correlation id of the next answer, or None if none came within `timeout`."""
    s.settimeout(timeout)
    try:
        head = recv_exact(s, 4)
    except socket.timeout:
        return None
    (size,) = struct.unpack(">i", head)
    data = head + recv_exact(s, size)
    return decode_response(API_VERSIONS, 0, data)[0]


def test_idle_connections_are_closed(camus_server, tmp_path):
    server = serve_with(camus_server, tmp_path, **{"connections.max.idle.ms": 300})
    s = connect(server)
    assert closed_by_peer(s, 5)
    busy = connect(server)  # one that keeps asking is not idle
    for i in range(5):
        busy.sendall(padded_api_versions(0, i))
        assert read_answer(busy, 5) == i
        time.sleep(0.2)


def test_connections_past_the_limit_are_refused_and_the_rest_served(camus_server, tmp_path):
    server = serve_with(camus_server, tmp_path, **{"max.connections": 20})
    held = [connect(server) for _ in range(20)]
    extra = connect(server)
    assert closed_by_peer(extra, 5)
    for i, s in enumerate(held[:3]):
        s.sendall(padded_api_versions(0, i))
        assert read_answer(s, 5) == i
    for s in held:
        s.close()
    assert wait_until(lambda: not closed_by_peer(connect(server), 0.3), 10)
    assert "max.connections=20 reached" in server.stderr()


def test_a_large_request_waits_for_request_memory(camus_server, tmp_path):
    size = 700_000  # two of these do not fit a 1 MiB pool
    server = serve_with(camus_server, tmp_path, **{"queued.max.request.bytes": 1 << 20})
    first, second = connect(server), connect(server)
    a = padded_api_versions(size, 1)
    first.sendall(a[: len(a) // 2])  # reserves its size, then stalls
    time.sleep(0.5)
    second.sendall(padded_api_versions(size, 2))  # whole, but no memory is left for it
    assert read_answer(second, 1.5) is None
    first.sendall(a[len(a) // 2:])
    assert read_answer(first, 10) == 1
    assert read_answer(second, 10) == 2  # served once the first request's memory was freed


def fetch_answer_size(server, topic: str, max_bytes: int) -> int:
    """Bytes of records in a raw Fetch v4 answer asking `max_bytes` of partition 0 from 0."""
    import datetime

    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.types import BrokerId, TopicName

    body = FetchRequest(replica_id=BrokerId(-1), max_wait=datetime.timedelta(milliseconds=100),
                        min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                        topics=(FetchTopic(topic=TopicName(topic), partitions=(
                            FetchPartition(partition=0, fetch_offset=0,
                                           partition_max_bytes=max_bytes),)),))
    s = connect(server)
    s.sendall(encode_request(1, 4, body, 9))
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    data = struct.pack(">i", size) + recv_exact(s, size)
    s.close()
    _, answer, _ = decode_response(1, 4, data)
    return len(answer.responses[0].partitions[0].records)


def test_fetch_answers_stay_within_fetch_max_bytes(camus_server, tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    server = serve_with(camus_server, tmp_path, **{"fetch.max.bytes": 200_000})
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for i in range(60):
        p.produce("big", bytes([i]) * 20_000, partition=0)
        p.flush(10)  # one 20 kB batch per record: 1.2 MB in the partition
    assert fetch_answer_size(server, "big", 100_000) < 100_000 + 20_100  # as asked
    got = fetch_answer_size(server, "big", 2**31 - 1)  # asked for everything
    assert 200_000 - 20_100 < got <= 200_000  # the broker's cap, in whole batches


def test_one_request_cannot_make_more_than_10000_partitions(camus_server, tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    server = serve_with(camus_server, tmp_path)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    with pytest.raises(ck.KafkaException) as err:
        admin.create_topics([NewTopic("wide", 10_001)])["wide"].result(30)
    assert err.value.args[0].code() == ck.KafkaError.POLICY_VIOLATION
    admin.create_topics([NewTopic("narrow", 2)])["narrow"].result(30)
    with pytest.raises(ck.KafkaException) as err:
        admin.create_partitions([NewPartitions("narrow", 10_003)])["narrow"].result(30)
    assert err.value.args[0].code() == ck.KafkaError.INVALID_PARTITIONS
    admin.create_partitions([NewPartitions("narrow", 4)])["narrow"].result(30)


# --- the time index ----------------------------------------------------------------------

def scan(batches: list[list[tuple[int, int]]], ts: int) -> tuple[int, int] | None:
    for records in batches:
        for offset, stamp in records:
            if stamp >= ts:
                return offset, stamp
    return None


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), on_disk=st.booleans(), drop=st.integers(0, 30))
def test_time_index_answers_as_a_scan_of_every_record(tmp_path_factory, seed, on_disk, drop):
    rng = random.Random(seed)
    directory = tmp_path_factory.mktemp("log") if on_disk else None
    lg = PartitionLog(directory, segment_bytes=rng.choice((300, 2000, 1 << 20)))
    batches, offset = [], 0
    for _ in range(rng.randint(1, 25)):
        records = [(offset + i, rng.randint(0, 50)) for i in range(rng.randint(1, 4))]
        offset += len(records)
        lg.append(encode_batch([Record(o, t, None, b"v", []) for o, t in records]),
                  offset - 1, max(t for _, t in records))
        batches.append(records)
    if directory is not None:
        lg = PartitionLog(directory)  # the index rebuilt from the files
    elif drop:
        lg.drop_before(drop)
        batches = [b for b in batches if b[-1][0] >= drop]
    for ts in range(-1, 53):
        assert lg.offset_for_time(ts) == scan(batches, ts), ts
    newest = max((t for b in batches for _, t in b), default=-1)
    expected = scan(batches, newest) if newest >= 0 else (-1, -1)
    assert lg.max_timestamp() == expected
