"""Records to packets and back, and the header layout against p4/kafka/kafka.p4."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.spec import load_spec
from shim.reframe import (HEADER, TIME_MODULUS, Reassembler, Record, decode_record,
                          encode_record, ipv4_checksum, packets)
from shim.subscriptions import KAFKA_SPEC


def test_header_layout_is_kafka_p4():
    spec = load_spec(KAFKA_SPEC)
    (h,) = spec.headers
    fmt = {8: "B", 16: "H", 32: "I", 64: "Q"}
    assert ">" + "".join(fmt[f.width] for f in h.fields) == ">IIQHHI" + "Q" * 8 + "QII"
    assert HEADER.size * 8 == h.bits


records = st.builds(
    Record,
    timestamp=st.integers(-2**63, 2**63 - 1),
    key=st.none() | st.binary(max_size=50),
    value=st.none() | st.binary(max_size=5000),
    headers=st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)),
                     max_size=4).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(records, st.integers(1, 3000), st.randoms())
def test_fragments_reassemble_in_any_order(record, fragment, rnd):
    assert decode_record(encode_record(record)) == record
    frames = packets(7, 3, 12345, list(range(8)), record, fragment=fragment)
    for f in frames:
        assert ipv4_checksum(f[14:34]) == 0  # a valid header sums to zero
        assert len(f) <= 14 + 20 + 8 + HEADER.size + fragment
    rnd.shuffle(frames)
    r = Reassembler()
    done = [r.push(f) for f in frames]
    assert [d for d in done[:-1] if d is not None] == []
    assert done[-1] == (7, 3, 12345, record)
    assert r.malformed == 0 and not r.pending


def test_one_mebibyte_record():
    record = Record(1, b"k", random.Random(1).randbytes(1 << 20))
    frames = packets(1, 0, 0, [0] * 8, record)
    assert len(frames) == -(-len(encode_record(record)) // 1400)
    r = Reassembler()
    out = [x for x in map(r.push, frames) if x]
    assert out == [(1, 0, 0, record)]


def test_garbage_is_counted_not_raised():
    r = Reassembler()
    good = packets(1, 0, 5, [0] * 8, Record(0, None, b"x" * 3000))
    for junk in (b"", b"\x00" * 20, good[0][:60], good[0][:-1] + b"", bytes(200)):
        assert r.push(junk) is None
    assert r.malformed >= 3


def test_pending_is_bounded():
    r = Reassembler(max_pending=3)
    for off in range(10):
        first = packets(1, 0, off, [0] * 8, Record(0, None, b"y" * 3000))[0]
        r.push(first)
    assert len(r.pending) == 3 and r.evicted == 7


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
       st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_frames_have_valid_ipv4_and_udp_lengths(payload, src, dst, sport, dport):
    # The framer sums the constant header words once; every frame must still carry a
    # header whose checksum verifies and lengths that cover exactly the payload.
    from shim.reframe import Addressing, _framer
    a = Addressing(src_ip=src.to_bytes(4, "big"), dst_ip=dst.to_bytes(4, "big"),
                   src_port=sport, dst_port=dport)
    frame = _framer(a)(payload)
    ip = frame[14:34]
    assert frame[12:14] == b"\x08\x00" and ip[0] == 0x45 and ip[9] == 17
    assert ipv4_checksum(ip) == 0  # a correct header sums to 0xFFFF, complemented 0
    assert int.from_bytes(ip[2:4], "big") == len(frame) - 14
    assert ip[12:16] == a.src_ip and ip[16:20] == a.dst_ip
    assert int.from_bytes(frame[38:40], "big") == 8 + len(payload)
    assert frame[34:38] == sport.to_bytes(2, "big") + dport.to_bytes(2, "big")
    assert frame[42:] == payload


@settings(max_examples=100, deadline=None)
@given(records, st.lists(st.integers(0, 2**64 - 1), min_size=8, max_size=8),
       st.lists(st.integers(0, 7), max_size=2), st.integers(1, 3000))
def test_single_packets_carry_timestamp_and_lanes(record, slots, lanes, fragment):
    """A packet fed to a stateful view: one per record (by reference when it needs
    fragments), the record's timestamp as a u64 and each lane's slot in 32 bits."""
    frames = packets(7, 3, 9, slots, record, fragment=fragment, lanes=tuple(lanes), single=True)
    assert len(frames) == 1
    *_, ts, avg0, avg1 = HEADER.unpack_from(frames[0], 42)
    assert ts == record.timestamp % TIME_MODULUS and TIME_MODULUS % 86_400_000 == 0
    assert TIME_MODULUS * 1000 < 2**48 <= (TIME_MODULUS + 86_400_000) * 1000
    want = [slots[k] % 2**32 for k in lanes] + [0] * (2 - len(lanes))
    assert [avg0, avg1] == want
    whole = len(encode_record(record)) <= fragment
    assert Reassembler().push(frames[0]) == (7, 3, 9, record if whole else None)
