"""`switch.fabric_egress`: the per-copy decisions of a switch inside a network of switches."""

from __future__ import annotations

import zlib

import pytest

from switch.fabric_egress import LOGICAL_UP, FabricEgress, hash_input, parse_up_ports, up_hash
from switch.packet import udp_frame


def test_never_back_out_of_the_ingress_port():
    e = FabricEgress((3, 4))
    assert e.port(1, 1, b"x") is None and e.port(1, 2, b"x") == 2


def test_the_up_port_is_one_physical_port_chosen_by_the_packets_addresses_and_ports():
    e = FabricEgress((3, 4))
    frames = [udp_frame(bytes(8), src_port=1000 + i, dst_port=1234) for i in range(40)]
    chosen = [e.port(1, LOGICAL_UP, f) for f in frames]
    assert chosen == [(3, 4)[zlib.crc32(f[26:34] + f[18:20] + f[34:38]) % 2] for f in frames]
    assert set(chosen) == {3, 4}  # both are used
    assert chosen == [e.port(2, LOGICAL_UP, f) for f in frames]  # deterministic
    # the payload does not matter: every copy of a packet, pruned or not, takes one path
    assert [e.port(1, LOGICAL_UP, f + b"more") for f in frames] == chosen


def test_the_hash_reads_what_the_p4_parser_extracts():
    frame = udp_frame(b"payload", src_port=7, dst_port=9)
    assert hash_input(frame) == frame[26:34] + frame[18:20] + frame[34:38]
    with_options = udp_frame(b"payload", src_port=7, dst_port=9, ip_options=b"\x01\x01\x01\x00")
    assert hash_input(with_options)[-4:] == (7).to_bytes(2, "big") + (9).to_bytes(2, "big")
    fragment = frame[:20] + b"\x20" + frame[21:]  # more fragments: UDP is not extracted
    assert hash_input(fragment) == frame[26:34] + frame[18:20]
    assert hash_input(frame[:12] + b"\x86\xdd" + frame[14:]) == b"" and up_hash(b"") == 0


def test_a_packet_from_above_never_goes_up_again():
    e = FabricEgress((3, 4))
    assert e.port(3, LOGICAL_UP, b"x") is None and e.port(4, LOGICAL_UP, b"y") is None
    assert e.port(3, 1, b"x") == 1  # but down it goes


def test_a_core_has_no_up_ports():
    assert FabricEgress(()).port(1, LOGICAL_UP, b"x") == LOGICAL_UP  # unbound: dropped by Ports


@pytest.mark.parametrize("text, ports", [("3,4", (3, 4)), ("", ()), (" 7 ", (7,))])
def test_up_port_lists(text, ports):
    assert parse_up_ports(text) == ports


@pytest.mark.parametrize("text", ["511", "-1", "a"])
def test_bad_up_port_lists(text):
    with pytest.raises(ValueError):
        parse_up_ports(text)
