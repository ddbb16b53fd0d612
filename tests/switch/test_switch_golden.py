"""Small hand-checked cases, run on both data planes: pruning, replication, rewrite, fallback."""

from __future__ import annotations

import struct

import pytest

from switch.dataplane import load
from switch.packet import read_mold, read_udp, udp_frame
from switch_helpers import (
    FLAT_PIPELINE, FLAT_PORT, ITCH_GROUP, ITCH_PIPELINE, SESSION, add_order, ascii_int, bits, itch_frame, leaf, rewrite,
    route, stage,
)

MAX32 = (1 << 32) - 1
DELETE_ORDER = b"D" + bytes(18)  # a 19-byte ITCH message that is not a subscription type


def itch_entries() -> dict:
    return {
        "camus_entries": 2,
        "table_entries": [
            stage("itch_stock", 0, "itch_order.stock", {"exact": ascii_int("GOOGL")}, 1),
            stage("itch_stock", 0, "itch_order.stock", {"exact": ascii_int("AAPL")}, 2),
            stage("itch_price", 1, "itch_order.price", {"range": [51, MAX32]}, 3, priority=1),
            {"table": "itch_price_default", "match": {"state": {"exact": 1}}, "action": "set_state",
             "params": {"state": 4}},
            {"table": "itch_price_default", "match": {"state": {"exact": 2}}, "action": "set_state",
             "params": {"state": 5}},
            leaf("itch_leaf", 3, "mcast", bits(1, 2, 3)),
            leaf("itch_leaf", 4, "fwd", 1),
            leaf("itch_leaf", 5, "fwd", 2),
            rewrite(3, 7, 9000),
            route(0xE8000000, 8, 9),
            route(0x0A000000, 8, 8),
        ],
        # The application's group reaches port 4 too: its copy is pruned (bit 4 is clear).
        "multicast_groups": [{"id": ITCH_GROUP, "replicas": [{"port": 1, "rid": 0}, {"port": 2, "rid": 0},
                                                              {"port": 3, "rid": 7}, {"port": 4, "rid": 0}]}],
    }


@pytest.fixture
def itch(impl):
    return load(ITCH_PIPELINE, itch_entries(), impl=impl)


def decode(copy: bytes) -> tuple[int, int, int, list[bytes]]:
    """(udp dst port, sequence, count, blocks) of a MoldUDP64 copy, checking its headers."""
    v = read_udp(copy)
    assert v.ip_checksum_ok
    assert v.ip_total_length == len(copy) - 14
    assert v.udp_length == 8 + len(v.payload)
    assert v.udp_checksum == 0
    session, seq, blocks = read_mold(v.payload)
    assert session == SESSION
    assert len(v.payload) == 20 + sum(2 + len(b) for b in blocks)  # nothing trails the blocks
    return v.dst_port, seq, len(blocks), blocks


def test_each_port_gets_only_its_messages_with_placeholders(itch):
    m = [add_order("GOOGL", 60), add_order("MSFT", 10), add_order("AAPL", 5), add_order("GOOGL", 40),
         DELETE_ORDER, add_order("MSFT", 99)]
    out = itch.process(itch_frame(m, seq=100), 0)
    assert [p for p, _ in out] == [1, 2, 3]
    assert decode(out[0][1]) == (1234, 100, 4, [m[0], b"", b"", m[3]])
    assert decode(out[1][1]) == (1234, 100, 3, [m[0], b"", m[2]])
    assert decode(out[2][1]) == (9000, 100, 1, [m[0]])  # replica (3, 7) rewritten


def test_sequence_number_is_that_of_first_kept_message(itch):
    m = [add_order("MSFT", 1), DELETE_ORDER, add_order("AAPL", 1)]
    out = itch.process(itch_frame(m, seq=41), 0)
    assert [(p, decode(c)) for p, c in out] == [(2, (1234, 43, 1, [m[2]]))]


def test_sequence_number_wraps(itch):
    m = [add_order("MSFT", 1), add_order("AAPL", 1)]
    out = itch.process(itch_frame(m, seq=(1 << 64) - 1), 0)
    assert decode(out[0][1])[1] == 0


