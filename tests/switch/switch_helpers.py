"""Hand-written pipelines and frame builders shared by the switch tests.

ITCH_PIPELINE follows docs/pipeline-ir.md's example (MoldUDP64, the 36-byte ITCH 5.0 Add
Order, stages stock exact then price range); FLAT_PIPELINE uses single framing and one stage
of each remaining match kind (lpm, ternary) so every table structure is exercised.
"""

from __future__ import annotations

import struct

from switch.packet import mold_payload, udp_frame

ITCH_PORT = 1234
FLAT_PORT = 5555
SESSION = b"SESSION001"

ITCH_FIELDS = [  # ITCH 5.0 Add Order ('A'), 36 bytes
    ("message_type", 0, 8), ("stock_locate", 8, 16), ("tracking_number", 24, 16),
    ("timestamp", 40, 48), ("order_ref", 88, 64), ("buy_sell_indicator", 152, 8),
    ("shares", 160, 32), ("stock", 192, 64), ("price", 256, 32),
]

ITCH_GROUP = 7  # the applications' multicast groups: mcast decisions replicate through them
FLAT_GROUP = 8

ITCH_PIPELINE = {
    "camus_ir": 3,
    "state_width": 32,
    "ports_width": 512,
    "applications": [{
        "name": "itch",
        "udp_port": ITCH_PORT,
        "framing": "moldudp64",
        "packet_header": {"name": "mold", "bytes": 20, "fields": [
            {"name": "session", "bit_offset": 0, "width": 80},
            {"name": "sequence_number", "bit_offset": 80, "width": 64},
            {"name": "message_count", "bit_offset": 144, "width": 16}]},
        "message": {
            "headers": [{"name": "itch_order", "bit_offset": 0, "bits": 288,
                         "fields": [{"name": n, "bit_offset": o, "width": w} for n, o, w in ITCH_FIELDS]}],
            "bytes": 36,
            "type_field": "itch_order.message_type",
            "types": [0x41, 0x46],
        },
        "fields": {
            "itch_order.stock": {"bit_offset": 192, "width": 64, "declared": "exact", "ascii": True},
            "itch_order.price": {"bit_offset": 256, "width": 32, "declared": "range"},
            "itch_order.shares": {"bit_offset": 160, "width": 32, "declared": "range"},
        },
        "stages": [
            {"table": "itch_stock", "default_table": "itch_stock_default",
             "field": "itch_order.stock", "match_kind": "exact"},
            {"table": "itch_price", "default_table": "itch_price_default",
             "field": "itch_order.price", "match_kind": "range"},
        ],
        "leaf_table": "itch_leaf",
        "multicast_group": ITCH_GROUP,
    }],
    "ipv4_table": "ipv4_lpm",
    "egress_table": "egress_udp_rewrite",
}

# A single-framed 8-byte message: key (32 bits, lpm) then flags (16 bits, ternary), then pad.
FLAT_PIPELINE = {
    "camus_ir": 3,
    "state_width": 16,
    "ports_width": 512,
    "applications": [{
        "name": "flat",
        "udp_port": FLAT_PORT,
        "framing": "single",
        "message": {"headers": [{"name": "m", "bit_offset": 0, "bits": 64, "fields": [
            {"name": "key", "bit_offset": 0, "width": 32},
            {"name": "flags", "bit_offset": 32, "width": 16},
            {"name": "pad", "bit_offset": 48, "width": 16}]}], "bytes": 8},
        "fields": {"m.key": {"bit_offset": 0, "width": 32, "declared": "lpm"},
                   "m.flags": {"bit_offset": 32, "width": 16, "declared": "range"}},
        "stages": [
            {"table": "flat_key", "default_table": "flat_key_default", "field": "m.key", "match_kind": "lpm"},
            {"table": "flat_flags", "default_table": "flat_flags_default", "field": "m.flags",
             "match_kind": "ternary"},
        ],
        "leaf_table": "flat_leaf",
        "multicast_group": FLAT_GROUP,
    }],
    "ipv4_table": "ipv4_lpm",
    "egress_table": "egress_udp_rewrite",
}


def ascii_int(text: str, width_bytes: int = 8) -> int:
    """An ITCH alpha field as the integer the tables match: left-justified, space-padded."""
    return int.from_bytes(text.encode().ljust(width_bytes), "big")


def add_order(stock: str, price: int, shares: int = 100, mtype: bytes = b"A", ref: int = 1,
              side: bytes = b"B") -> bytes:
    """An ITCH 5.0 Add Order message (36 bytes; 'F' adds a 4-byte attribution, as ITCH does)."""
    msg = (mtype + struct.pack("!HH", 7, 0) + (123456789).to_bytes(6, "big") + struct.pack("!Q", ref)
           + side + struct.pack("!I", shares) + stock.encode().ljust(8) + struct.pack("!I", price))
    return msg + b"MPID" if mtype == b"F" else msg


def itch_values(message: bytes) -> dict[str, int]:
    """Every Add Order field of a message as `compiler.semantics.evaluate` takes them."""
    return {f"itch_order.{name}": int.from_bytes(message[off // 8: (off + width) // 8], "big")
            for name, off, width in ITCH_FIELDS}


def itch_frame(messages: list[bytes], seq: int = 100, dport: int = ITCH_PORT, dst_ip: int = 0xE8000001,
               count: int | None = None) -> bytes:
    return udp_frame(mold_payload(SESSION, seq, messages, count), dst_port=dport, dst_ip=dst_ip)


def stage(table: str, state: int, field: str, match: dict, next_state: int, priority: int | None = None) -> dict:
    e = {"table": table, "match": {"state": {"exact": state}, field: match},
         "action": "set_state", "params": {"state": next_state}}
    if priority is not None:
        e["priority"] = priority
    return e


def bits(*ports: int) -> int:
    """An mcast decision's port bitmap."""
    return sum(1 << p for p in set(ports))


def leaf(table: str, state: int, action: str, value: int) -> dict:
    """A fwd(port) or mcast(ports) entry; for mcast, `value` is the port bitmap (`bits`)."""
    key = "port" if action == "fwd" else "ports"
    return {"table": table, "match": {"state": {"exact": state}}, "action": action, "params": {key: value}}


def route(prefix: int, plen: int, port: int | None) -> dict:
    e = {"table": "ipv4_lpm", "match": {"ipv4.dst_addr": {"lpm": [prefix, plen]}}}
    e.update({"action": "drop", "params": {}} if port is None else {"action": "fwd", "params": {"port": port}})
    return e


def rewrite(port: int, rid: int, udp_port: int) -> dict:
    return {"table": "egress_udp_rewrite",
            "match": {"egress_port": {"exact": port}, "egress_rid": {"exact": rid}},
            "action": "set_udp_port", "params": {"port": udp_port}}
