"""ITCH 5.0 and MoldUDP64 encodings, checked against the independent `itchfeed` decoder and
the byte offsets in ../shared/specs/wire-formats.md (1.2, 1.5, 2.1-2.4)."""

from __future__ import annotations

import gzip
import random
import struct

import pytest
from itch.parser import MessageParser

from apps.itch_filter import binaryfile, feed, messages as itch, moldudp64
from switch.packet import read_mold, udp_frame

# wire-formats.md table 1.2, copied by hand: the lengths are the contract.
SPEC_LENGTHS = {"S": 12, "R": 39, "H": 25, "Y": 20, "L": 26, "V": 35, "W": 12, "K": 28, "J": 35,
                "h": 21, "A": 36, "F": 40, "E": 31, "C": 36, "X": 23, "D": 19, "U": 35, "P": 44,
                "Q": 40, "B": 19, "I": 50, "N": 20, "O": 48}
# Where itchfeed spells a field differently.
ITCHFEED_NAMES = {"auction_collar_extension": "auction_collar_extention"}


def sample_fields(t: bytes, rng: random.Random) -> dict:
    out = {"stock_locate": rng.randrange(1 << 16), "tracking_number": rng.randrange(1 << 16),
           "timestamp": rng.randrange(1 << 48)}
    for name, code in itch.LAYOUTS[t][1]:
        if code.endswith("s"):
            out[name] = "".join(rng.choice("ABCXYZ09") for _ in range(int(code[:-1])))
        else:
            out[name] = rng.randrange(1 << (8 * struct.calcsize("!" + code)))
    return out


def itchfeed_decode(message: bytes):
    framed = b"\x00" + bytes([len(message)]) + message
    parsed = list(MessageParser().parse_stream(framed))
    assert len(parsed) == 1
    return parsed[0]


def test_all_23_types_have_the_spec_lengths():
    assert {t.decode(): n for t, n in itch.LENGTHS.items()} == SPEC_LENGTHS


@pytest.mark.parametrize("code", sorted(SPEC_LENGTHS))
def test_itchfeed_decodes_every_field(code):
    t = code.encode()
    rng = random.Random(code)
    for _ in range(5):
        fields = sample_fields(t, rng)
        wire = itch.encode(t, **fields)
        assert len(wire) == SPEC_LENGTHS[code]
        theirs = itchfeed_decode(wire)
        assert theirs.message_type == t
        for name, value in fields.items():
            got = getattr(theirs, ITCHFEED_NAMES.get(name, name))
            assert got == (value.encode() if isinstance(value, str) else value), name
        assert theirs.to_bytes() == wire  # their encoder agrees byte for byte
        ours = itch.decode(wire)
        assert {k: ours[k] for k in fields} == {k: v.encode() if isinstance(v, str) else v
                                                for k, v in fields.items()}


def test_alpha_fields_are_space_padded():
    wire = itch.encode("A", stock="MSFT", buy_sell_indicator="B", price=1)
    assert wire[24:32] == b"MSFT    "  # offset 24, 8 bytes: wire-formats.md 1.3
    with pytest.raises(itch.ItchError):
        itch.encode("A", stock="TOOLONGSYM")
    with pytest.raises(itch.ItchError):
        itch.decode(wire[:-1])


def test_synthetic_day_reads_back_through_itchfeed(tmp_path):
    day = feed.synthetic_day(3000, seed=7)
    path = tmp_path / "day.NASDAQ_ITCH50.gz"
    assert binaryfile.write(path, day) == 3000
    assert list(binaryfile.read(path)) == day
    assert path.read_bytes()[:2] == binaryfile.GZIP_MAGIC
    with gzip.open(path, "rb") as fh:
        theirs = [m.to_bytes() for m in MessageParser().parse_file(fh)]
    assert theirs == day  # every message, and the day ends with S 'C' (end of messages)


def test_synthetic_day_shape():
    day = feed.synthetic_day(5000, seed=3)
    assert day == feed.synthetic_day(5000, seed=3)  # fixed seed, same bytes
    types = [m[:1] for m in day]
    n_symbols = len(feed.SYMBOLS)
    assert types[0] == b"S" and types[1: 1 + n_symbols] == [b"R"] * n_symbols
    assert set(types[1 + n_symbols + 2: -3]) == {b"A", b"F", b"E", b"X", b"D", b"U", b"P"}
    # Every execution, cancel, delete or replace refers to a live order.
    live = set()
    for m in day:
        f = itch.decode(m)
        t = f["message_type"]
        if t in (b"A", b"F"):
            live.add(f["order_reference_number"])
        elif t in (b"E", b"X", b"D", b"U"):
            assert f["order_reference_number"] in live
            if t in (b"D", b"U"):
                live.discard(f["order_reference_number"])
            if t == b"U":
                live.add(f["new_order_reference_number"])
    # Zipf: the first-ranked symbol carries the most adds.
    adds = [itch.decode(m)["stock"] for m in day if m[:1] in (b"A", b"F")]
    assert max(set(adds), key=adds.count) == b"AAPL    "
    grouped = feed.packets(day, seed=3)
    assert all(1 <= len(ms) <= 12 for _, ms in grouped)
    assert [s for s, _ in grouped] == [1 + sum(len(ms) for _, ms in grouped[:i]) for i in range(len(grouped))]


def test_moldudp64_packets():
    session = moldudp64.session_id("CAMUS1")
    a = itch.encode("A", stock="GOOGL", price=1_700_000, shares=100, buy_sell_indicator="B")
    d = itch.encode("D", order_reference_number=9)
    wire = moldudp64.encode(session, 41, [a, d])
    assert len(wire) == 20 + 2 + 36 + 2 + 19
    assert read_mold(wire) == (session, 41, [a, d])  # the switch's own reader agrees
    p = moldudp64.decode(wire + b"\0" * 30)  # padding after the last block is ignored
    assert (p.sequence, p.blocks, p.next_sequence) == (41, (a, d), 43)
    hb, eos = moldudp64.heartbeat(session, 43), moldudp64.end_of_session(session, 43)
    assert len(hb) == len(eos) == 20
    assert hb[18:] == b"\x00\x00" and eos[18:] == b"\xff\xff"
    assert moldudp64.decode(hb).is_heartbeat and moldudp64.decode(eos).is_end_of_session
    assert moldudp64.decode(eos).next_sequence == 43
    req = moldudp64.request(session, 7, 3)
    assert len(req) == 20 and moldudp64.decode_request(req) == (session, 7, 3)
    with pytest.raises(moldudp64.MoldError):
        moldudp64.decode(wire[:-1])
    with pytest.raises(moldudp64.MoldError):
        moldudp64.decode_request(hb)


def test_frame_offsets_match_the_spec():
    """wire-formats.md 1.5: with Ethernet + IPv4 + UDP, the first A block's stock is at 88-95."""
    a = itch.encode("A", stock_locate=0x0102, timestamp=0x0A0B0C0D0E0F, order_reference_number=5,
                    buy_sell_indicator="S", shares=300, stock="GOOGL", price=1_700_000)
    frame = udp_frame(moldudp64.encode(moldudp64.session_id("S1"), 1, [a, a]), dst_port=moldudp64.UDP_PORT)
    assert frame[62:64] == b"\x00\x24" and frame[64:65] == b"A"
    assert frame[65:67] == b"\x01\x02" and frame[69:75] == bytes.fromhex("0a0b0c0d0e0f")
    assert frame[83:84] == b"S" and frame[88:96] == b"GOOGL   "
    assert int.from_bytes(frame[96:100], "big") == 1_700_000
    assert frame[100:102] == b"\x00\x24"  # the second block's length
