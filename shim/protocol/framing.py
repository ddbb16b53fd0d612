"""Kafka framing: every request and response is an int32 size followed by that many bytes.

`FrameDecoder` is fed arbitrary chunks (one byte, a whole socket read, several frames
at once) and hands back complete frame payloads. The size is checked the moment its
four bytes are in, so a client announcing 2 GiB (or a negative size, or a TLS
handshake sent to a plaintext port, which reads as a huge size) is rejected before a
single payload byte is buffered. The limit may change between frames: a server lowers it
while a connection has not authenticated (Kafka's `sasl.server.max.receive.size`).
"""

from __future__ import annotations

import struct

from .errors import ErrorCode, FramingError

# Kafka's socket.request.max.bytes default: the largest request a broker accepts.
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
DEFAULT_LIMIT_NAME = "socket.request.max.bytes"

_SIZE = struct.Struct(">i")


def frame(payload: bytes) -> bytes:
    """Prefix `payload` with its int32 size."""
    return _SIZE.pack(len(payload)) + payload


class FrameDecoder:
    """Accumulates bytes and yields whole frame payloads (size prefix stripped)."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 limit_name: str = DEFAULT_LIMIT_NAME) -> None:
        self.max_frame_size = max_frame_size
        self.limit_name = limit_name  # the setting an oversized frame is refused by, for the error
        self._buffer = bytearray()
        self._start = 0  # consumed prefix of _buffer, compacted lazily
        self._broken: FramingError | None = None

    def feed(self, data: bytes) -> None:
        if self._broken is not None:
            raise self._broken
        self._buffer += data

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer) - self._start

    @property
    def pending_size(self) -> int | None:
        """The announced size of the frame whose bytes are still arriving, if its size
        prefix is in (None between frames). What a server reserves before reading on."""
        if self.buffered < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        return size if 0 <= size <= self.max_frame_size else None

    def next_frame(self) -> bytes | None:
        """The next complete payload, or None until more bytes arrive.

        Raises `FramingError` for an impossible size; the decoder then stays broken.
        """
        if self._broken is not None:
            raise self._broken
        if self.buffered < 4:
            self._compact()
            return None
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        if size < 0 or size > self.max_frame_size:
            self._broken = FramingError(
                f"frame size {size} outside 0..{self.max_frame_size} ({self.limit_name}); "
                "closing the connection"
                + (" (TLS or HTTP sent to a plaintext Kafka port?)"
                   if size > self.max_frame_size and self.limit_name == DEFAULT_LIMIT_NAME else ""),
                ErrorCode.invalid_request,
            )
            self._buffer.clear()
            self._start = 0
            raise self._broken
        end = self._start + 4 + size
        if len(self._buffer) < end:
            self._compact()
            return None
        payload = bytes(self._buffer[self._start + 4 : end])
        self._start = end
        return payload

    def _compact(self) -> None:
        # Dropping consumed bytes only when waiting keeps many small frames in one
        # read from costing a memmove each.
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
