"""pipeline.json in and out: `from_json` validates a document into the model, `to_json` writes one.

`from_json` checks a document against docs/pipeline-ir.md and raises one `PipelineError`
naming the first problem, so every consumer loads a pipeline identically or refuses it with
the same message. `to_json` is what the compiler writes (`dumps` adds the file's layout):
key order and optional keys are part of the format, because compiled outputs are compared
byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.match_kinds import MATCH_KINDS
from pipeline.model import (
    ACTIONS_IR_VERSION,
    Action,
    Call,
    Param,
    FRAMINGS,
    IR_VERSION,
    IR_VERSIONS,
    STATE_IR_VERSION,
    MAX_FIELD_WIDTH,
    MAX_STATE_WIDTH,
    MOLDUDP64_HEADER_BYTES,
    Application,
    Field,
    Header,
    HeaderField,
    Lane,
    Message,
    Pipeline,
    PipelineError,
    Stage,
    State,
    StateVar,
    Timestamp,
)


# ---- writing -----------------------------------------------------------------------------


def _header_json(h: Header) -> dict:
    d = {"name": h.name, "bits": h.bits,
         "fields": [{"name": f.name, "bit_offset": f.bit_offset, "width": f.width} for f in h.fields]}
    if h.bit_offset is not None:
        d["bit_offset"] = h.bit_offset
    return d


def _stages_json(stages) -> list[dict]:
    return [{"table": s.table, "default_table": s.default_table, "field": s.field.name,
             "match_kind": s.match_kind} for s in stages]


def application_json(app: Application) -> dict:
    msg = app.message
    message = {"headers": [_header_json(h) for h in msg.headers], "bytes": msg.bytes,
               "type_field": msg.type_field.name if msg.type_field else None, "types": list(msg.types)}
    if msg.type_field:
        message["type_field_offset"] = msg.type_field.bit_offset
        message["type_field_width"] = msg.type_field.width
    doc = {
        "name": app.name,
        "udp_port": app.udp_port,
        "framing": app.framing,
        "packet_header": _header_json(app.packet_header) if app.packet_header else None,
        "message": message,
        "fields": {q: {"bit_offset": f.bit_offset, "width": f.width, "declared": f.declared, "ascii": f.ascii}
                   for q, f in app.fields.items()},
        "stages": _stages_json(app.stages),
        "leaf_table": app.leaf_table,
        "multicast_group": app.multicast_group,
    }
    if app.lanes:  # only written when there is more than one lane
        doc["lanes"] = [{"stages": _stages_json(lane.stages), "leaf_table": lane.leaf_table}
                        for lane in app.lanes]
    if app.state is not None:  # IR 4: only written when the spec declares state
        doc["state"] = state_json(app.state)
    if app.actions:  # IR 5: only written when the spec declares actions
        doc["actions"] = [{"name": a.name, "params": [{"name": p.name, "width": p.width}
                                                      for p in a.params]}
                          for a in app.actions]
    if app.default_action is not None:
        doc["default_action"] = {"action": app.default_action.action,
                                 "params": dict(app.default_action.params)}
    return doc


def state_json(st: State) -> dict:
    ts = st.timestamp
    return {
        "ctx_width": st.ctx_width,
        "timestamp": None if ts is None else {"field": ts.field.name, "unit": ts.unit},
        "vars": [{"name": v.name, "ident": v.ident, "kind": v.kind, "unit": v.unit,
                  "field": v.field.name if v.field else None,
                  "key": v.key.name if v.key else None, "window_us": v.window_us,
                  "slots": v.slots, "buckets": v.buckets, "cell_width": v.cell_width,
                  "bind_tables": list(v.bind_tables), "registers": list(v.registers)}
                 for v in st.vars],
        "decide_table": st.decide_table,
        "regions_width": st.regions_width,
    }


def to_json(p: Pipeline) -> dict:
    return {"camus_ir": p.version, "state_width": p.state_width, "ports_width": p.ports_width,
            "applications": [application_json(a) for a in p.applications],
            "ipv4_table": p.ipv4_table, "egress_table": p.egress_table}


def dumps(p: Pipeline) -> str:
    """pipeline.json's text."""
    return json.dumps(to_json(p), indent=2) + "\n"


# ---- reading -----------------------------------------------------------------------------


def _need(doc: Any, key: str, kind: type | tuple, where: str) -> Any:
    if not isinstance(doc, dict) or key not in doc:
        raise PipelineError(f"{where}: missing {key!r}")
    value = doc[key]
    # bool is an int subclass; a JSON true is never a valid number here.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise PipelineError(f"{where}.{key}: expected {kind}, got {type(value).__name__}")
    return value


