"""The pipeline IR (pipeline.json) and a table interpreter for it.

`pipeline()` describes the data plane an application needs: where its messages are, where
each query field sits, the ordered stages with their match kinds. docs/pipeline-ir.md is the
reference for the format. `Tables` executes entries.json on a message's field values the
way any target must: it is what `camus eval` runs, so that anyone can check compiled tables
against the rules from outside, and the pure-Python model the software switch is tested
against.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from compiler.spec import Header, QueryField, Spec
from compiler.tables import STATE_BITS, Stage

IR_VERSION = 1
ENTRIES_VERSION = 1
IPV4_TABLE = "ipv4_lpm"
EGRESS_TABLE = "egress_udp_rewrite"


def stages_for(spec: Spec, order, kinds: dict[str, str]) -> list[Stage]:
    names = [q.name for q in spec.query_fields.values()]
    out = []
    for q in order:
        base = q.name if names.count(q.name) == 1 else q.qname.replace(".", "_")
        table = f"{spec.name}_{base}"
        out.append(Stage(q.qname, kinds[q.qname], table, f"{table}_default", q.width))
    return out


def leaf_table(spec: Spec) -> str:
    return f"{spec.name}_leaf"


def _header(h: Header, bit_offset: int | None = None) -> dict:
    d = {"name": h.name, "bits": h.bits,
         "fields": [{"name": f.name, "bit_offset": f.bit_offset, "width": f.width}
                    for f in h.fields]}
    if bit_offset is not None:
        d["bit_offset"] = bit_offset
    return d


def application(spec: Spec, stages: list[Stage]) -> dict:
    headers, offset = [], 0
    for h in spec.message_headers:
        headers.append(_header(h, offset))
        offset += h.bits
    app = {
        "name": spec.name,
        "udp_port": spec.udp_port,
        "framing": spec.framing,
        "packet_header": _header(spec.packet_header) if spec.packet_header else None,
        "message": {
            "headers": headers,
            "bytes": spec.message_bytes,
            "type_field": spec.message_type_field,
            "types": list(spec.message_types),
        },
        "fields": {q.qname: {"bit_offset": q.bit_offset, "width": q.width, "declared": q.kind,
                             "ascii": q.ascii} for q in spec.query_fields.values()},
        "stages": [{"table": s.table, "default_table": s.default_table, "field": s.field,
                    "match_kind": s.match_kind} for s in stages],
        "leaf_table": leaf_table(spec),
    }
    if spec.message_type_field:
        f = spec.message_type_field
        app["message"]["type_field_offset"] = spec.message_offset(f)
        app["message"]["type_field_width"] = next(
            x.width for h in spec.message_headers for x in h.fields if x.qname == f)
    return app


def pipeline(apps: list[dict]) -> dict:
    ports = [a["udp_port"] for a in apps]
    if len(set(ports)) != len(ports):
        raise ValueError(f"two applications share a UDP port: {ports}")
    return {"camus_ir": IR_VERSION, "state_width": STATE_BITS, "applications": apps,
            "ipv4_table": IPV4_TABLE, "egress_table": EGRESS_TABLE}


@dataclass
class _Stage:
    field: str
    kind: str
    exact: dict = field(default_factory=dict)  # (state, value) -> result
    ranges: dict = field(default_factory=dict)  # state -> sorted [(lo, hi, prio, result)]
    prefixes: dict = field(default_factory=dict)  # state -> [(value, plen, result)]
    width: int = 0
    default: dict = field(default_factory=dict)  # state -> result


class Tables:
    """Executes one application's stage and leaf tables on field values."""

    def __init__(self, app: dict, entries: dict):
        self.app = app
        by_table: dict[str, _Stage] = {}
        self.stages: list[_Stage] = []
        for st in app["stages"]:
            s = _Stage(st["field"], st["match_kind"], width=app["fields"][st["field"]]["width"])
            by_table[st["table"]] = s
            by_table[st["default_table"]] = s
            self.stages.append(s)
        defaults = {st["default_table"] for st in app["stages"]}
        self.leaf: dict[int, frozenset[int]] = {}
        groups = {g["id"]: frozenset(r["port"] for r in g["replicas"])
                  for g in entries.get("multicast_groups", [])}
        for e in entries["table_entries"]:
            t = e["table"]
            state = e["match"]["state"]["exact"]
            p = e["params"]
            # A stage's result is ("state", next) or ("ports", port set): the latter ends the walk.
            if e["action"] == "set_state":
                result = ("state", p["state"])
            elif e["action"] == "fwd":
                result = ("ports", frozenset([p["port"]]))
            elif e["action"] == "mcast":
                result = ("ports", groups[p["group"]])
            else:
                raise ValueError(f"unknown action {e['action']!r} in {t}")
            if t == app["leaf_table"]:
                self.leaf[state] = result[1]
                continue
            s = by_table.get(t)
            if s is None:
                continue
            if t in defaults:
                s.default[state] = result
                continue
            key = e["match"][s.field]
            if "exact" in key:
                s.exact[(state, key["exact"])] = result
            elif "range" in key:
                lo, hi = key["range"]
                s.ranges.setdefault(state, []).append((lo, hi, e.get("priority", 0), result))
            elif "lpm" in key:
                value, plen = key["lpm"]
                s.prefixes.setdefault(state, []).append((value, plen, result))
            else:
                raise ValueError(f"unsupported match {key}")
        for s in self.stages:
            for lst in s.ranges.values():
                lst.sort()
            for lst in s.prefixes.values():
                lst.sort(key=lambda x: -x[1])

    def ports(self, values: dict[str, int]) -> frozenset[int]:
        state = 0
        for s in self.stages:
            kind, result = self._step(s, state, values[s.field])
            if kind == "ports":
                return result
            state = result
        return self.leaf.get(state, frozenset())

    @staticmethod
    def _step(s: _Stage, state: int, v: int) -> tuple[str, object]:
        if s.kind == "exact":
            hit = s.exact.get((state, v))
            if hit is not None:
                return hit
        elif s.kind == "range":
            lst = s.ranges.get(state)
            if lst:
                # Range entries never overlap within one state (the IR promises it).
                i = bisect.bisect_right(lst, (v, 1 << 64))
                if i and lst[i - 1][0] <= v <= lst[i - 1][1]:
                    return lst[i - 1][3]
        elif s.kind == "lpm":
            for value, plen, hit in s.prefixes.get(state, ()):
                shift = s.width - plen
                if (v >> shift) == (value >> shift):
                    return hit
        return s.default.get(state, ("state", state))


