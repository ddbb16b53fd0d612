"""The pipeline IR (pipeline.json) as the switch sees it: validated, names resolved to offsets.

`parse_pipeline(dict)` checks a pipeline.json document against docs/pipeline-ir.md and
returns a `Pipeline` whose applications carry everything the data plane needs per message
(field bit offsets and widths, stage order, table names) and whose `tables` index every
table by name with its role. Both data-plane implementations are built from this one model,
so a pipeline either loads identically into both or is refused with the same
`PipelineError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

IR_VERSION = 1
FRAMINGS = ("single", "moldudp64")
MATCH_KINDS = ("exact", "range", "lpm", "ternary")
MOLDUDP64_HEADER_BYTES = 20
MAX_FIELD_WIDTH = 64
MAX_STATE_WIDTH = 56  # the native tables pack an action and its parameter into 64 bits

# Table roles: what a table's key is and which actions it may hold.
STAGE, DEFAULT, LEAF, IPV4, EGRESS = "stage", "default", "leaf", "ipv4", "egress"
ROLE_ACTIONS = {
    # A stage may also decide: fwd/mcast end the walk, skipping later stages and the leaf.
    STAGE: ("set_state", "fwd", "mcast"),
    DEFAULT: ("set_state", "fwd", "mcast"),
    LEAF: ("fwd", "mcast"),
    IPV4: ("fwd", "drop"),
    EGRESS: ("set_udp_port",),
}


class PipelineError(ValueError):
    """pipeline.json does not describe a pipeline this switch can run."""


@dataclass(frozen=True)
class FieldRef:
    """A message field: `width` bits starting `bit_offset` bits after the message's first byte."""

    name: str
    bit_offset: int
    width: int


@dataclass(frozen=True)
class Stage:
    table: str
    default_table: str
    field: FieldRef
    match_kind: str


@dataclass(frozen=True)
class Application:
    name: str
    udp_port: int
    framing: str
    packet_header_bytes: int  # bytes between the UDP header and the first block/message
    message_bytes: int  # a subscription message has at least this many bytes
    type_field: FieldRef | None
    types: frozenset[int]
    stages: tuple[Stage, ...]
    leaf_table: str


@dataclass(frozen=True)
class TableInfo:
    """One table: its role, and for stage tables the field key and its match kind."""

    name: str
    role: str
    state_width: int  # width of the exact first key (state; egress port for the egress table)
    field: FieldRef | None = None  # stage tables: the field key; ipv4: the destination address
    match_kind: str | None = None


@dataclass(frozen=True)
class Pipeline:
    state_width: int
    applications: tuple[Application, ...]
    ipv4_table: str
    egress_table: str
    tables: dict[str, TableInfo]

    def application_for_port(self, udp_port: int) -> Application | None:
        for app in self.applications:
            if app.udp_port == udp_port:
                return app
        return None


IPV4_DST = FieldRef("ipv4.dst_addr", 0, 32)
PORT_WIDTH = 32  # egress ports and replica ids are carried as 32-bit values
RID_WIDTH = 16  # P4Runtime replica ids (v1model egress_rid is 16 bits)


def _need(doc: dict, key: str, kind: type | tuple, where: str) -> Any:
    if not isinstance(doc, dict) or key not in doc:
        raise PipelineError(f"{where}: missing {key!r}")
    value = doc[key]
    # bool is an int subclass; a JSON true is never a valid number here.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise PipelineError(f"{where}.{key}: expected {kind}, got {type(value).__name__}")
    return value


def _message_fields(app: dict, where: str) -> dict[str, FieldRef]:
    """Every field the message declares, from `message.headers` and the `fields` index."""
    found: dict[str, FieldRef] = {}
    message = _need(app, "message", dict, where)
    for h in message.get("headers", []):
        hname = _need(h, "name", str, f"{where}.message.headers")
        base = _need(h, "bit_offset", int, f"{where}.message.headers.{hname}")
        for f in h.get("fields", []):
            fname = _need(f, "name", str, f"{where}.message.headers.{hname}.fields")
            q = f"{hname}.{fname}"
            found[q] = FieldRef(q, base + _need(f, "bit_offset", int, q), _need(f, "width", int, q))
    for q, f in app.get("fields", {}).items():
        found[q] = FieldRef(q, _need(f, "bit_offset", int, q), _need(f, "width", int, q))
    return found


def _check_field(ref: FieldRef, message_bytes: int, where: str) -> None:
    if not 1 <= ref.width <= MAX_FIELD_WIDTH:
        raise PipelineError(f"{where}: field {ref.name} width {ref.width} not in 1..64")
    if ref.bit_offset < 0 or ref.bit_offset + ref.width > message_bytes * 8:
        raise PipelineError(f"{where}: field {ref.name} lies outside the {message_bytes}-byte message")