def _header(h: Any, where: str, placed: bool) -> Header:
    name = _need(h, "name", str, where)
    fields = []
    for f in h.get("fields", []):
        fname = _need(f, "name", str, f"{where}.{name}.fields")
        q = f"{name}.{fname}"
        fields.append(HeaderField(fname, _need(f, "bit_offset", int, q), _need(f, "width", int, q)))
    if "bits" in h or "bytes" not in h:
        bits = _need(h, "bits", int, f"{where}.{name}")
    else:  # the IR example says "bytes"; the compiler writes "bits". Either will do.
        bits = 8 * _need(h, "bytes", int, f"{where}.{name}")
    offset = _need(h, "bit_offset", int, f"{where}.{name}") if placed else None
    return Header(name, bits, tuple(fields), offset)


def _check_field(ref: Field, message_bytes: int, where: str) -> None:
    if not 1 <= ref.width <= MAX_FIELD_WIDTH:
        raise PipelineError(f"{where}: field {ref.name} width {ref.width} not in 1..64")
    if ref.bit_offset < 0 or ref.bit_offset + ref.width > message_bytes * 8:
        raise PipelineError(f"{where}: field {ref.name} lies outside the {message_bytes}-byte message")


def _application(app: Any, index: int) -> Application:
    where = f"applications[{index}]"
    name = _need(app, "name", str, where)
    where = f"application {name!r}"
    udp_port = _need(app, "udp_port", int, where)
    if not 0 <= udp_port <= 0xFFFF:
        raise PipelineError(f"{where}: udp_port {udp_port} out of range")
    framing = app.get("framing", "single")
    if framing not in FRAMINGS:
        raise PipelineError(f"{where}: framing {framing!r} is not one of {FRAMINGS}")
    packet_header = None
    if app.get("packet_header") is not None or framing == "moldudp64":
        packet_header = _header(_need(app, "packet_header", dict, where), f"{where}.packet_header", False)
    if framing == "moldudp64" and packet_header.bits != 8 * MOLDUDP64_HEADER_BYTES:
        raise PipelineError(f"{where}: a MoldUDP64 packet header is 20 bytes, not {packet_header.bits // 8}")
    message = _need(app, "message", dict, where)
    message_bytes = _need(message, "bytes", int, f"{where}.message")
    if message_bytes < 0:
        raise PipelineError(f"{where}: message.bytes is negative")
    headers = tuple(_header(h, f"{where}.message.headers", True) for h in message.get("headers", []))
    # Every field the message declares: from its headers, then the query-field index.
    declared = {f"{h.name}.{f.name}": Field(f"{h.name}.{f.name}", h.bit_offset + f.bit_offset, f.width)
                for h in headers for f in h.fields}
    fields = {}
    for q, f in app.get("fields", {}).items():
        fields[q] = Field(q, _need(f, "bit_offset", int, q), _need(f, "width", int, q),
                          f.get("declared"), f.get("ascii"))
    declared.update(fields)
    type_field = None
    types: tuple[int, ...] = ()
    if message.get("type_field") is not None:
        tname = _need(message, "type_field", str, f"{where}.message")
        if tname not in declared:
            raise PipelineError(f"{where}: type_field {tname!r} is not a message field")
        type_field = Field(tname, declared[tname].bit_offset, declared[tname].width)
        _check_field(type_field, message_bytes, where)
        types = tuple(_need(message, "types", list, f"{where}.message"))
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in types):
            raise PipelineError(f"{where}: message.types must be integers")
    stages = _stages(_need(app, "stages", list, where), declared, message_bytes, where)
    lanes = []
    for k, lane in enumerate(_need(app, "lanes", list, where) if "lanes" in app else [],
                               start=1):
        lwhere = f"{where}.lanes[{k - 1}]"
        lanes.append(Lane(_stages(_need(lane, "stages", list, lwhere), declared, message_bytes,
                                  lwhere), _need(lane, "leaf_table", str, lwhere)))
    state = None
    if app.get("state") is not None:
        state = _state(app["state"], declared, message_bytes, f"{where}.state")
    actions = []
    for i, a in enumerate(_need(app, "actions", list, where) if "actions" in app else []):
        awhere = f"{where}.actions[{i}]"
        params = tuple(Param(_need(p, "name", str, f"{awhere}.params"),
                             _need(p, "width", int, f"{awhere}.params"))
                       for p in _need(a, "params", list, awhere))
        actions.append(Action(_need(a, "name", str, awhere), params))
    default = None
    if app.get("default_action") is not None:
        d = _need(app, "default_action", dict, where)
        dwhere = f"{where}.default_action"
        params = _need(d, "params", dict, dwhere) if "params" in d else {}
        default = Call(_need(d, "action", str, dwhere),
                       tuple((k, _need(params, k, int, dwhere)) for k in params))
    return Application(name, udp_port, framing, packet_header,
                       Message(headers, message_bytes, type_field, types), fields, stages,
                       _need(app, "leaf_table", str, where), _need(app, "multicast_group", int, where),
                       tuple(lanes), state, tuple(actions), default)


