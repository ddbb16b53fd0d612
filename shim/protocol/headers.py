"""Request header v1/v2 parsing and response header v0/v1 encoding (KIP-482).

The header version is not on the wire: it follows from the API and version, which
kio records on each generated class (`__header_schema__`). A flexible request uses
header v2 (v1 plus a tag buffer); its client_id nevertheless keeps the int16
length, which kio's header schema already encodes. ApiVersions responses use header
v0 at every version so that a client can read the error of a version it sent too
new; kio's ApiVersions response classes carry that too.
"""

from __future__ import annotations

import io
import struct
from functools import cache
from typing import Any

from kio.serial import entity_reader, entity_writer

__all__ = ["peek_header", "read_request_header", "read_body", "write_response_header", "write_body"]

_FIXED = struct.Struct(">hhi")


def peek_header(payload: bytes) -> tuple[int, int, int] | None:
    """(api_key, api_version, correlation_id) from the fixed start every header shares."""
    if len(payload) < _FIXED.size:
        return None
    return _FIXED.unpack_from(payload, 0)


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def read_request_header(payload: bytes, request_class: type) -> tuple[Any, int]:
    """Parse the header `request_class` expects; returns (header, bytes consumed)."""
    return _reader(request_class.__header_schema__)(payload, 0)


def write_response_header(buffer: io.BytesIO, response_class: type, correlation_id: int) -> None:
    header_class = response_class.__header_schema__
    _writer(header_class)(buffer, header_class(correlation_id=correlation_id))


def read_body(payload: bytes, offset: int, cls: type) -> tuple[Any, int]:
    return _reader(cls)(payload, offset)


def write_body(buffer: io.BytesIO, cls: type, body: Any) -> None:
    _writer(cls)(buffer, body)
