"""Theory of operation: bytes in, typed requests out; typed responses in, bytes out.

A `ServerConnection` holds no socket. The server feeds it whatever it read
(`receive_data`), then calls `next_request()` until it returns None (more bytes
needed). Each call yields a `Request`: the parsed header, the kio dataclass for the
body at the version the client sent, and the registered `Api` that handles it. The
server answers with `encode_response(request, response)`, where `response` is the
kio response dataclass for that version or, more conveniently, a mapping that
`request.response(...)` / `entities.build` turns into one.

What goes wrong surfaces as `ProtocolError` from `next_request()`:

- a broken stream (negative or absurd frame size, or one above the limit the server
  set with `limit_frames`): `FramingError`; the decoder refuses further input; close
  the connection.
- ApiVersions at a version newer than registered: the body is not parsed, and
  `error.response` is an UNSUPPORTED_VERSION answer in the v0 body format listing
  every supported range, so that clients retry at a version we speak.
- another registered API at a version outside its range, or an API key nobody
  registered: if kio knows that (key, version), `error.response` answers
  UNSUPPORTED_VERSION in the client's own format; otherwise it is None (close,
  as Kafka does, since no response schema is known).
- a body that does not parse, or announces more array elements than it has
  bytes: INVALID_REQUEST with no response (close), as Kafka.

In every non-framing case the offending frame has been consumed and the next call
continues with the next frame.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema

from . import headers
from .entities import build
from .errors import ErrorCode, ProtocolError
from .framing import DEFAULT_LIMIT_NAME, DEFAULT_MAX_FRAME_SIZE, FrameDecoder, frame
from .registry import REGISTRY, Api, Registry
from .prescan import prescan

__all__ = ["Request", "ServerConnection", "encode_response", "generic_error_response"]

API_VERSIONS_KEY = 18


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One decoded request: header, body (a kio dataclass) and the Api handling it."""

    api: Api
    header: Any
    body: Any
    # Bytes left in the frame after the body; Kafka ignores them, tests assert 0.
    trailing_bytes: int = 0

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def expects_response(self) -> bool:
        return self.api.expects_response(self.body)

    @property
    def response_class(self) -> type:
        return self.api.response_class(self.api_version)

    def response(self, data: Any = None, /, **fields: Any) -> Any:
        """The response dataclass for this request's version, built from plain data."""
        return build(self.response_class, data, **fields)

    def error_response(self, error_code: ErrorCode | int, message: str | None = None) -> Any:
        """An answer failing the whole request with `error_code` (each item echoed)."""
        data = self.api.error_response(self.body, self.api_version, ErrorCode(error_code), message)
        return self.response(data)


def encode_response(request: Request, response: Any) -> bytes:
    """Frame `response` (kio dataclass or plain data) for `request`, header included."""
    cls = request.response_class
    if isinstance(response, Mapping):
        response = build(cls, response)
    elif type(response) is not cls:
        raise TypeError(
            f"{request.api.name} v{request.api_version} needs {cls.__module__}.{cls.__name__}, "
            f"got {type(response).__module__}.{type(response).__name__}"
        )
    return _encode(cls, request.correlation_id, response)


def _encode(cls: type, correlation_id: int, response: Any) -> bytes:
    buffer = io.BytesIO()
    headers.write_response_header(buffer, cls, correlation_id)
    headers.write_body(buffer, cls, response)
    return frame(buffer.getvalue())


def generic_error_response(api_key: int, api_version: int, correlation_id: int, error_code: ErrorCode) -> bytes | None:
    """An answer for any API kio knows: top-level error_code set, everything else empty.

    For APIs outside the registry (transactions, SASL, ACLs, ...), where no family
    module knows how to echo items. None when kio has no schema for (key, version).
    """
    try:
        cls = load_response_schema(api_key, api_version)
    except (KioIndexError, ImportError, AttributeError, ValueError):
        return None
    return _encode(cls, correlation_id, build(cls, {"error_code": error_code}))