def test_type_F_is_a_subscription_message_and_short_A_is_not(itch):
    m = [add_order("AAPL", 1, mtype=b"F"), add_order("AAPL", 1)[:35]]
    out = itch.process(itch_frame(m), 0)
    assert [(p, decode(c)[2:]) for p, c in out] == [(2, (1, [m[0]]))]


def test_unselected_packet_goes_to_ipv4_unchanged(itch):
    frame = itch_frame([add_order("MSFT", 1), DELETE_ORDER]) + b"\0" * 6  # trailing padding kept
    assert itch.process(frame, 0) == [(9, frame)]
    heartbeat = itch_frame([], count=0)
    end_of_session = itch_frame([], count=0xFFFF)
    assert itch.process(heartbeat, 0) == [(9, heartbeat)]
    assert itch.process(end_of_session, 0) == [(9, end_of_session)]


def test_other_udp_and_non_udp_traffic_uses_ipv4(itch):
    other = udp_frame(b"hello", dst_port=53, dst_ip=0x0A010203)
    assert itch.process(other, 5) == [(8, other)]
    tcp = bytearray(other)
    tcp[14 + 9] = 6
    assert itch.process(bytes(tcp), 5) == [(8, bytes(tcp))]


def test_ip_options_are_kept_in_copies(itch):
    frame = udp_frame(itch_frame([add_order("AAPL", 3)])[42:], dst_port=1234, ip_options=b"\x01\x01\x01\x00")
    (port, copy), = itch.process(frame, 0)
    assert port == 2 and copy[14] == 0x46 and copy[14 + 20: 14 + 24] == b"\x01\x01\x01\x00"
    assert decode(copy)[2:] == (1, [add_order("AAPL", 3)])


def test_drops_are_counted_by_reason(itch):
    good = itch_frame([add_order("AAPL", 3), add_order("AAPL", 4)])
    cases = {
        "truncated": [good[:-1], good[:13], good[:30], good[:44], itch_frame([add_order("AAPL", 3)], count=2)],
        "malformed": [good[:14] + bytes([0x65]) + good[15:], good[:14] + bytes([0x44]) + good[15:]],
        "oversized": [udp_frame(bytes(9300), dst_port=1234)],
        "no_route": [udp_frame(b"x", dst_port=53, dst_ip=0x0B000001), good[:12] + b"\x86\xdd" + good[14:]],
    }
    for frames in cases.values():
        for f in frames:
            assert itch.process(f, 4) == []
    c = itch.counters()
    assert c["drops"] == {k: len(v) for k, v in cases.items()}
    assert c["ports"] == {4: {"rx_packets": sum(map(len, cases.values())), "tx_packets": 0}}


def test_counters_per_table_and_port(itch):
    m = [add_order("GOOGL", 60), add_order("MSFT", 10), DELETE_ORDER]
    itch.process(itch_frame(m), 0)
    c = itch.counters()
    t = c["tables"]
    assert t["itch_stock"] == {"hits": 1, "misses": 1}
    assert t["itch_stock_default"] == {"hits": 0, "misses": 1}
    assert t["itch_price"] == {"hits": 1, "misses": 1}
    assert t["itch_price_default"] == {"hits": 0, "misses": 1}
    assert t["itch_leaf"] == {"hits": 1, "misses": 1}
    assert t["egress_udp_rewrite"] == {"hits": 1, "misses": 2}
    assert t["ipv4_lpm"] == {"hits": 0, "misses": 0}
    assert c["ports"] == {0: {"rx_packets": 1, "tx_packets": 0}, 1: {"rx_packets": 0, "tx_packets": 1},
                          2: {"rx_packets": 0, "tx_packets": 1}, 3: {"rx_packets": 0, "tx_packets": 1}}
    itch.reset_counters()
    assert itch.counters()["ports"] == {}


