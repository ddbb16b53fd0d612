"""INGRESS and EGRESS of the generated program: the stage walk, MoldUDP64 passes, rewrites.

Ingress checks the frame the way switch/reference.py does (drops malformed and truncated
IPv4/UDP), then runs the application its UDP port selects. A message walks the stages in IR
order: each stage looks up `(meta.state, field)` and, on a miss, `(meta.state)` in its
default table; `fwd` and `mcast` set `meta.decided`, which guards every later stage and the
leaf. Traffic that no rule selected goes to `ipv4_lpm` unchanged.

MoldUDP64 applications evaluate one subscription message per pass and resubmit the packet
with the next block index and what was decided so far (`@field_list(1)` metadata). The last pass
sends the packet to the first decision's port or group, keeping only the blocks that
decision selected. docs/p4.md explains why only one decision per packet can be honoured
with the IR's entries alone, and what that costs.
"""

from __future__ import annotations

from compiler.p4.layout import AppLayout
from compiler.p4.names import TABLE_SIZE

STAGE_ACTIONS = ("set_state", "fwd", "mcast")
IHL = "(((bit<16>)hdr.ipv4.ihl) << 2)"  # IPv4 header bytes, options included
NO_SLOT = 255  # "no message evaluated in this pass"; slots are at most 32


def _table(name: str, keys: list[tuple[str, str, str]], actions: tuple[str, ...]) -> str:
    key = "".join(f"            {e} : {kind} @name(\"{n}\");\n" for e, kind, n in keys)
    acts = "".join(f"            {a};\n" for a in actions)
    return (f"    table {name} {{\n"
            f"        key = {{\n{key}        }}\n"
            f"        actions = {{\n{acts}            @defaultonly NoAction;\n        }}\n"
            f"        default_action = NoAction();\n"
            f"        size = {TABLE_SIZE};\n"
            f"    }}\n")


def _indent(lines: list[str], n: int) -> list[str]:
    return [(" " * n + ln) if ln else ln for ln in lines]


def ingress(pipeline: dict, apps: list[AppLayout]) -> str:
    state = ("meta.state", "exact", "state")
    tables = []
    for a in apps:
        for st in a.stages:
            f = a.fields[st["field"]]
            tables.append(_table(st["table"], [state, (a.key_expr(f), st["match_kind"], f.qname)],
                                 STAGE_ACTIONS))
            tables.append(_table(st["default_table"], [state], STAGE_ACTIONS))
        tables.append(_table(a.leaf_table, [state], ("fwd", "mcast")))
    tables.append(_table(pipeline["ipv4_table"], [("hdr.ipv4.dst_addr", "lpm", "ipv4.dst_addr")],
                         ("fwd", "drop")))
    actions = """\
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_state(bit<STATE_WIDTH> state) {
        meta.state = state;
    }
    action fwd(bit<9> port) {
        standard_metadata.egress_spec = port;
        meta.decided = 1;
    }
    action mcast(bit<16> group) {
        standard_metadata.mcast_grp = group;
        meta.decided = 1;
    }
"""
    actions = actions.replace("STATE_WIDTH", str(pipeline["state_width"]))
    body = [
        "if (!hdr.ipv4.isValid()) {",
        "    drop();  // not IPv4 (no route), or too short for an IPv4 header",
        "} else if (hdr.ipv4.version != 4 || hdr.ipv4.ihl < 5",
        "           || hdr.ipv4.total_len < ((bit<16>)hdr.ipv4.ihl) << 2",
        "           || standard_metadata.packet_length < 14 + (bit<32>)hdr.ipv4.total_len) {",
        "    drop();  // malformed, or truncated before the end of the IPv4 datagram",
        f"}} else if (hdr.udp.isValid() && (hdr.ipv4.total_len < {IHL} + 8 || hdr.udp.length < 8",
        f"           || hdr.udp.length > hdr.ipv4.total_len - {IHL})) {{",
        "    drop();  // a UDP header or datagram that does not fit the IPv4 datagram",
        "} else {",
    ]
    first = True
    for a in apps:
        cond = f"hdr.udp.isValid() && hdr.udp.dst_port == {a.port}"
        body.append(f"    {'if' if first else '} else if'} ({cond}) {{")
        first = False
        inner = _single(a) if a.framing == "single" else _mold(a)
        body += _indent(inner, 8)
    if apps:
        body.append("    }")
    body += [
        "    if (meta.handled == 0) {",
        f"        if (!{pipeline['ipv4_table']}.apply().hit) {{",
        "            drop();  // no route",
        "        }",
        "    }",
        "}",
    ]
    return ("control CamusIngress(inout headers_t hdr, inout metadata_t meta,\n"
            "                     inout standard_metadata_t standard_metadata) {\n"
            + actions + "\n" + "\n".join(tables) + "\n    apply {\n"
            + "\n".join(_indent(body, 8)) + "\n    }\n}\n")


