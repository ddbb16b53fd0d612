"""Shared helpers for the protocol tests: the client side of the wire, and the fixtures."""

from __future__ import annotations

import io
import pathlib
import struct

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from shim.protocol.framing import frame

FIXTURES = pathlib.Path(__file__).parent / "fixtures"

# Fixture file names use the registry's API names, lowercased.
def fixture_files() -> list[pathlib.Path]:
    return sorted(FIXTURES.glob("*.bin"))


def parse_fixture_name(path: pathlib.Path) -> tuple[str, str, int, str]:
    """(client, api name lowercased, version, tag) from `<client>-<api>-v<N>[-<tag>].bin`."""
    stem = path.stem
    for client in ("kafka-python2", "kafka-python", "librdkafka", "java"):
        if stem.startswith(client + "-"):
            rest = stem[len(client) + 1 :].split("-")
            return client, rest[0], int(rest[1][1:]), "-".join(rest[2:])
    raise ValueError(path)


def encode_request(api_key: int, version: int, body: object, correlation_id: int = 7, client_id: str | None = "t") -> bytes:
    """A framed request as a client would send it (kio picks header v1 or v2)."""
    cls = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(
        buffer,
        header_cls(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id),
    )
    entity_writer(cls)(buffer, body)
    return frame(buffer.getvalue())


def decode_response(api_key: int, version: int, data: bytes) -> tuple[int, object, int]:
    """(correlation_id, body, header size) of a framed response, reading it as a client."""
    (size,) = struct.unpack_from(">i", data, 0)
    assert size == len(data) - 4, "frame size must cover exactly the response"
    payload = data[4:]
    cls = load_response_schema(api_key, version)
    header, offset = entity_reader(cls.__header_schema__)(payload, 0)
    body, used = entity_reader(cls)(payload, offset)
    assert offset + used == len(payload), "response has bytes after its body"
    return header.correlation_id, body, offset