def _state(doc: Any, declared: dict[str, Field], message_bytes: int, where: str) -> State:
    """An application's "state" (IR 4), its fields resolved among the message's fields.
    Pipeline.of checks the rest (kinds, widths, banks, names)."""

    def field_of(name: Any, what: str) -> Field | None:
        if name is None:
            return None
        if not isinstance(name, str) or name not in declared:
            raise PipelineError(f"{what}: {name!r} is not a message field")
        _check_field(declared[name], message_bytes, what)
        return declared[name]

    ts = None
    if isinstance(doc, dict) and doc.get("timestamp") is not None:
        t = _need(doc, "timestamp", dict, where)
        ts = Timestamp(field_of(_need(t, "field", str, f"{where}.timestamp"),
                                f"{where}.timestamp"), _need(t, "unit", str, f"{where}.timestamp"))
    out = []
    for i, v in enumerate(_need(doc, "vars", list, where)):
        w = f"{where}.vars[{i}]"
        kind = _need(v, "kind", str, w)
        unit = v.get("unit")
        if unit is not None and not isinstance(unit, str):
            raise PipelineError(f"{w}.unit: expected a string or null")
        binds = _need(v, "bind_tables", list, w)
        regs = _need(v, "registers", list, w)
        if not all(isinstance(x, str) for x in binds + regs):
            raise PipelineError(f"{w}: bind_tables and registers are lists of names")
        var = StateVar(_need(v, "name", str, w), _need(v, "ident", str, w), kind, unit,
                       field_of(v.get("field"), f"{w}.field"), field_of(v.get("key"), f"{w}.key"),
                       _need(v, "window_us", int, w), _need(v, "slots", int, w),
                       _need(v, "buckets", int, w), tuple(binds), tuple(regs))
        if "cell_width" in v and v["cell_width"] != var.cell_width:
            raise PipelineError(f"{w}: cell_width of a {kind} is {var.cell_width}")
        out.append(var)
    st = State(tuple(out), _need(doc, "decide_table", str, where), ts,
               _need(doc, "ctx_width", int, where))
    if "regions_width" in doc and doc["regions_width"] != st.regions_width:
        raise PipelineError(f"{where}: regions_width is {st.regions_width} "
                            f"({st.banks} banks of 4 bits)")
    return st


def _stages(docs: list, declared: dict[str, Field], message_bytes: int,
            where: str) -> tuple[Stage, ...]:
    stages = []
    for i, s in enumerate(docs):
        swhere = f"{where}.stages[{i}]"
        fname = _need(s, "field", str, swhere)
        if fname not in declared:
            raise PipelineError(f"{swhere}: field {fname!r} is not a message field")
        kind = _need(s, "match_kind", str, swhere)
        if kind not in MATCH_KINDS:
            raise PipelineError(f"{swhere}: match_kind {kind!r} is not one of {tuple(MATCH_KINDS)}")
        _check_field(declared[fname], message_bytes, swhere)
        stages.append(Stage(_need(s, "table", str, swhere), _need(s, "default_table", str, swhere),
                            declared[fname], kind))
    return tuple(stages)


def from_json(doc: Any) -> Pipeline:
    """Validate a pipeline.json document; raise PipelineError naming the first problem."""
    if not isinstance(doc, dict):
        raise PipelineError("pipeline.json must be a JSON object")
    version = doc.get("camus_ir")
    if version not in IR_VERSIONS:
        raise PipelineError(f"camus_ir {version!r} is not supported (this camus reads "
                            f"{IR_VERSION}, {STATE_IR_VERSION} with state, {ACTIONS_IR_VERSION} "
                            f"with actions beyond fwd; recompile the "
                            f"rules with this camus to get a pipeline.json it reads)")
    state_width = _need(doc, "state_width", int, "pipeline")
    if not 1 <= state_width <= MAX_STATE_WIDTH:
        raise PipelineError(f"state_width {state_width} not in 1..{MAX_STATE_WIDTH}")
    apps = [_application(a, i) for i, a in enumerate(_need(doc, "applications", list, "pipeline"))]
    p = Pipeline.of(state_width, apps, _need(doc, "ipv4_table", str, "pipeline"),
                    _need(doc, "egress_table", str, "pipeline"),
                    _need(doc, "ports_width", int, "pipeline"))
    if p.version != version:
        raise PipelineError(f"camus_ir {version} does not match the document: a pipeline with "
                            f"actions beyond fwd or DNS framing is version "
                            f"{ACTIONS_IR_VERSION}, one with state {STATE_IR_VERSION}, other "
                            f"ones {IR_VERSION}")
    return p
