"""MoldUDP64 in the generated program: one message per ingress pass, one pruned copy per replica.

Ingress (`ingress`) evaluates the first subscription message at or after block
`<app>_index`, records its decision for its slot as a port bitmap (a `fwd(p)` decision is
bit p, an `mcast(ports)` decision its bitmap), and resubmits while another subscription
message follows; the `@field_list(1)` metadata carries the index and the decisions across
passes. The last pass sends the packet on:

* every decision `fwd` to one and the same port (the common case, and every one-message
  packet decided by fwd): to that port, with the decided blocks as the keep mask;
* otherwise (an `mcast` decision, or decisions that differ): to the application's
  multicast group, which reaches every port its rules name (entries.json's one group), since
  v1model has no group for a union of port sets computed per packet.

Egress (`egress`) then works per copy: for a multicast packet it keeps block i iff bit
`egress_port` of slot i's bitmap is set (and, for a fwd decision, the replica is
`(port, 0)`), and drops a copy that keeps nothing: port-bitmap egress pruning, so no entry
beyond entries.json is needed; every copy is then pruned the way docs/pipeline-ir.md
("Message semantics") says.
"""

from __future__ import annotations

from compiler.p4 import fabric as fabric_egress, state
from compiler.p4.blocks import copy_lengths, indent, one_hot, port_bit, walk
from compiler.p4.layout import AppLayout

NO_SLOT = 255  # "no message evaluated in this pass"; slots are at most 32


def metadata(a: AppLayout, ports_width: int) -> list[tuple[str, str, bool, str]]:
    """(type, field, kept across resubmission, comment) of an application's metadata."""
    out = [("bit<16>", a.meta("left"), False, "blocks the header announces and the parser has not read"),
           ("bit<32>", a.meta("bytes"), False, "bytes of the blocks parsed"),
           ("bit<8>", a.meta("index"), True, "the next pass evaluates from this block on"),
           ("bit<2>", a.meta("kind"), True, "0 nothing decided yet, 1 every decision fwd, 2 some mcast"),
           ("bit<16>", a.meta("target"), True, "the first fwd decision's port"),
           ("bit<1>", a.meta("mixed"), True, "some decision differs from the first"),
           ("bit<32>", a.meta("keep"), True, "bit i: block i goes into the copy")]
    for s in range(a.slots):
        out += [("bit<2>", a.meta(f"dkind_{s}"), True, f"block {s}'s decision, as kind (1 fwd, 2 mcast)"),
                (f"bit<{ports_width}>", a.meta(f"dports_{s}"), True, "and its port bitmap")]
    return out + state.mold_metadata(a)


def _m(a: AppLayout) -> dict[str, str]:
    return {x: f"meta.{a.meta(x)}" for x in ("index", "kind", "target", "mixed", "keep", "bytes")}


def _valid(a: AppLayout, s: int) -> str:
    return " && ".join(f"hdr.{a.msg_instance(h.name, s)}.isValid()" for h in a.headers)


