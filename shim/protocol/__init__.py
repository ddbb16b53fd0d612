"""Kafka wire protocol for camus, sans-IO: no sockets, no asyncio, no topics' meaning.

Bytes in, typed requests out; typed responses in, bytes out (see `connection`):

    conn = ServerConnection()            # one per client connection
    conn.receive_data(chunk)             # whatever the socket read
    while (request := conn.next_request()) is not None:
        ...                              # request.body is a kio dataclass
        if request.expects_response:
            send(encode_response(request, request.response({...})))

Message bodies are kio's dataclasses, generated from Kafka's JSON schemas (pinned in
setup.cfg); the modules here add what the schemas do not say: framing, header
versions, version negotiation, the registry behind ApiVersions, per-family helpers
that hide version splits, error answers, and record batches with compression
(`records`, `compression`), which kio does not compress and whose timestamps it
truncates. Importing this package registers every API family into `REGISTRY`. The record
walk's compiled half, and the broker's other fast paths with it, is the extension
`shim.protocol._native`, loaded by `native`. Nothing here imports the rest of `shim` (the
import contract, .importlinter).
"""

from .connection import Request, ServerConnection, encode_response, generic_error_response
from .entities import build, to_dict
from .errors import ErrorCode, FramingError, ProtocolError, RecordBatchError
from .registry import REGISTRY, Api, Registry

# Family modules register themselves on import; the order is irrelevant.
from . import admin, api_versions, fetch, group_apis, metadata, offsets, produce  # noqa: E402,F401
from . import security  # noqa: E402,F401
from . import cluster_admin  # noqa: E402,F401
from . import transactions  # noqa: E402,F401

__all__ = [
    "Api",
    "ErrorCode",
    "FramingError",
    "ProtocolError",
    "REGISTRY",
    "RecordBatchError",
    "Registry",
    "Request",
    "ServerConnection",
    "build",
    "encode_response",
    "generic_error_response",
    "to_dict",
]
