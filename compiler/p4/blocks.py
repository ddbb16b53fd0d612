"""P4 text shared by the ingress and egress emitters: tables, the stage walk, copy lengths.

Both `compiler.p4.controls` (the two controls, single-message applications) and
`compiler.p4.moldudp64_pruning` (MoldUDP64's passes and per-copy pruning) build their code from these,
so a table declaration or a length computation is written in one place.
"""

from __future__ import annotations

from compiler.p4 import state
from compiler.p4.layout import AppLayout
from p4rt.names import TABLE_SIZE

IHL = "(((bit<16>)hdr.ipv4.ihl) << 2)"  # IPv4 header bytes, options included


def table(name: str, keys: list[tuple[str, str, str]], actions: tuple[str, ...]) -> str:
    """A table declaration: `keys` are (expression, match kind, control-plane name)."""
    key = "".join(f"            {e} : {kind} @name(\"{n}\");\n" for e, kind, n in keys)
    acts = "".join(f"            {a};\n" for a in actions)
    return (f"    table {name} {{\n"
            f"        key = {{\n{key}        }}\n"
            f"        actions = {{\n{acts}            @defaultonly NoAction;\n        }}\n"
            f"        default_action = NoAction();\n"
            f"        size = {TABLE_SIZE};\n"
            f"    }}\n")


PORT_BITS = 9  # v1model's egress_spec and egress_port


def one_hot(dst: str, port: str, width: int) -> list[str]:
    """`dst = 1 << port` as a `width`-bit bitmap, with no shift by a run-time amount.

    p4c's bmv2 backend refuses a shift whose amount is wider than 8 bits (a 9-bit port) or a
    constant of 256 or more, and a hardware target has no wide barrel shifter. So the one-hot
    is built from the port's bits, each a conditional shift by a constant (1, 2, 4, ... 128,
    and 256 as two shifts of 128): log2(width) steps, no table and no entry. A port at or past
    `width` gives 0: its bit is shifted out, or a step as wide as the bitmap clears it. See
    docs/p4.md ("Port bitmaps without run-time shifts") for what the alternatives cost."""
    out = [f"{dst} = 1;"]
    for k in range(PORT_BITS):
        step = 1 << k
        if step >= width:
            body = [f"{dst} = 0;"]
        else:
            body = [f"{dst} = {dst} << {min(step, 128)};"] * max(1, step // 128)
        out += [f"if ({port}[{k}:{k}] == 1) {{", *("    " + b for b in body), "}"]
    return out


def egress_port_bit(width: int) -> list[str]:
    """Egress, once per copy: `meta.port_bit` is this copy's port as a one-hot bitmap, which
    `port_bit` tests every decision's bitmap against."""
    return one_hot("meta.port_bit", "standard_metadata.egress_port", width)


def port_bit(bitmap: str) -> str:
    """A port bitmap's bit for this copy's egress port is set (a port past its width: not)."""
    return f"({bitmap} & meta.port_bit) != 0"


def indent(lines: list[str], n: int) -> list[str]:
    return [(" " * n + ln) if ln else ln for ln in lines]


def walk(a: AppLayout, ports_width: int) -> list[str]:
    """The stage walk of one message: a decision (`meta.decided`) skips every later stage.

    With several lanes, each lane's chain runs from state 0 with `decided` cleared, and its
    decision is OR-ed into `meta.lane_ports` as a bitmap (fwd(p): bit p, made by `one_hot`);
    the message is then decided as an `mcast` of that union (through the application's group,
    which reaches every port a decision names), so the code after the walk needs no change."""
    if len(a.lanes) == 1:  # an application with state has one lane: its stages follow
        return _chain(a.stages, a.leaf_table) + state.stages(a)
    width = ports_width
    out = ["meta.lane_ports = 0;"]
    for lane in a.lanes:
        out += ["meta.state = 0;", "meta.decided = 0;", "meta.multicast = 0;"]
        out += _chain(lane.stages, lane.leaf_table)
        out += ["if (meta.decided == 1) {",
                "    if (meta.multicast == 1) {",
                "        meta.lane_ports = meta.lane_ports | meta.ports;",
                "    } else {",
                *indent(one_hot("meta.port_bit", "standard_metadata.egress_spec", width), 8),
                "        meta.lane_ports = meta.lane_ports | meta.port_bit;",
                "    }",
                "}"]
    return out + ["meta.decided = 0;",
                  "meta.multicast = 0;",
                  "if (meta.lane_ports != 0) {",
                  "    meta.decided = 1;  // the union of the lanes' decisions, as one mcast",
                  "    meta.multicast = 1;",
                  "    meta.ports = meta.lane_ports;",
                  "}"]


def _chain(stages, leaf_table: str) -> list[str]:
    out = []
    for st in stages:
        out += ["if (meta.decided == 0) {",
                f"    if (!{st.table}.apply().hit) {{",
                f"        {st.default_table}.apply();",
                "    }",
                "}"]
    return out + ["if (meta.decided == 0) {", f"    {leaf_table}.apply();", "}"]


def copy_lengths(udp_payload: str | None) -> list[str]:
    """A subscription copy: IPv4/UDP lengths from its UDP payload (None: unchanged), its frame
    length for truncation. The IPv4 length follows the UDP one, as the software switch
    rebuilds the frame from the UDP datagram alone."""
    udp = [] if udp_payload is None else [f"hdr.udp.length = {udp_payload} + 8;"]
    return udp + [f"hdr.ipv4.total_len = hdr.udp.length + {IHL};",
                  "meta.frame_len = 14 + (bit<32>)hdr.ipv4.total_len;"]
