"""`camus topic create|delete|list`: topic administration from the command line.

Kafka's own `kafka-topics` tool cannot create camus topics: it checks config names
against Kafka's list on the client side ("Unknown topic config name: camus.schema") and
splits `--config` values on every `=`, which `camus.schema` values contain. This client
speaks CreateTopics, DeleteTopics and Metadata itself (kio's message classes, one
request per connection, blocking), so the broker's own checks are the only ones, and a
bad schema or filter prints the broker's line/column message.
"""

from __future__ import annotations

import io
import socket
import struct

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from shim.protocol import build
from shim.protocol.framing import frame

CREATE_TOPICS, DELETE_TOPICS, METADATA = (19, 7), (20, 5), (3, 12)


def call(bootstrap: str, api: tuple[int, int], timeout: float = 30.0, **fields):
    """Send one request to `bootstrap` (HOST:PORT) and return the decoded response body."""
    key, version = api
    cls = load_request_schema(key, version)
    header_cls = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=key, request_api_version=version,
                                              correlation_id=1, client_id="camus-topic"))
    entity_writer(cls)(buf, build(cls, **fields))
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout) as s:
        s.sendall(frame(buf.getvalue()))
        size = struct.unpack(">i", _read(s, 4))[0]
        payload = _read(s, size)
    resp_cls = load_response_schema(key, version)
    _, offset = entity_reader(resp_cls.__header_schema__)(payload, 0)
    body, _ = entity_reader(resp_cls)(payload, offset)
    return body


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return out


def parse_configs(items: list[str]) -> dict[str, str]:
    """KEY=VALUE pairs, split at the first `=` only (schema values hold more)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--config {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def create(bootstrap: str, name: str, partitions: int, configs: dict[str, str]) -> str | None:
    """None on success, else the broker's error message."""
    body = call(bootstrap, CREATE_TOPICS, topics=[{
        "name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        timeout=30000, validate_only=False)
    t = body.topics[0]
    return None if t.error_code == 0 else f"{t.error_code.name}: {t.error_message or ''}".strip()


def delete(bootstrap: str, name: str) -> str | None:
    body = call(bootstrap, DELETE_TOPICS, topic_names=[name], timeout=30000)
    r = body.responses[0]
    return None if r.error_code == 0 else f"{r.error_code.name}: {r.error_message or ''}".strip()


def list_topics(bootstrap: str) -> list[tuple[str, int]]:
    body = call(bootstrap, METADATA, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)
    return sorted((t.name, len(t.partitions)) for t in body.topics)
