"""Malformed frames, absurd sizes, unknown APIs and wrong versions over a real socket.

Each bad connection gets the right answer or is closed, and the broker keeps serving
another connection opened before the bad one and a new one opened after it.
"""

from __future__ import annotations

import socket
import struct

import pytest

from kio.index import load_request_schema

from shim.protocol import build
from tests.protocol.protocol_helpers import decode_response, encode_request



def request(api_key: int, version: int, correlation_id: int = 7, **fields) -> bytes:
    return encode_request(api_key, version, build(load_request_schema(api_key, version), **fields),
                          correlation_id)


def connect(broker) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    return s


def read_frame(s: socket.socket) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = s.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return head + body


def api_versions_ok(s: socket.socket) -> bool:
    s.sendall(request(18, 3, client_software_name="t", client_software_version="1"))
    frame = read_frame(s)
    return frame is not None and decode_response(18, 3, frame)[1].error_code == 0


def closed(s: socket.socket) -> bool:
    try:
        return read_frame(s) is None
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("payload", [
    struct.pack(">i", -5),                                   # negative size
    struct.pack(">i", 0x7FFFFFF0),                          # absurd size
    struct.pack(">i", 4) + b"\x00\x01\x02\x03",             # shorter than a header
    struct.pack(">ihhi", 8, 999, 0, 1),                     # unknown API key
    struct.pack(">ihhi", 8, 0, 2, 1),                       # Produce v2: not spoken
    struct.pack(">ihhih", 12, 3, 9, 1, -1) + b"\xff\xff",   # Metadata body that does not parse
], ids=["negative", "absurd", "short", "unknown-api", "old-version", "garbage-body"])
def test_bad_frames_close_only_their_connection(broker, payload):
    before = connect(broker)
    bad = connect(broker)
    bad.sendall(payload)
    assert closed(bad)
    assert api_versions_ok(before)
    after = connect(broker)
    assert api_versions_ok(after)
    for s in (before, bad, after):
        s.close()


def test_too_new_api_versions_gets_v0_unsupported_answer(broker):
    s = connect(broker)
    s.sendall(struct.pack(">ihhih", 10, 18, 99, 5, -1))
    frame = read_frame(s)
    assert frame is not None
    resp = decode_response(18, 0, frame)[1]
    assert resp.error_code == 35 and any(k.api_key == 18 for k in resp.api_keys)
    assert api_versions_ok(s)  # the connection stays usable
    s.close()


def test_unregistered_api_gets_its_error_and_connection_stays(broker):
    s = connect(broker)
    # DescribeDelegationToken v1: kio knows it, camus does not implement it.
    s.sendall(request(41, 1, correlation_id=3, owners=None))
    frame = read_frame(s)
    assert frame is not None and decode_response(41, 1, frame)[1].error_code == 35
    assert api_versions_ok(s)
    s.close()


def _header_v2(api_key: int, version: int, correlation_id: int = 9) -> bytes:
    # request header v2: key, version, correlation id, client_id (int16 string), no tags
    return struct.pack(">hhih", api_key, version, correlation_id, 4) + b"fuzz" + b"\x00"


@pytest.mark.parametrize("api_key,version,body", [
    # FindCoordinator v4: key_type 0, coordinator_keys null (compact length 0), no tags
    (10, 4, b"\x00" + b"\x00" + b"\x00"),
    # Produce v9: transactional_id null, acks 1, timeout 1000, topic_data null, no tags
    (0, 9, b"\x00" + struct.pack(">hi", 1, 1000) + b"\x00" + b"\x00"),
    # ListOffsets v6: replica_id -1, isolation 0, one topic "t" whose partitions are null
    (2, 6, struct.pack(">ib", -1, 0) + b"\x02" + b"\x02t" + b"\x00" + b"\x00" + b"\x00"),
], ids=["find-coordinator-keys", "produce-topic-data", "list-offsets-partitions"])
def test_null_where_the_schema_forbids_it_closes_only_that_connection(broker, api_key, version,
                                                                       body):
    """A null array the schema does not allow is a malformed request (as in Kafka), not a
    handler meeting None (which raised, and then failed again building the error answer)."""
    before = connect(broker)
    bad = connect(broker)
    payload = _header_v2(api_key, version) + body
    bad.sendall(struct.pack(">i", len(payload)) + payload)
    assert closed(bad)
    assert api_versions_ok(before)
    for s in (before, bad):
        s.close()
    assert "Traceback" not in broker.stderr()


def _mutants(frame: bytes, rng) -> list[bytes]:
    """Bit flips, extreme bytes and integers, truncation and trailing junk, each with the
    size prefix kept consistent so the broker must parse the body to find the fault."""
    out = []
    body = frame[4:]
    for how in range(6):
        b = bytearray(body)
        at = rng.randrange(8, len(b)) if len(b) > 12 else len(b) - 1
        if how == 0:
            b[at] ^= 1 << rng.randrange(8)
        elif how == 1:
            b[at] = rng.choice([0x00, 0xFF, 0x7F, 0x80])
        elif how == 2:
            b = b[:rng.randrange(len(b))]
        elif how == 3:
            b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        elif how == 4 and len(b) > 12:
            at = min(at, len(b) - 4)
            b[at:at + 4] = struct.pack(">i", rng.choice([-1, 0x7FFFFFFF, -0x80000000, 1 << 20]))
        elif how == 5 and len(b) > 10:
            at = min(at, len(b) - 2)
            b[at:at + 2] = struct.pack(">h", rng.choice([-1, 0x7FFF, -0x8000]))
        out.append(struct.pack(">i", len(b)) + bytes(b))
    return out


def test_mutated_client_requests_never_crash_the_broker(camus_server):
    """Every request the real clients sent (tests/protocol/fixtures), mutated: each mutant is
    answered or its connection closed; afterwards the broker serves a real client, and its log
    holds no traceback (a handler that raised on bad input would have logged one)."""
    import random
    from pathlib import Path

    from confluent_kafka import Consumer, Producer, TopicPartition

    server = camus_server()
    rng = random.Random(20261122)
    fixtures = sorted((Path(__file__).resolve().parents[1] / "protocol" / "fixtures").glob("*.bin"))
    assert len(fixtures) > 50
    sent = 0
    for path in fixtures:
        for mutant in _mutants(path.read_bytes(), rng):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.settimeout(0.5)  # a mutated Fetch may long-poll: no need to wait for it
            try:
                s.sendall(mutant)
                s.shutdown(socket.SHUT_WR)  # the broker answers what it read, then sees EOF
                while s.recv(1 << 16):
                    pass
            except (socket.timeout, ConnectionResetError):
                pass
            finally:
                s.close()
            sent += 1
            assert server.proc.poll() is None, f"broker died on a mutant of {path.name}"
    assert sent >= 6 * len(fixtures)
    p = Producer({"bootstrap.servers": server.bootstrap})
    p.produce("after-fuzz", b"still here", partition=0)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "after-fuzz",
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("after-fuzz", 0, 0)])
    got = None
    for _ in range(50):
        got = c.poll(0.2)
        if got is not None and got.error() is None:
            break
    c.close()
    assert got is not None and got.value() == b"still here"
    assert "Traceback" not in server.stderr(), server.stderr()[-3000:]
