"""Lowering a compiled spec to the pipeline IR (`pipeline.model`): applications and stages.

`stages_for` names each stage's tables and gives it its match kind; `application` describes
what the data plane needs of one spec (where its messages are, where each query field sits,
the ordered stages); `pipeline` puts applications together. docs/pipeline-ir.md is the
reference for the format the result is written in (`pipeline.document`).
"""

from __future__ import annotations

from compiler.spec import Header, Spec
from compiler.tables import STATIC_STATE_BITS, group_id
from pipeline import model


def _field(q) -> model.Field:
    return model.Field(q.qname, q.bit_offset, q.width, q.kind, q.ascii)


def stages_for(spec: Spec, order, kinds: dict[str, str], lane: int = 0) -> list[model.Stage]:
    """The stages testing fields `order` in turn; lanes after the first (`lane` k > 0) name
    their tables `{app}_l{k}_{field}`."""
    names = [q.name for q in spec.query_fields.values()]
    out = []
    for q in order:
        base = q.name if names.count(q.name) == 1 else q.qname.replace(".", "_")
        table = f"{spec.name}_{_lane_prefix(lane)}{base}"
        out.append(model.Stage(table, f"{table}_default", _field(q), kinds[q.qname]))
    return out


def _lane_prefix(lane: int) -> str:
    return f"l{lane}_" if lane else ""


def leaf_table(spec: Spec, lane: int = 0) -> str:
    return f"{spec.name}_{_lane_prefix(lane)}leaf"


def _header(h: Header, bit_offset: int | None = None) -> model.Header:
    return model.Header(h.name, h.bits, tuple(model.HeaderField(f.name, f.bit_offset, f.width) for f in h.fields),
                        bit_offset)


def application(spec: Spec, stages: list[model.Stage],
                lanes: tuple[model.Lane, ...] = ()) -> model.Application:
    """The application; `stages` are its first lane's, `lanes` the ones after it."""
    headers, offset = [], 0
    for h in spec.message_headers:
        headers.append(_header(h, offset))
        offset += h.bits
    type_field = None
    if spec.message_type_field:
        f = spec.message_type_field
        width = next(x.width for h in spec.message_headers for x in h.fields if x.qname == f)
        type_field = model.Field(f, spec.message_offset(f), width)
    message = model.Message(tuple(headers), spec.message_bytes, type_field, tuple(spec.message_types))
    fields = {q.qname: _field(q) for q in spec.query_fields.values()}
    return model.Application(spec.name, spec.udp_port, spec.framing,
                             _header(spec.packet_header) if spec.packet_header else None, message,
                             fields, tuple(stages), leaf_table(spec), group_id(spec.name),
                             tuple(lanes), state(spec))


def _message_field(spec: Spec, qname: str | None) -> model.Field | None:
    if qname is None:
        return None
    width = next(f.width for h in spec.message_headers for f in h.fields if f.qname == qname)
    return model.Field(qname, spec.message_offset(qname), width)


def state_ident(name: str) -> str:
    """A state's part of table and register names: its name, `avg_h_f` for `avg(h.f)`."""
    return name.replace("(", "_").replace(")", "").replace(".", "_")


def state(spec: Spec) -> model.State | None:
    """The application's declared state (None when the spec declares none): each state
    with `spec.banks` bind tables and registers, and the decide table."""
    if not spec.state_vars:
        return None
    out = []
    for v in spec.state_vars.values():
        ident = state_ident(v.name)
        banks = range(spec.banks)
        out.append(model.StateVar(v.name, ident, v.kind, v.unit, _message_field(spec, v.field),
                                  _message_field(spec, v.key), v.window_us, v.slots, v.buckets,
                                  tuple(f"{spec.name}_{ident}_b{b}" for b in banks),
                                  tuple(f"{spec.name}_{ident}_r{b}" for b in banks)))
    ts = None
    if spec.timestamp is not None:
        ts = model.Timestamp(_message_field(spec, spec.timestamp[0]), spec.timestamp[1])
    return model.State(tuple(out), f"{spec.name}_state_decide", ts)


def pipeline(apps: list[model.Application], state_width: int = STATIC_STATE_BITS,
             ports_width: int = model.MAX_PORTS_WIDTH) -> model.Pipeline:
    """The pipeline of these applications; PipelineError if two share a UDP port or a group.

    The widths default to a static pipeline's (any rule set fits it); a compile sized to its
    rules passes the state width its states need and one bitmap bit per port up to the
    highest it names."""
    return model.Pipeline.of(state_width, apps, ports_width=ports_width)
