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
    # SaslHandshake v1: kio knows it, camus does not implement it.
    s.sendall(request(17, 1, correlation_id=3, mechanism="PLAIN"))
    frame = read_frame(s)
    assert frame is not None and decode_response(17, 1, frame)[1].error_code == 35
    assert api_versions_ok(s)
    s.close()
