"""INGRESS and EGRESS of the generated program: the stage walk, MoldUDP64 passes, rewrites.

Ingress checks the frame the way switch/reference.py does (drops malformed and truncated
IPv4/UDP), then runs the application its UDP port selects. A message walks the stages in IR
order: each stage looks up `(meta.state, field)` and, on a miss, `(meta.state)` in its
default table; `fwd` and `mcast` set `meta.decided`, which guards every later stage and the
leaf. Traffic that no rule selected goes to `ipv4_lpm` unchanged.

MoldUDP64 applications evaluate one subscription message per pass and prune each copy in
egress (`compiler.p4.moldudp64_pruning`). Egress rewrites the UDP port of every subscription copy
(`egress_udp_rewrite`), zeroes its UDP checksum and truncates it to its length.
"""

from __future__ import annotations

from compiler.p4 import moldudp64_pruning
from compiler.p4.blocks import IHL, STAGE_ACTIONS, copy_lengths, indent, table, walk
from compiler.p4.layout import AppLayout
from p4rt.names import MEMBER_ACTION
from pipeline.model import Pipeline


def ingress(pipeline: Pipeline, apps: list[AppLayout]) -> str:
    state = ("meta.state", "exact", "state")
    tables = []
    for a in apps:
        for st in a.stages:
            f = a.fields[st.field.name]
            tables.append(table(st.table, [state, (a.key_expr(f), st.match_kind, f.qname)],
                                 STAGE_ACTIONS))
            tables.append(table(st.default_table, [state], STAGE_ACTIONS))
        tables.append(table(a.leaf_table, [state], ("fwd", "mcast")))
    tables.append(table(pipeline.ipv4_table, [("hdr.ipv4.dst_addr", "lpm", "ipv4.dst_addr")],
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
    actions = actions.replace("STATE_WIDTH", str(pipeline.state_width))
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
        inner = _single(a) if a.framing == "single" else moldudp64_pruning.ingress(a)
        body += indent(inner, 8)
    if apps:
        body.append("    }")
    body += [
        "    if (meta.handled == 0) {",
        f"        if (!{pipeline.ipv4_table}.apply().hit) {{",
        "            drop();  // no route",
        "        }",
        "    }",
        "}",
    ]
    return ("control CamusIngress(inout headers_t hdr, inout metadata_t meta,\n"
            "                     inout standard_metadata_t standard_metadata) {\n"
            + actions + "\n" + "\n".join(tables) + "\n    apply {\n"
            + "\n".join(indent(body, 8)) + "\n    }\n}\n")


def _single(a: AppLayout) -> list[str]:
    valid = " && ".join(f"hdr.{a.msg_instance(h.name)}.isValid()" for h in a.headers)
    return ([f"if ({valid} && hdr.udp.length >= {8 + a.message_bytes}) {{"]
            + indent(walk(a), 4)
            + ["    if (meta.decided == 1) {"]
            + indent(copy_lengths(None) + ["meta.rewrite = 1;", "meta.handled = 1;"], 8)
            + ["    }", "}"])


def egress(pipeline: Pipeline, apps: list[AppLayout]) -> str:
    tables = [table(pipeline.egress_table,
                    [("standard_metadata.egress_port", "exact", "egress_port"),
                     ("standard_metadata.egress_rid", "exact", "egress_rid")], ("set_udp_port",))]
    body = []
    for a in apps:
        if a.framing == "moldudp64":
            tables += moldudp64_pruning.egress_tables(a)
            body += moldudp64_pruning.egress(a)
    member = ""
    if len(tables) > 1:  # declared only with the membership tables (p4c lists every action in P4Info)
        member = (f"    action {MEMBER_ACTION}() {{\n"
                  "        // Nothing to do: the membership tables answer by hitting.\n"
                  "    }\n")
    body += ["if (meta.rewrite == 1) {",
             f"    {pipeline.egress_table}.apply();",
             "    hdr.udp.checksum = 0;  // allowed for IPv4; the payload changed",
             "    truncate(meta.frame_len);  // bytes past the kept blocks, Ethernet padding",
             "}"]
    return ("control CamusEgress(inout headers_t hdr, inout metadata_t meta,\n"
            "                    inout standard_metadata_t standard_metadata) {\n"
            "    action set_udp_port(bit<16> port) {\n"
            "        hdr.udp.dst_port = port;\n"
            "    }\n" + member + "\n" + "\n".join(tables) + "\n"
            "    apply {\n" + "\n".join(indent(body, 8)) + "\n    }\n}\n")
