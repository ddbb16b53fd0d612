"""Errors raised by the wire layer, each carrying the Kafka error code to answer with.

The server reacts to a `ProtocolError` in one of two ways: if `response` holds bytes it
sends them (the frame was well delimited and the client can be told what went wrong);
if `response` is None it logs `str(error)` and closes the connection, which is what a
Kafka broker does when it cannot even tell which response schema the client expects.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "ProtocolError", "FramingError", "RecordBatchError"]


class ProtocolError(Exception):
    """A request that cannot be served as sent.

    `error_code` is the Kafka error that describes it; `correlation_id` and
    `api_key`/`api_version` are filled in once the request header was readable;
    `response` is a complete, framed answer when one can be given.
    """

    def __init__(
        self,
        message: str,
        error_code: ErrorCode,
        *,
        correlation_id: int | None = None,
        api_key: int | None = None,
        api_version: int | None = None,
        response: bytes | None = None,
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.response = response

    @property
    def close_connection(self) -> bool:
        return self.response is None


class FramingError(ProtocolError):
    """The byte stream itself is broken (absurd size, unreadable header).

    Nothing after this point can be trusted to start at a frame boundary, so the
    decoder refuses further input and the server must close the connection.
    """

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.invalid_request) -> None:
        super().__init__(message, error_code)


class RecordBatchError(ValueError):
    """A record batch that fails validation (CRC, sizes, codec, offsets).

    Raised by `shim.protocol.records`; the produce path answers the partition with
    `error_code` (CORRUPT_MESSAGE unless a more precise code applies).
    """

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.corrupt_message) -> None:
        super().__init__(message)
        self.error_code = error_code