def query_fields(app: dict) -> dict[str, QueryField]:
    return {q: QueryField(q, f["width"], f["bit_offset"], f["declared"], f["ascii"])
            for q, f in app["fields"].items()}


def message_values(app: dict, message: dict) -> dict[str, int] | None:
    """Field values from a JSON message (`camus eval`'s input), or None if the message's
    type is not a subscription message type.

    Keys are `header.field` or a bare unique field name; values are integers or strings
    (space-padded ASCII). A field the message does not give takes its default. The message
    type field is checked only when the message gives it. Declared fields that are not query
    fields (a whole message's other fields) are checked to fit their width and ignored.
    """
    fields = query_fields(app)
    by_name: dict[str, list[str]] = {}
    for q in fields:
        by_name.setdefault(q.split(".", 1)[1], []).append(q)
    values = {q: f.default for q, f in fields.items()}
    others = _other_fields(app, fields)  # given by whole messages: accepted, ignored
    msg = app["message"]
    for key, raw in message.items():
        if key == msg.get("type_field") or (msg.get("type_field") or "").endswith("." + key):
            width = msg["type_field_width"]
            v = raw.encode("ascii") if isinstance(raw, str) else raw
            if isinstance(v, bytes):
                v = int.from_bytes(v, "big") if len(v) * 8 == width else -1
            if v not in msg["types"]:
                return None
            if msg["type_field"] not in fields:
                continue
            key = msg["type_field"]  # rules test it too: its value counts like any field's
        q = key if key in fields else None
        if q is None:
            names = by_name.get(key, [])
            if not names and key in others:
                others[key].encode(raw)  # a declared field no rule can test: checked, unused
                continue
            if len(names) != 1:
                raise ValueError(f"unknown field {key!r}" if not names
                                 else f"ambiguous field {key!r}: {', '.join(names)}")
            q = names[0]
        values[q] = fields[q].encode(raw)
    return values


def _other_fields(app: dict, fields: dict[str, QueryField]) -> dict[str, QueryField]:
    """The declared message and packet-header fields that are not query fields, by
    `header.field` and by bare name when that is unique among them."""
    declared = [(h["name"], f) for h in app["message"]["headers"] for f in h["fields"]]
    if app.get("packet_header"):
        declared += [(app["packet_header"]["name"], f) for f in app["packet_header"]["fields"]]
    out: dict[str, QueryField] = {}
    bare: dict[str, list[QueryField]] = {}
    for header, f in declared:
        qname = f"{header}.{f['name']}"
        if qname in fields:
            continue
        out[qname] = QueryField(qname, f["width"], f["bit_offset"], "range")
        bare.setdefault(f["name"], []).append(out[qname])
    out.update((name, qs[0]) for name, qs in bare.items() if len(qs) == 1 and name not in out)
    return out
