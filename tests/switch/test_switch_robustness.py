"""Any bytes in, no crash out: garbage and damaged frames are dropped and counted, and the two
data planes agree on every frame, byte for byte and counter for counter."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from switch.dataplane import load
from switch.packet import udp_frame
from switch_helpers import ITCH_GROUP, ITCH_PIPELINE, add_order, ascii_int, bits, itch_frame, leaf, rewrite, route, stage

MAX32 = (1 << 32) - 1
ENTRIES = {
    "camus_entries": 2,
    "table_entries": [
        stage("itch_stock", 0, "itch_order.stock", {"exact": ascii_int("AAPL")}, 1),
        stage("itch_price", 1, "itch_order.price", {"range": [10, MAX32]}, 2, priority=1),
        {"table": "itch_stock_default", "match": {"state": {"exact": 0}}, "action": "set_state",
         "params": {"state": 3}},
        leaf("itch_leaf", 1, "fwd", 1),
        leaf("itch_leaf", 2, "mcast", bits(1, 2)),
        stage("itch_price", 3, "itch_order.price", {"range": [0, 5]}, 0, priority=1),
        leaf("itch_leaf", 0, "fwd", 4),
        rewrite(2, 1, 7777),
        route(0x0A000000, 8, 5),
    ],
    "multicast_groups": [{"id": ITCH_GROUP, "replicas": [{"port": 1, "rid": 0}, {"port": 2, "rid": 1},
                                                 {"port": 2, "rid": 2}]}],
}

valid_frames = st.builds(
    lambda msgs, seq, dst: itch_frame(msgs, seq=seq, dst_ip=dst),
    st.lists(st.builds(add_order, st.sampled_from(["AAPL", "IBM"]), st.integers(0, 20)), max_size=5),
    st.integers(0, 2 ** 64 - 1),
    st.sampled_from([0x0A000001, 0x0B000001]),
)


@st.composite
def damaged(draw):
    """A valid frame with a few bytes overwritten, cut short or extended."""
    frame = bytearray(draw(valid_frames))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(frame) - 1))
        frame[i] = draw(st.integers(0, 255))
    cut = draw(st.one_of(st.none(), st.integers(0, len(frame))))
    tail = draw(st.binary(max_size=40))
    return bytes(frame[:cut]) + tail


inputs = st.one_of(st.binary(max_size=120), damaged(), valid_frames)


@settings(max_examples=400, deadline=None)
@given(st.lists(inputs, min_size=1, max_size=8), st.integers(0, 2 ** 32 - 1))
def test_both_data_planes_agree_on_any_bytes(frames, in_port):
    py = load(ITCH_PIPELINE, ENTRIES, impl="python")
    native = load(ITCH_PIPELINE, ENTRIES, impl="native")
    outputs = [py.process(f, in_port) for f in frames]
    assert [native.process(f, in_port) for f in frames] == outputs
    assert native.process_batch(frames, in_port) == py.process_batch(frames, in_port) == outputs
    assert native.counters() == py.counters()
    c = py.counters()
    # Every frame is either forwarded somewhere or counted as dropped for exactly one reason.
    assert sum(c["drops"].values()) == 2 * sum(1 for o in outputs if not o)
    assert c["ports"][in_port]["rx_packets"] == 2 * len(frames)


def test_every_drop_reason_is_reachable_and_rx_is_counted(impl):
    dp = load(ITCH_PIPELINE, ENTRIES, impl=impl)
    good = itch_frame([add_order("AAPL", 12)], dst_ip=0x0A000001)
    bad_version = good[:14] + b"\x55" + good[15:]
    udp_len_short = bytearray(good)
    struct.pack_into("!H", udp_len_short, 14 + 20 + 4, 7)
    frames = [good, good[:20], bad_version, bytes(udp_len_short), bytes(10000),
              udp_frame(b"x", dst_port=9, dst_ip=0x0C000001), b""]
    for f in frames:
        dp.process(f, 3)
    c = dp.counters()
    assert c["drops"] == {"malformed": 2, "truncated": 2, "oversized": 1, "no_route": 1}
    assert c["ports"][3]["rx_packets"] == len(frames)
