"""The product's three specs read as intended, and the paper's Figure 4 style is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]

FIGURE4 = """
header itch_order {
    bit<16> stock_locate;
    bit<32> shares;
    bit<64> stock;
    bit<32> price;
}
@pragma query_field(itch_order.shares)
@pragma query_field(itch_order.price)
@pragma query_field_exact(itch_order.stock)
"""


@pytest.mark.parametrize("spelling", ["@pragma {}", "@{}", "#pragma {}"])
def test_figure4_verbatim_in_every_spelling(spelling):
    text = FIGURE4
    for ann in ("query_field(itch_order.shares)", "query_field(itch_order.price)",
                "query_field_exact(itch_order.stock)"):
        text = text.replace(f"@pragma {ann}", spelling.format(ann))
    spec = parse_spec(text)
    assert spec.udp_port == 1234 and spec.framing == "single"
    q = spec.query_fields
    assert (q["itch_order.shares"].kind, q["itch_order.shares"].width) == ("range", 32)
    assert (q["itch_order.stock"].kind, q["itch_order.stock"].bit_offset) == ("exact", 48)
    assert q["itch_order.price"].bit_offset == 112


def test_itch_spec():
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    assert (spec.udp_port, spec.framing, spec.packet_header.name) == (1234, "moldudp64", "mold")
    assert spec.message_bytes == 36  # the Add Order message, type byte included
    assert spec.message_types == (0x41, 0x46)
    q = spec.query_fields
    # Byte offsets inside the message as in wire-formats.md 1.3 (stock at 24, price at 32).
    assert q["itch_order.stock"].bit_offset == 24 * 8 and q["itch_order.stock"].kind == "exact"
    assert q["itch_order.price"].bit_offset == 32 * 8
    assert q["itch_order.shares"].bit_offset == 20 * 8
    assert q["itch_order.buy_sell_indicator"].bit_offset == 19 * 8
    assert q["itch_order.stock"].encode("MSFT") == int.from_bytes(b"MSFT    ", "big")


def test_int_spec():
    spec = load_spec(ROOT / "p4/int/int.p4")
    assert spec.message_bytes == 4 + 12 + 16  # shim, MD header, one 4-word hop record
    q = spec.query_fields
    assert q["int_hop.switch_id"].bit_offset == 16 * 8
    assert q["int_hop.hop_latency"].bit_offset == 24 * 8
    assert q["int_hop.queue_occupancy"].width == 24


def test_kafka_spec():
    spec = load_spec(ROOT / "p4/kafka/kafka.p4")
    q = spec.query_fields
    assert q["kafka.topic_id"].kind == "exact"
    assert [f"kafka.slot{i}" in q for i in range(8)] == [True] * 8
    assert all(q[f"kafka.slot{i}"].width == 64 for i in range(8))