def _parse_application(app: dict, index: int) -> Application:
    where = f"applications[{index}]"
    name = _need(app, "name", str, where)
    where = f"application {name!r}"
    udp_port = _need(app, "udp_port", int, where)
    if not 0 <= udp_port <= 0xFFFF:
        raise PipelineError(f"{where}: udp_port {udp_port} out of range")
    framing = app.get("framing", "single")
    if framing not in FRAMINGS:
        raise PipelineError(f"{where}: framing {framing!r} is not one of {FRAMINGS}")
    header_bytes = 0
    if framing == "moldudp64":
        ph = _need(app, "packet_header", dict, where)
        # The IR example says "bytes"; the compiler writes "bits" (160). Either will do.
        if "bytes" in ph:
            header_bytes = _need(ph, "bytes", int, f"{where}.packet_header")
        else:
            header_bytes = _need(ph, "bits", int, f"{where}.packet_header") // 8
        if header_bytes != MOLDUDP64_HEADER_BYTES:
            raise PipelineError(f"{where}: a MoldUDP64 packet header is 20 bytes, not {header_bytes}")
    message = _need(app, "message", dict, where)
    message_bytes = _need(message, "bytes", int, f"{where}.message")
    if message_bytes < 0:
        raise PipelineError(f"{where}: message.bytes is negative")
    fields = _message_fields(app, where)
    type_field = None
    types: frozenset[int] = frozenset()
    if message.get("type_field") is not None:
        tname = _need(message, "type_field", str, f"{where}.message")
        if tname not in fields:
            raise PipelineError(f"{where}: type_field {tname!r} is not a message field")
        type_field = fields[tname]
        _check_field(type_field, message_bytes, where)
        types = frozenset(_need(message, "types", list, f"{where}.message"))
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in types):
            raise PipelineError(f"{where}: message.types must be integers")
    stages = []
    for i, s in enumerate(_need(app, "stages", list, where)):
        swhere = f"{where}.stages[{i}]"
        fname = _need(s, "field", str, swhere)
        if fname not in fields:
            raise PipelineError(f"{swhere}: field {fname!r} is not a message field")
        kind = _need(s, "match_kind", str, swhere)
        if kind not in MATCH_KINDS:
            raise PipelineError(f"{swhere}: match_kind {kind!r} is not one of {MATCH_KINDS}")
        _check_field(fields[fname], message_bytes, swhere)
        stages.append(
            Stage(_need(s, "table", str, swhere), _need(s, "default_table", str, swhere), fields[fname], kind)
        )
    return Application(
        name=name,
        udp_port=udp_port,
        framing=framing,
        packet_header_bytes=header_bytes,
        message_bytes=message_bytes,
        type_field=type_field,
        types=types,
        stages=tuple(stages),
        leaf_table=_need(app, "leaf_table", str, where),
    )


def parse_pipeline(doc: dict) -> Pipeline:
    """Validate a pipeline.json document; raise PipelineError naming the first problem."""
    if not isinstance(doc, dict):
        raise PipelineError("pipeline.json must be a JSON object")
    version = doc.get("camus_ir")
    if version != IR_VERSION:
        raise PipelineError(f"camus_ir {version!r} is not supported (this switch runs {IR_VERSION})")
    state_width = _need(doc, "state_width", int, "pipeline")
    if not 1 <= state_width <= MAX_STATE_WIDTH:
        raise PipelineError(f"state_width {state_width} not in 1..{MAX_STATE_WIDTH}")
    apps = tuple(_parse_application(a, i) for i, a in enumerate(_need(doc, "applications", list, "pipeline")))
    ports = [a.udp_port for a in apps]
    if len(set(ports)) != len(ports):
        raise PipelineError(f"two applications share a UDP port: {ports}")
    ipv4_table = _need(doc, "ipv4_table", str, "pipeline")
    egress_table = _need(doc, "egress_table", str, "pipeline")

    tables: dict[str, TableInfo] = {}

    def add(info: TableInfo) -> None:
        if info.name in tables:
            raise PipelineError(f"table name {info.name!r} is used twice")
        tables[info.name] = info

    for app in apps:
        for st in app.stages:
            add(TableInfo(st.table, STAGE, state_width, st.field, st.match_kind))
            add(TableInfo(st.default_table, DEFAULT, state_width))
        add(TableInfo(app.leaf_table, LEAF, state_width))
    add(TableInfo(ipv4_table, IPV4, 0, IPV4_DST, "lpm"))
    add(TableInfo(egress_table, EGRESS, PORT_WIDTH))
    return Pipeline(state_width, apps, ipv4_table, egress_table, tables)
