"""Request frames captured from librdkafka, kafka-python and the Java client.

Every fixture is fed whole, one byte at a time, and followed by trailing bytes
(the start of another frame), h11-style; each must decode to the same request,
consume the frame exactly, and re-encode to the very same bytes.
"""

from __future__ import annotations

import io

import pytest
from kio.serial import entity_writer

from shim.protocol import REGISTRY, ServerConnection, encode_response
from shim.protocol.framing import frame
from protocol_helpers import decode_response, fixture_files, parse_fixture_name

FIXTURES = fixture_files()
IDS = [p.name for p in FIXTURES]


def test_fixtures_cover_every_client_and_the_core_apis():
    seen = {(parse_fixture_name(p)[0], parse_fixture_name(p)[1]) for p in FIXTURES}
    for client in ("librdkafka", "kafka-python", "kafka-python2"):
        for api in ("apiversions", "metadata", "produce", "fetch", "listoffsets", "findcoordinator",
                    "joingroup", "syncgroup", "leavegroup", "offsetcommit", "offsetfetch", "initproducerid",
                    "createtopics", "deletetopics", "createpartitions", "describeconfigs",
                    "describegroups", "listgroups"):
            if (client, api) == ("kafka-python2", "initproducerid"):
                continue  # kafka-python 2.0 has no idempotent producer
            assert (client, api) in seen, f"no {client} fixture for {api}"
    for api in ("apiversions", "metadata", "produce", "initproducerid", "fetch", "listoffsets", "joingroup",
                "syncgroup", "heartbeat", "offsetcommit", "offsetfetch", "leavegroup", "createtopics",
                "createpartitions", "deletetopics", "describeconfigs", "describecluster", "describegroups",
                "listgroups"):
        assert ("java", api) in seen, f"no java fixture for {api}"


def _decode_all(chunks: list[bytes]):
    conn = ServerConnection()
    out = []
    for chunk in chunks:
        conn.receive_data(chunk)
        while (req := conn.next_request()) is not None:
            out.append(req)
    return conn, out


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixture_whole(path):
    data = path.read_bytes()
    client, api, version, _ = parse_fixture_name(path)
    conn, [req] = _decode_all([data])
    assert req.api.name.lower() == api
    assert req.api_version == version
    assert req.trailing_bytes == 0
    assert conn.buffered == 0
    assert conn.last_frame == data


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixture_byte_by_byte(path):
    data = path.read_bytes()
    _, [whole] = _decode_all([data])
    conn, got = _decode_all([data[i : i + 1] for i in range(len(data))])
    assert got == [whole]
    assert conn.buffered == 0


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixture_with_trailing_bytes(path):
    data = path.read_bytes()
    _, [whole] = _decode_all([data])
    conn, got = _decode_all([data + data + data[:5]])
    assert got == [whole, whole]
    assert conn.buffered == 5  # the partial third frame waits for more bytes


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixture_reencodes_byte_exact(path):
    data = path.read_bytes()
    _, [req] = _decode_all([data])
    cls = req.api.request_class(req.api_version)
    buffer = io.BytesIO()
    entity_writer(cls.__header_schema__)(buffer, req.header)
    entity_writer(cls)(buffer, req.body)
    assert frame(buffer.getvalue()) == data


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixture_error_response_is_readable_by_a_client(path):
    data = path.read_bytes()
    _, [req] = _decode_all([data])
    response = encode_response(req, req.error_response(35))
    correlation_id, body, _ = decode_response(req.api_key, req.api_version, response)
    assert correlation_id == req.correlation_id
    assert type(body) is req.response_class


def test_every_fixture_version_is_advertised():
    for path in FIXTURES:
        _, api, version, _ = parse_fixture_name(path)
        [entry] = [a for a in REGISTRY if a.name.lower() == api]
        assert entry.supports(version)