def test_batch_matches_single_calls(impl):
    frames = [itch_frame([add_order(s, p)]) for s in ("GOOGL", "AAPL", "MSFT") for p in (1, 100)]
    a = load(ITCH_PIPELINE, itch_entries(), impl=impl)
    b = load(ITCH_PIPELINE, itch_entries(), impl=impl)
    assert a.process_batch(frames, 3) == [b.process(f, 3) for f in frames]
    assert a.counters() == b.counters()


def flat_frame(key: int, flags: int) -> bytes:
    return udp_frame(struct.pack("!IHH", key, flags, 0), dst_port=FLAT_PORT)


def test_lpm_and_ternary_stages(impl):
    entries = {"camus_entries": 2, "table_entries": [
        stage("flat_key", 0, "m.key", {"lpm": [0x0A000000, 8]}, 1),
        stage("flat_key", 0, "m.key", {"lpm": [0x0A010000, 16]}, 2),
        stage("flat_flags", 1, "m.flags", {"ternary": [0x0001, 0x0001]}, 3, priority=10),
        stage("flat_flags", 1, "m.flags", {"ternary": [0x0000, 0x0000]}, 4, priority=1),
        {"table": "flat_key_default", "match": {"state": {"exact": 0}}, "action": "set_state",
         "params": {"state": 4}},
        leaf("flat_leaf", 2, "fwd", 12), leaf("flat_leaf", 3, "fwd", 13), leaf("flat_leaf", 4, "fwd", 14),
    ]}
    dp = load(FLAT_PIPELINE, entries, impl=impl)
    for (key, flags), port in {(0x0A010101, 0): 12, (0x0A020202, 1): 13, (0x0A020202, 2): 14,
                               (0x0B000000, 1): 14}.items():
        frame = flat_frame(key, flags)
        out = dp.process(frame, 0)
        assert [p for p, _ in out] == [port]
        assert read_udp(out[0][1]).payload == read_udp(frame).payload


def test_a_stage_can_decide_and_skip_later_stages_and_leaf(impl):
    entries = {"camus_entries": 2, "table_entries": [
        {"table": "itch_stock", "match": {"state": {"exact": 0}, "itch_order.stock": {"exact": ascii_int("IBM")}},
         "action": "mcast", "params": {"ports": bits(2)}},
        {"table": "itch_stock_default", "match": {"state": {"exact": 0}}, "action": "set_state",
         "params": {"state": 1}},
        {"table": "itch_price_default", "match": {"state": {"exact": 1}}, "action": "fwd", "params": {"port": 4}},
        leaf("itch_leaf", 0, "fwd", 6),  # unreachable here: every message is decided by a stage
    ], "multicast_groups": [{"id": ITCH_GROUP, "replicas": [{"port": 2, "rid": 1}, {"port": 4, "rid": 1}]}]}
    dp = load(ITCH_PIPELINE, entries, impl=impl)
    m = [add_order("IBM", 1), add_order("SAP", 1)]
    out = dp.process(itch_frame(m), 0)
    assert [(p, decode(c)[1:]) for p, c in out] == [(2, (100, 1, [m[0]])), (4, (101, 1, [m[1]]))]
    t = dp.counters()["tables"]
    assert t["itch_price"] == {"hits": 0, "misses": 1}
    assert t["itch_leaf"] == {"hits": 0, "misses": 0}


def test_native_classify_reports_each_message_decision():
    from switch.native_dataplane import pack

    dp = load(ITCH_PIPELINE, itch_entries(), impl="native")
    frames = [itch_frame([add_order("GOOGL", 60), add_order("MSFT", 1), DELETE_ORDER, add_order("GOOGL", 1)]),
              b"garbage", itch_frame([], count=0), itch_frame([add_order("AAPL", 1)])]
    codes, counts = dp.classify_packed(*pack(frames), 0)
    assert struct.unpack("<4I", counts) == (4, 0, 0, 1)
    # mcast reports the native index of its port bitmap: the first (and only) one interned.
    assert struct.unpack("<5Q", codes) == ((2 << 32) | 0, 0, 0, (1 << 32) | 1, (1 << 32) | 2)