def _walk(a: AppLayout) -> list[str]:
    out = []
    for st in a.stages:
        out += ["if (meta.decided == 0) {",
                f"    if (!{st['table']}.apply().hit) {{",
                f"        {st['default_table']}.apply();",
                "    }",
                "}"]
    return out + ["if (meta.decided == 0) {", f"    {a.leaf_table}.apply();", "}"]


def _copy_lengths(udp_payload: str | None) -> list[str]:
    """A subscription copy: IPv4/UDP lengths from its UDP payload (None: unchanged), its frame
    length for truncation. The IPv4 length follows the UDP one, as the software switch
    rebuilds the frame from the UDP datagram alone."""
    udp = [] if udp_payload is None else [f"hdr.udp.length = {udp_payload} + 8;"]
    return udp + [f"hdr.ipv4.total_len = hdr.udp.length + {IHL};",
            "meta.frame_len = 14 + (bit<32>)hdr.ipv4.total_len;",
            "meta.rewrite = 1;",
            "meta.handled = 1;"]


def _single(a: AppLayout) -> list[str]:
    valid = " && ".join(f"hdr.{a.msg_instance(h['name'])}.isValid()" for h in a.headers)
    return ([f"if ({valid} && hdr.udp.length >= {8 + a.message_bytes}) {{"]
            + _indent(_walk(a), 4)
            + ["    if (meta.decided == 1) {"]
            + _indent(_copy_lengths(None), 8)
            + ["    }", "}"])