def ingress(a: AppLayout, ports_width: int, fabric: bool = False) -> list[str]:
    m = _m(a)
    out = [
        "if (hdr.udp.length < 28 || standard_metadata.parser_error == error.PacketTooShort",
        f"    || (bit<32>)hdr.udp.length < 28 + {m['bytes']}) {{",
        "    drop();  // the MoldUDP64 header or a block runs past the UDP payload",
        "    meta.handled = 1;  // and not routed either",
        "} else {",
        f"    // This pass evaluates the first subscription message at or after block {m['index']}.",
        f"    bit<8> slot = {NO_SLOT};",
    ]
    stateful = a.app.state is not None
    if stateful and a.app.state.timestamp is None:
        out += [f"    if ({m['index']} == 0) {{",
                "        // Every message of the packet has the time of its first pass (a resubmitted",
                "        // pass has an ingress timestamp of its own).",
                f"        meta.{a.meta('ts')} = standard_metadata.ingress_global_timestamp;",
                "    }"]
    for s in range(a.slots):
        lead = "if" if s == 0 else "} else if"
        reached = f"{m['index']} == 0" if s == 0 else f"{m['index']} <= {s}"
        out.append(f"    {lead} ({reached} && {_valid(a, s)}) {{")
        out.append(f"        slot = {s};")
        out += [f"        {a.key_expr(f)} = {a.field_ref(f, s)};"
                for f in [*a.fields.values(), *state.state_fields(a)]]
        if stateful:
            out.append(f"        meta.{a.meta('msglen')} = hdr.{a.len_instance(s)}.length;")
    out.append("    }")
    out.append(f"    if (slot != {NO_SLOT}) {{")
    out += indent(walk(a, ports_width), 8)
    out += [
        "        if (meta.decided == 1) {",
        "            bit<2> kind = 1;",
        f"            bit<{ports_width}> ports = meta.ports;",
        "            if (meta.multicast == 1) {",
        "                kind = 2;",
        "            } else {",
        *indent(one_hot("ports", "standard_metadata.egress_spec", ports_width), 16),
        "            }",
        f"            if ({m['kind']} == 0) {{",
        f"                {m['kind']} = kind;",
        f"                {m['target']} = (bit<16>)standard_metadata.egress_spec;",
        f"            }} else if (kind == 2 || {m['target']} != (bit<16>)standard_metadata.egress_spec) {{",
        f"                {m['mixed']} = 1;",
        "            }",
        "            if (kind == 2) {",
        f"                {m['kind']} = 2;",
        "            }",
        f"            {m['keep']} = {m['keep']} | ((bit<32>)1 << slot);",
        "            // Egress needs every block's own decision when they differ.",
    ]
    for s in range(a.slots):
        lead = "if" if s == 0 else "} else if"
        out += [f"            {lead} (slot == {s}) {{",
                f"                meta.{a.meta(f'dkind_{s}')} = kind;",
                f"                meta.{a.meta(f'dports_{s}')} = ports;"]
    out += [
        "            }",
        "        }",
        "    }",
        "    // Another pass only if a subscription message follows this one.",
        "    bool more = false;",
    ]
    for s in range(1, a.slots):
        out += [f"    if (slot < {s} && {_valid(a, s)}) {{", "        more = true;", "    }"]
    out += [
        "    if (more) {",
        f"        {m['index']} = slot + 1;",
        "        meta.handled = 1;",
        "        resubmit_preserving_field_list(1);",
        f"    }} else if ({m['kind']} != 0) {{",
        f"        if ({m['kind']} == 1 && {m['mixed']} == 0) {{",
        f"            standard_metadata.egress_spec = (bit<9>){m['target']};",
        "            standard_metadata.mcast_grp = 0;",
        *(indent(fabric_egress.unicast(), 12) if fabric else []),
        "        } else {",
        "            // No group is the union of the decisions' port sets: the application's group",
        "            // reaches every port, and egress keeps in each copy what its port selected.",
        f"            standard_metadata.mcast_grp = {a.app.multicast_group};",
        f"            {m['mixed']} = 1;",
        "        }",
        "        meta.rewrite = 1;  // egress prunes each copy",
        "        meta.handled = 1;",
        "    }",
        "}",
    ]
    return out


def egress(a: AppLayout, fabric: bool = False) -> list[str]:
    m = _m(a)
    out = [f"if (meta.rewrite == 1 && hdr.{a.mold}.isValid()) {{",
           f"    if ({m['mixed']} == 1) {{",
           "        // A copy from the application's group: block i is kept iff decision i selects",
           "        // this replica: its port's bit is set (and a fwd decision is the replica (port, 0)).",
           "        bit<32> keep = 0;"]
    selects = fabric_egress.selects if fabric else port_bit
    for s in range(a.slots):
        kind, ports = f"meta.{a.meta(f'dkind_{s}')}", f"meta.{a.meta(f'dports_{s}')}"
        out += [f"        if ({kind} == 2 && {selects(ports)}",
                f"            || {kind} == 1 && {selects(ports)} && standard_metadata.egress_rid == 0) {{",
                f"            keep = keep | ((bit<32>)1 << {s});",
                "        }"]
    out += [f"        {m['keep']} = keep;",
            "    }",
            f"    if ({m['keep']} == 0) {{",
            "        mark_to_drop(standard_metadata);  // no message of the packet selected this replica",
            "        meta.rewrite = 0;",
            "    } else {"]
    out += indent(_prune(a, m), 8)
    return out + ["    }", "}"]


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
        out += indent(body, 4)
        out += [f"}} else if ({m['keep']}[{s}:{s}] == 0) {{", f"    {length}.length = 0;"]
        out += indent(body, 4)
        out += ["}", f"if ({length}.isValid()) {{",
                f"    {payload} = {payload} + 2 + {length}.length;", "}"]
    out += [f"hdr.{a.mold}.{a.mold_field(1)} = hdr.{a.mold}.{a.mold_field(1)} + (bit<64>)first;",
            f"hdr.{a.mold}.{a.mold_field(2)} = (bit<16>)(last - first + 1);"]
    return out + copy_lengths(payload)
