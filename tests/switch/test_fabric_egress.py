"""`switch.fabric_egress`: the per-copy decisions of a switch inside a network of switches."""

from __future__ import annotations

import zlib

import pytest

from switch.fabric_egress import LOGICAL_UP, FabricEgress, parse_up_ports


def test_never_back_out_of_the_ingress_port():
    e = FabricEgress((3, 4))
    assert e.port(1, 1, b"x") is None and e.port(1, 2, b"x") == 2


def test_the_up_port_is_one_physical_port_chosen_by_the_frame():
    e = FabricEgress((3, 4))
    frames = [bytes([i]) * 20 for i in range(40)]
    chosen = [e.port(1, LOGICAL_UP, f) for f in frames]
    assert chosen == [(3, 4)[zlib.crc32(f) % 2] for f in frames]
    assert set(chosen) == {3, 4}  # both are used
    assert chosen == [e.port(2, LOGICAL_UP, f) for f in frames]  # deterministic


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
