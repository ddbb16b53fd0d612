"""INGRESS and EGRESS of the generated program: the stage walk, MoldUDP64 passes, rewrites.

Ingress checks the frame the way switch/reference.py does (drops malformed and truncated
IPv4/UDP), then runs the application its UDP port selects. A message walks the stages in IR
order: each stage looks up `(meta.state, field)` and, on a miss, `(meta.state)` in its
default table; `fwd` and `mcast` set `meta.decided`, which guards every later stage and the
leaf. `mcast(ports)` multicasts through the application's one group and leaves its port
bitmap in `meta.ports`; egress drops each copy whose port's bit is clear (port-bitmap egress
pruning). Traffic that no rule selected goes to `ipv4_lpm` unchanged.

MoldUDP64 applications evaluate one subscription message per pass and prune each copy in
egress (`compiler.p4.moldudp64_pruning`). Egress rewrites the UDP port of every subscription copy
(`egress_udp_rewrite`), zeroes its UDP checksum and truncates it to its length.
"""

from __future__ import annotations

from compiler.p4 import fabric as fabric_egress, moldudp64_pruning, state
from compiler.p4.blocks import IHL, copy_lengths, egress_port_bit, indent, port_bit, table, walk
from compiler.p4.layout import AppLayout
from pipeline.model import Pipeline


def ingress(pipeline: Pipeline, apps: list[AppLayout], fabric: bool = False) -> str:
    key = ("meta.state", "exact", "state")
    acts = {name: t.actions for name, t in pipeline.tables.items()}  # with `stateful` where state is
    tables = []
    for a in apps:
        for lane in a.lanes:
            for st in lane.stages:
                f = a.fields[st.field.name]
                tables.append(table(st.table, [key, (a.key_expr(f), st.match_kind, f.qname)],
                                     acts[st.table]))
                tables.append(table(st.default_table, [key], acts[st.default_table]))
            tables.append(table(lane.leaf_table, [key], acts[lane.leaf_table]))
        tables += [table(name, keys, actions) for name, keys, actions in state.tables(pipeline, a)]
    tables.append(table(pipeline.ipv4_table, [("hdr.ipv4.dst_addr", "lpm", "ipv4.dst_addr")],
                         ("fwd", "drop")))
    if fabric:
        tables += [table(name, keys, acts) for name, keys, acts in fabric_egress.table_keys()]
    # set_state is declared only where a stage table lists it: p4c warns about an unused
    # action (a pipeline without stages: every rule true or false, the leaf decides).
    staged = any(lane.stages for a in apps for lane in a.lanes)
    actions = """\
    action drop() {
        mark_to_drop(standard_metadata);
    }
""" + ("""\
    action set_state(bit<STATE_WIDTH> state) {
        meta.state = state;
    }
""" if staged else "") + """\
    action fwd(bit<9> port) {
        standard_metadata.egress_spec = port;
        meta.decided = 1;
    }
    action mcast(bit<PORTS_WIDTH> ports) {
        meta.ports = ports;
        meta.multicast = 1;
        meta.decided = 1;
    }
"""
    actions = actions.replace("STATE_WIDTH", str(pipeline.state_width))
    actions = actions.replace("PORTS_WIDTH", str(pipeline.ports_width))
    actions = state.registers(apps) + actions + state.actions(pipeline)
    if fabric:
        actions += fabric_egress.actions()
    body = fabric_egress.ingress_prologue() if fabric else []
    body += [
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
        inner = (_single(a, pipeline.ports_width, fabric) if a.framing == "single"
                 else moldudp64_pruning.ingress(a, pipeline.ports_width, fabric))
        body += indent(inner, 8)
    if apps:
        body.append("    }")
    route = ["    if (meta.handled == 0) {",
             f"        if (!{pipeline.ipv4_table}.apply().hit) {{",
             "            drop();  // no route"]
    if fabric:  # a route by fwd (not drop) to the logical up port takes the chosen up port
        route += ["        } else if (meta.decided == 1) {"] + indent(fabric_egress.unicast(), 12)
    body += route + ["        }", "    }", "}"]
    return ("control CamusIngress(inout headers_t hdr, inout metadata_t meta,\n"
            "                     inout standard_metadata_t standard_metadata) {\n"
            + actions + "\n" + "\n".join(tables) + "\n    apply {\n"
            + "\n".join(indent(body, 8)) + "\n    }\n}\n")


def _single(a: AppLayout, ports_width: int, fabric: bool = False) -> list[str]:
    valid = " && ".join(f"hdr.{a.msg_instance(h.name)}.isValid()" for h in a.headers)
    return ([f"if ({valid} && hdr.udp.length >= {8 + a.message_bytes}) {{"]
            + indent(walk(a, ports_width), 4)
            + ["    if (meta.decided == 1) {",
               "        if (meta.multicast == 1) {",
               "            // Every port the application's rules name; egress keeps the bitmap's.",
               f"            standard_metadata.mcast_grp = {a.app.multicast_group};",
               "            meta.prune = 1;",
               "        }" if not fabric else "        } else {"]
            + (indent(fabric_egress.unicast(), 12) + ["        }"] if fabric else [])
            + indent(copy_lengths(None) + ["meta.rewrite = 1;", "meta.handled = 1;"], 8)
            + ["    }", "}"])


def egress(pipeline: Pipeline, apps: list[AppLayout], fabric: bool = False) -> str:
    tables = [table(pipeline.egress_table,
                    [("standard_metadata.egress_port", "exact", "egress_port"),
                     ("standard_metadata.egress_rid", "exact", "egress_rid")], ("set_udp_port",))]
    body = fabric_egress.egress_prologue() if fabric else []
    body += ["// This copy's port as a one-hot bitmap, for the decisions' bitmaps below."]
    body += egress_port_bit(pipeline.ports_width)
    selects = fabric_egress.selects if fabric else port_bit
    if any(a.framing == "single" for a in apps):
        body += ["if (meta.prune == 1 && !(" + selects("meta.ports") + ")) {",
                 "    mark_to_drop(standard_metadata);  // the decision's bitmap does not select this port",
                 "    meta.rewrite = 0;",
                 "}"]
    for a in apps:
        if a.framing == "moldudp64":
            body += moldudp64_pruning.egress(a, fabric)
    body += ["if (meta.rewrite == 1) {",
             f"    {pipeline.egress_table}.apply();",
             "    hdr.udp.checksum = 0;  // allowed for IPv4; the payload changed",
             "    truncate(meta.frame_len);  // bytes past the kept blocks, Ethernet padding",
             "}"]
    return ("control CamusEgress(inout headers_t hdr, inout metadata_t meta,\n"
            "                    inout standard_metadata_t standard_metadata) {\n"
            "    action set_udp_port(bit<16> port) {\n"
            "        hdr.udp.dst_port = port;\n"
            "    }\n\n" + "\n".join(tables) + "\n"
            "    apply {\n" + "\n".join(indent(body, 8)) + "\n    }\n}\n")