def _mold(a: AppLayout) -> list[str]:
    m = {x: f"meta.{a.meta(x)}" for x in ("index", "kind", "target", "keep", "bytes")}
    valid = {s: " && ".join(f"hdr.{a.msg_instance(h['name'], s)}.isValid()" for h in a.headers)
             for s in range(a.slots)}
    out = [
        "if (hdr.udp.length < 28 || standard_metadata.parser_error == error.PacketTooShort",
        f"    || (bit<32>)hdr.udp.length < 28 + {m['bytes']}) {{",
        "    drop();  // the MoldUDP64 header or a block runs past the UDP payload",
        "    meta.handled = 1;  // and not routed either",
        "} else {",
        f"    // This pass evaluates the first subscription message at or after block {m['index']}.",
        f"    bit<8> slot = {NO_SLOT};",
    ]
    for s in range(a.slots):
        lead = "if" if s == 0 else "} else if"
        reached = f"{m['index']} == 0" if s == 0 else f"{m['index']} <= {s}"
        out.append(f"    {lead} ({reached} && {valid[s]}) {{")
        out.append(f"        slot = {s};")
        out += [f"        {a.key_expr(f)} = {a.field_ref(f, s)};" for f in a.fields.values()]
    out.append("    }")
    out.append(f"    if (slot != {NO_SLOT}) {{")
    out += _indent(_walk(a), 8)
    out += [
        "        if (meta.decided == 1) {",
        "            bit<2> kind = 1;",
        "            bit<16> target = (bit<16>)standard_metadata.egress_spec;",
        "            if (standard_metadata.mcast_grp != 0) {",
        "                kind = 2;",
        "                target = standard_metadata.mcast_grp;",
        "            }",
        f"            if ({m['kind']} == 0) {{",
        f"                {m['kind']} = kind;",
        f"                {m['target']} = target;",
        "            }",
        "            // A block decided differently from the first decision is lost (docs/p4.md).",
        f"            if ({m['kind']} == kind && {m['target']} == target) {{",
        f"                {m['keep']} = {m['keep']} | ((bit<32>)1 << slot);",
        "            }",
        "        }",
        "    }",
        "    // Another pass only if a subscription message follows this one.",
        "    bool more = false;",
    ]
    for s in range(1, a.slots):
        out += [f"    if (slot < {s} && {valid[s]}) {{", "        more = true;", "    }"]
    out += [
        "    if (more) {",
        f"        {m['index']} = slot + 1;",
        "        meta.handled = 1;",
        "        resubmit_preserving_field_list(1);",
        f"    }} else if ({m['kind']} != 0) {{",
        f"        if ({m['kind']} == 1) {{",
        f"            standard_metadata.egress_spec = (bit<9>){m['target']};",
        "            standard_metadata.mcast_grp = 0;",
        "        } else {",
        f"            standard_metadata.mcast_grp = {m['target']};",
        "        }",
    ]
    out += _indent(_prune(a, m), 8)
    out += ["    }", "}"]
    return out


def _prune(a: AppLayout, m: dict[str, str]) -> list[str]:
    """Keep the selected blocks: zero-length placeholders between them, nothing around them."""
    out = ["bit<8> first = 0;", "bit<8> last = 0;", "bool seen = false;"]
    for s in range(a.slots):
        out += [f"if ({m['keep']}[{s}:{s}] == 1) {{",
                "    if (!seen) {", f"        first = {s};", "        seen = true;", "    }",
                f"    last = {s};", "}"]
    payload = "payload"
    out.append("bit<16> payload = 20;")
    for s in range(a.slots):
        body = [f"hdr.{x}.setInvalid();" for x in a.slot_instances(s)[1:]]
        length = f"hdr.{a.len_instance(s)}"
        out += [f"if ({s} < first || {s} > last) {{", f"    {length}.setInvalid();"]
        out += _indent(body, 4)
        out += [f"}} else if ({m['keep']}[{s}:{s}] == 0) {{", f"    {length}.length = 0;"]
        out += _indent(body, 4)
        out += ["}", f"if ({length}.isValid()) {{",
                f"    {payload} = {payload} + 2 + {length}.length;", "}"]
    out += [f"hdr.{a.mold}.{a.mold_field(1)} = hdr.{a.mold}.{a.mold_field(1)} + (bit<64>)first;",
            f"hdr.{a.mold}.{a.mold_field(2)} = (bit<16>)(last - first + 1);"]
    return out + _copy_lengths(payload)


def egress(pipeline: dict) -> str:
    table = _table(pipeline["egress_table"],
                   [("standard_metadata.egress_port", "exact", "egress_port"),
                    ("standard_metadata.egress_rid", "exact", "egress_rid")], ("set_udp_port",))
    return ("control CamusEgress(inout headers_t hdr, inout metadata_t meta,\n"
            "                    inout standard_metadata_t standard_metadata) {\n"
            "    action set_udp_port(bit<16> port) {\n"
            "        hdr.udp.dst_port = port;\n"
            "    }\n\n" + table + "\n"
            "    apply {\n"
            "        if (meta.rewrite == 1) {\n"
            f"            {pipeline['egress_table']}.apply();\n"
            "            hdr.udp.checksum = 0;  // allowed for IPv4; the payload changed\n"
            "            truncate(meta.frame_len);  // bytes past the kept blocks, Ethernet padding\n"
            "        }\n"
            "    }\n}\n")
