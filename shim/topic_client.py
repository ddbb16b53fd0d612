"""`camus topic create|delete|list|describe`: topic administration from the command line.

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
DESCRIBE_CONFIGS, LIST_OFFSETS = (32, 1), (2, 1)
TOPIC_RESOURCE, EARLIEST, LATEST = 2, -2, -1


class Unreachable(OSError):
    """No broker answers at the address given."""


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
    if not port.isdigit():
        raise ValueError(f"--bootstrap-server {bootstrap!r}: expected HOST:PORT")
    try:
        s = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
    except OSError as exc:
        raise Unreachable(f"cannot connect to {bootstrap} ({exc.strerror or exc}): "
                          "is camus serve running there?") from exc
    with s:
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


def _explain(name: str, code, message: str | None) -> str:
    if code.name == "unknown_topic_or_partition":
        return f"topic {name!r} does not exist"
    return f"{message} ({code.name})" if message else code.name


def create(bootstrap: str, name: str, partitions: int,
           configs: dict[str, str]) -> tuple[str | None, int]:
    """(None, partitions made) on success, else (the broker's error message, -1)."""
    body = call(bootstrap, CREATE_TOPICS, topics=[{
        "name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        timeout=30000, validate_only=False)
    t = body.topics[0]
    if t.error_code != 0:
        return _explain(name, t.error_code, t.error_message), -1
    return None, t.num_partitions


def delete(bootstrap: str, name: str) -> str | None:
    body = call(bootstrap, DELETE_TOPICS, topic_names=[name], timeout=30000)
    r = body.responses[0]
    return None if r.error_code == 0 else _explain(name, r.error_code, r.error_message)


def _partitions(bootstrap: str, names: list[str] | None) -> dict[str, int]:
    body = call(bootstrap, METADATA, topics=None if names is None else [{"name": n} for n in names],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return {t.name: len(t.partitions) for t in body.topics if t.error_code == 0}


def _configs(bootstrap: str, names: list[str]) -> dict[str, dict[str, str]]:
    if not names:
        return {}
    body = call(bootstrap, DESCRIBE_CONFIGS, include_synonyms=False, resources=[
        {"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
        for n in names])
    return {r.resource_name: {c.name: c.value for c in r.configs}
            for r in body.results if r.error_code == 0}


def list_topics(bootstrap: str) -> list[tuple[str, ...]]:
    """(name, partitions, what it is) per topic: `view of SOURCE where FILTER`, or `topic`
    and its schema if it has one."""
    parts = _partitions(bootstrap, None)
    configs = _configs(bootstrap, sorted(parts))
    rows = []
    for name in sorted(parts):
        c = configs.get(name, {})
        if c.get("camus.source"):
            what = f"view of {c['camus.source']} where {c.get('camus.filter', '')}"
        else:
            what = f"topic, schema {c['camus.schema']}" if c.get("camus.schema") else "topic"
        rows.append((name, str(parts[name]), what))
    return rows


def _state_order(key: str) -> tuple:
    """`camus.state.PARTITION.STATE` by partition number, then state."""
    partition, _, rest = key[len("camus.state."):].partition(".")
    return (int(partition), rest) if partition.isdigit() else (-1, key)


def describe(bootstrap: str, name: str) -> str | None:
    """A topic's or view's configs, partitions with their offsets, the broker's counters
    for it (`camus.stats.*`) and, for a view with state, its instances (`camus.state.*`);
    None if there is no such topic."""
    parts = _partitions(bootstrap, [name]).get(name)
    if parts is None:
        return None
    configs = _configs(bootstrap, [name]).get(name, {})
    ends = {}
    for which in (EARLIEST, LATEST):
        body = call(bootstrap, LIST_OFFSETS, replica_id=-1, topics=[{"name": name, "partitions": [
            {"partition_index": p, "timestamp": which} for p in range(parts)]}])
        for p in body.topics[0].partitions:
            ends.setdefault(p.partition_index, {})[which] = p.offset
    lines = [f"{'view' if configs.get('camus.source') else 'topic'} {name}"]
    for key in ("camus.source", "camus.filter", "camus.schema"):
        if configs.get(key):
            lines.append(f"  {key.split('.', 1)[1]}: {configs[key]}")
    lines.append(f"  partitions: {parts}")
    for p in range(parts):
        lo, hi = ends[p].get(EARLIEST, -1), ends[p].get(LATEST, -1)
        lines.append(f"    {p}: offsets {lo}..{hi} ({hi - lo} in range)")
    stats = sorted((k, v) for k, v in configs.items() if k.startswith("camus.stats."))
    if stats:
        lines.append("  counters:")
        lines += [f"    {k[len('camus.stats.'):]}: {v}" for k, v in stats]
    state = sorted(((k, v) for k, v in configs.items() if k.startswith("camus.state.")),
                   key=lambda kv: _state_order(kv[0]))
    if state:
        lines.append("  state (per partition, read from the switch):")
        lines += [f"    {k[len('camus.state.'):]}: {v}" for k, v in state]
    others = sorted((k, v) for k, v in configs.items() if not k.startswith("camus."))
    lines.append("  configs: " + ", ".join(f"{k}={v}" for k, v in others))
    return "\n".join(lines)
