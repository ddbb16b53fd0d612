"""apps/int_events' INT 2.1 INT-MD encoding, checked three independent ways.

1. A golden packet written byte by byte by hand from wire-formats.md 3.3-3.5 (not produced
   by the encoder), with the absolute frame offsets of each field.
2. A second decoder: scapy layers declared field by field from the spec's tables (int_layers.py)
   (bit widths in spec order), parsing the fabric's frames, compared with what the
   fabric meant to send (its Hop objects), never with apps.int_events' own decoder.
3. The compiled pipeline for p4/int/int.p4: the switch reads each query field at the IR's
   bit offset; those bytes must hold the top record's values.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from apps.int_events.fabric import Fabric, packet_number
from apps.int_events.int_md import Hop, IntStack, NotIntMd, decode
from compiler.compile import compile_text
from switch.packet import udp_frame
from tests.apps.int_layers import IntShimMd

ROOT = Path(__file__).resolve().parents[2]
ETH_IP_UDP = 42  # Ethernet 14 + IPv4 without options 20 + UDP 8


def _scapy_ipv4_checksum(pkt: Packet) -> int:
    """The IPv4 header checksum as scapy computes it when building the header afresh."""
    fresh = IP(bytes(pkt[IP]))
    del fresh.chksum
    return IP(bytes(fresh)).chksum


def _golden_frame() -> bytes:
    # Two hops: the source NIC 1001 pushed first, then leaf 2; the source set RHC to 8.
    stack = IntStack(original_port=5201, remaining_hop_count=8)
    stack = stack.push(Hop(1001, 0, 1, 1, 3, 2))
    stack = stack.push(Hop(2, 9, 4, 0x12345, 3, 0x0ABCDE))
    return udp_frame(stack.encode() + b"payload!", dst_port=1337, src_port=40001)


GOLDEN_INT = bytes.fromhex(
    # shim: type 1 | NPT 1 = 0x14; length 3 + 2*4 = 11 words; original port 5201 = 0x1451
    "14 0b 1451"
    # MD word 0: ver 2, D/E/M 0, reserved 0, Hop ML 4 (low 5 bits of byte 2), RHC 8-2 = 6
    "20 00 04 06"
    # bitmap 0xF000, DS id 0, DS instruction 0, DS flags 0
    "f000 0000 0000 0000"
    # top record (leaf 2): node id | ingress 9, egress 4 | latency 0x12345 | queue 3, occupancy 0x0abcde
    "00000002 0009 0004 00012345 03 0abcde"
    # bottom record (NIC 1001 = 0x3e9): node | ingress 0, egress 1 | latency 1 | queue 3, occupancy 2
    "000003e9 0000 0001 00000001 03 000002"
)


def test_golden_packet_bytes_and_offsets():
    frame = _golden_frame()
    assert frame[ETH_IP_UDP: ETH_IP_UDP + len(GOLDEN_INT)] == GOLDEN_INT
    assert frame[ETH_IP_UDP + len(GOLDEN_INT):] == b"payload!"
    assert frame[36:38] == (1337).to_bytes(2, "big")  # UDP destination port
    # Absolute offsets for bitmap 0xF000, as wire-formats.md 3.5 gives them for 0x8000|0x2000
    # but with the L1 ports word between node id and latency.
    assert frame[42] >> 4 == 1 and frame[43] == 11  # shim 42-45
    assert frame[46] >> 4 == 2 and frame[48] & 0x1F == 4 and frame[49] == 6  # MD header 46-57
    assert frame[50:52] == b"\xf0\x00"
    assert int.from_bytes(frame[58:62], "big") == 2  # top node id
    assert int.from_bytes(frame[66:70], "big") == 0x12345  # top hop latency
    assert int.from_bytes(frame[71:74], "big") == 0x0ABCDE  # top queue occupancy
    # Stack size = 4 * shim.Length - 12 = n_hops * Hop ML * 4
    assert 4 * frame[43] - 12 == 2 * 4 * 4


def test_scapy_layers_parse_the_golden_packet():
    pkt = Ether(_golden_frame())
    assert _scapy_ipv4_checksum(pkt) == pkt[IP].chksum
    int_part = IntShimMd(bytes(pkt[UDP].payload))
    assert (int_part.type, int_part.npt, int_part.length, int_part.original_port) == (1, 1, 11, 5201)
    assert [h.node_id for h in int_part.stack] == [2, 1001]  # most recent first


def test_scapy_decoder_agrees_with_what_the_fabric_meant():
    hop_counts = set()
    for pkt in Fabric(seed=7).packets(400):
        parsed = Ether(pkt.frame)
        assert parsed[UDP].dport == 1337 and parsed[UDP].len == len(pkt.frame) - 34
        assert parsed[IP].len == len(pkt.frame) - 14
        assert _scapy_ipv4_checksum(parsed) == parsed[IP].chksum
        i = IntShimMd(bytes(parsed[UDP].payload))
        n = len(pkt.stack.hops)
        hop_counts.add(n)
        assert (i.type, i.npt, i.ver, i.hop_ml, i.instruction_bitmap) == (1, 1, 2, 4, 0xF000)
        assert (i.d, i.e, i.m, i.domain_id, i.ds_instruction, i.ds_flags) == (0, 0, 0, 0, 0, 0)
        assert i.length == 3 + 4 * n  # words after the shim: MD header + stack
        assert i.original_port == pkt.flow.dst_port
        assert i.remaining_hop_count == 8 - n
        got = [(h.node_id, h.l1_ingress, h.l1_egress, h.hop_latency, h.queue_id, h.queue_occupancy) for h in i.stack]
        meant = [(h.node_id, h.ingress_port, h.egress_port, h.hop_latency, h.queue_id, h.queue_occupancy)
                 for h in pkt.stack.hops]
        assert got == meant
        # The sender's payload follows the stack.
        after = bytes(i.payload) if i.payload else b""
        assert packet_number(after) == (pkt.number, pkt.time_ns)
        # The path runs from the source NIC (bottom) to the last leaf (top).
        assert i.stack[-1].node_id > 1000 and 1 <= i.stack[0].node_id <= 4
    assert hop_counts == {2, 4}


def test_own_decoder_round_trips_and_refuses_other_variants():
    frame = _golden_frame()
    stack, rest = decode(frame[ETH_IP_UDP:])
    assert rest == b"payload!" and [h.node_id for h in stack.hops] == [2, 1001]
    with pytest.raises(NotIntMd):
        decode(b"\x24" + frame[ETH_IP_UDP + 1:])  # shim type 2 (Destination)
    with pytest.raises(NotIntMd):
        decode(frame[ETH_IP_UDP: ETH_IP_UDP + 20])  # shim says 11 words, only 4 follow


def test_remaining_hop_count_zero_sets_e_and_pushes_nothing():
    stack = IntStack(original_port=1, remaining_hop_count=1).push(Hop(1, 0, 0, 0, 0, 0))
    full = stack.push(Hop(2, 0, 0, 0, 0, 0))
    assert len(full.hops) == 1 and full.hop_count_exceeded and full.remaining_hop_count == 0
    wire = IntShimMd(full.encode())
    assert (wire.e, wire.length, len(wire.stack)) == (1, 3 + 4, 1)


def test_hop_fields_refuse_values_wider_than_the_spec():
    with pytest.raises(ValueError):
        Hop(1, 0, 0, 0, 0, 1 << 24)  # occupancy is 24 bits
    with pytest.raises(ValueError):
        Hop(1, 1 << 16, 0, 0, 0, 0)  # level-1 ports are 16 bits


def test_pipeline_reads_the_top_record_where_the_encoder_put_it():
    spec_text = (ROOT / "p4" / "int" / "int.p4").read_text()
    app = compile_text(spec_text, "switch_id == 2 : fwd(1)\n", name="int").application
    hop = Hop(7, 11, 12, 345, 2, 6789)
    payload = IntStack(original_port=9, remaining_hop_count=4).push(hop).encode()
    want = {"int_hop.switch_id": 7, "int_hop.ingress_port": 11, "int_hop.egress_port": 12,
            "int_hop.hop_latency": 345, "int_hop.queue_occupancy": 6789}
    assert app.udp_port == 1337 and app.framing == "single"
    for name, f in app.fields.items():
        bits = int.from_bytes(payload, "big") >> (8 * len(payload) - f.bit_offset - f.width)
        assert bits & ((1 << f.width) - 1) == want[name], name


def test_json_rendering_of_a_report():
    from apps.int_events.kafka_view import SCHEMA, render_json

    pkt = next(iter(Fabric(seed=1).packets(1)))
    report = pkt.frame[ETH_IP_UDP:]
    doc = render_json(report)
    assert doc["packet"] == 0 and doc["original_port"] == pkt.flow.dst_port
    assert [h["node_id"] for h in doc["hops"]] == [h.node_id for h in pkt.stack.hops]
    # The view's schema reads the top record's bytes where the JSON says they are.
    fields = dict(f.split("=bytes:") for f in SCHEMA.split(","))
    off, n = map(int, fields["hop_latency:u32"].split(":"))
    assert int.from_bytes(report[off: off + n], "big") == doc["hops"][0]["hop_latency"]
    off, n = map(int, fields["queue_occupancy:u32"].split(":"))
    assert int.from_bytes(report[off: off + n], "big") == doc["hops"][0]["queue_occupancy"]