class ServerConnection:
    """The broker side of one Kafka connection, without the connection."""

    def __init__(self, registry: Registry = REGISTRY, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.registry = registry
        self._frames = FrameDecoder(max_frame_size)
        self._last_payload = b""

    def receive_data(self, data: bytes) -> None:
        self._frames.feed(data)

    @property
    def buffered(self) -> int:
        return self._frames.buffered

    def limit_frames(self, size: int = DEFAULT_MAX_FRAME_SIZE, name: str = DEFAULT_LIMIT_NAME) -> None:
        """Refuse frames larger than `size` from the next one on (`name`: the setting, for the
        error): the server lowers the limit until a connection has authenticated."""
        self._frames.max_frame_size, self._frames.limit_name = size, name

    @property
    def pending_frame_size(self) -> int | None:
        """The size the next, still incomplete, request announced (None between requests)."""
        return self._frames.pending_size

    def next_request(self) -> Request | None:
        payload = self._frames.next_frame()
        if payload is None:
            return None
        self._last_payload = payload
        return self.decode(payload)

    def next_raw_frame(self) -> bytes | None:
        """The next frame's payload, undecoded (SASL tokens after a v0 SaslHandshake travel
        bare, without a request header), or None until it is complete."""
        return self._frames.next_frame()

    @property
    def last_frame(self) -> bytes:
        """The raw frame (size prefix included) of the last request, for logs and fixtures."""
        return frame(self._last_payload)

    def decode(self, payload: bytes) -> Request:
        """Decode one frame payload (size prefix already stripped)."""
        fixed = headers.peek_header(payload)
        if fixed is None:
            raise ProtocolError(
                f"request of {len(payload)} bytes is shorter than a request header",
                ErrorCode.invalid_request,
            )
        key, version, correlation_id = fixed
        where = dict(correlation_id=correlation_id, api_key=key, api_version=version)
        api = self.registry.get(key)
        if api is None or not api.supports(version):
            raise self._unsupported(api, key, version, correlation_id, payload)
        request_class = api.request_class(version)
        try:
            # Refuses impossible array lengths (kio would abort the process) and
            # drops unknown tagged fields (kio would refuse them) before kio parses.
            payload = prescan(payload, [request_class.__header_schema__, request_class])
            header, offset = headers.read_request_header(payload, request_class)
            body, size = headers.read_body(payload, offset, request_class)
        except Exception as exc:  # kio raises DecodeError, ValueError, UnicodeDecodeError...
            raise ProtocolError(
                f"malformed {api.name} v{version} request (correlation id {correlation_id}): {exc}",
                ErrorCode.invalid_request,
                **where,
            ) from exc
        return Request(api=api, header=header, body=body, trailing_bytes=len(payload) - offset - size)

    def _unsupported(self, api: Api | None, key: int, version: int, correlation_id: int, payload: bytes) -> ProtocolError:
        where = dict(correlation_id=correlation_id, api_key=key, api_version=version)
        if key == API_VERSIONS_KEY and api is not None:
            # The body format of a newer ApiVersions is unknown by definition: answer
            # in v0, which every client can read, and let it retry lower.
            from .api_versions import unsupported_version_response

            return ProtocolError(
                f"ApiVersions v{version} is newer than v{api.max_version}; answering UNSUPPORTED_VERSION in v0",
                ErrorCode.unsupported_version,
                response=unsupported_version_response(self.registry, correlation_id),
                **where,
            )
        implemented = api is not None
        name = api.name if api is not None else f"API key {key}"
        response = None
        if api is not None:
            response = self._error_in_client_format(api, version, correlation_id, payload)
        if response is None:
            response = generic_error_response(key, version, correlation_id, ErrorCode.unsupported_version)
        supported = (f"supported v{api.min_version}..v{api.max_version}" if implemented
                     else "not implemented")
        return ProtocolError(
            f"{name} v{version} ({supported})" + ("; closing the connection" if response is None else ""),
            ErrorCode.unsupported_version,
            response=response,
            **where,
        )

    @staticmethod
    def _error_in_client_format(api: Api, version: int, correlation_id: int, payload: bytes) -> bytes | None:
        # A version kio knows but we do not advertise (a client that skipped
        # ApiVersions): answer it properly, echoing the items it asked about.
        try:
            request_class = load_request_schema(api.key, version)
            payload = prescan(payload, [request_class.__header_schema__, request_class])
            header, offset = headers.read_request_header(payload, request_class)
            body, _ = headers.read_body(payload, offset, request_class)
            cls = load_response_schema(api.key, version)
            data = api.error_response(body, version, ErrorCode.unsupported_version, None)
            return _encode(cls, correlation_id, build(cls, data))
        except Exception:
            return None
