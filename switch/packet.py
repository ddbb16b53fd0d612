"""Ethernet/IPv4/UDP and MoldUDP64 byte layouts: building, reading and the IPv4 checksum.

The reference data plane rebuilds its egress copies with these helpers; tests, the benchmark
and the apps use them to make input frames and to read copies back. Everything here is pure
byte manipulation with no switch state.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

ETH_HEADER = 14
ETHERTYPE_IPV4 = 0x0800
IPPROTO_UDP = 17
UDP_HEADER = 8
MOLD_HEADER = 20
MOLD_NO_BLOCKS = (0, 0xFFFF)  # heartbeat and end-of-session carry no message blocks

DEFAULT_SRC_MAC = bytes.fromhex("020000000001")
DEFAULT_DST_MAC = bytes.fromhex("01005e000001")


def ipv4_checksum(header: bytes) -> int:
    """RFC 791 header checksum of `header` with its checksum field taken as zero."""
    if len(header) % 2:
        header += b"\0"
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    total -= (header[10] << 8) | header[11]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_address(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def udp_frame(
    payload: bytes,
    *,
    dst_port: int,
    src_port: int = 40000,
    src_ip: int = 0x0A000001,
    dst_ip: int = 0xE8000001,
    ttl: int = 64,
    ip_options: bytes = b"",
    src_mac: bytes = DEFAULT_SRC_MAC,
    dst_mac: bytes = DEFAULT_DST_MAC,
    udp_checksum: int = 0,
) -> bytes:
    """An Ethernet frame carrying `payload` in UDP over IPv4 with correct lengths and checksum."""
    ihl = 5 + len(ip_options) // 4
    total = ihl * 4 + UDP_HEADER + len(payload)
    ip = bytearray(struct.pack("!BBHHHBBHII", 0x40 | ihl, 0, total, 0, 0x4000, ttl, IPPROTO_UDP, 0, src_ip, dst_ip))
    ip += ip_options
    struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
    udp = struct.pack("!HHHH", src_port, dst_port, UDP_HEADER + len(payload), udp_checksum)
    return dst_mac + src_mac + struct.pack("!H", ETHERTYPE_IPV4) + bytes(ip) + udp + payload


def mold_payload(session: bytes, sequence: int, blocks: list[bytes], count: int | None = None) -> bytes:
    """A MoldUDP64 packet: header (session, sequence, count) then length-prefixed blocks."""
    assert len(session) == 10
    n = len(blocks) if count is None else count
    return session + struct.pack("!QH", sequence, n) + b"".join(struct.pack("!H", len(b)) + b for b in blocks)


@dataclass(frozen=True)
class UdpView:
    """The parts of an Ethernet/IPv4/UDP frame the tests look at."""

    src_ip: int
    dst_ip: int
    src_port: int
    dst_port: int
    udp_length: int
    udp_checksum: int
    ip_total_length: int
    ip_checksum_ok: bool
    payload: bytes


def read_udp(frame: bytes) -> UdpView:
    """Parse a well-formed Ethernet/IPv4/UDP frame (ValueError otherwise)."""
    if len(frame) < ETH_HEADER + 20 or struct.unpack_from("!H", frame, 12)[0] != ETHERTYPE_IPV4:
        raise ValueError("not an IPv4 frame")
    ihl = (frame[ETH_HEADER] & 0x0F) * 4
    total, = struct.unpack_from("!H", frame, ETH_HEADER + 2)
    ip = frame[ETH_HEADER: ETH_HEADER + ihl]
    if frame[ETH_HEADER + 9] != IPPROTO_UDP:
        raise ValueError("not UDP")
    src_ip, dst_ip = struct.unpack_from("!II", frame, ETH_HEADER + 12)
    l4 = ETH_HEADER + ihl
    sport, dport, ulen, csum = struct.unpack_from("!HHHH", frame, l4)
    return UdpView(src_ip, dst_ip, sport, dport, ulen, csum, total,
                   ipv4_checksum(ip) == struct.unpack_from("!H", ip, 10)[0],
                   frame[l4 + UDP_HEADER: l4 + ulen])


def read_mold(payload: bytes) -> tuple[bytes, int, list[bytes]]:
    """(session, sequence, blocks) of a well-formed MoldUDP64 payload (ValueError otherwise)."""
    if len(payload) < MOLD_HEADER:
        raise ValueError("short MoldUDP64 header")
    session = payload[:10]
    seq, count = struct.unpack_from("!QH", payload, 10)
    blocks, pos = [], MOLD_HEADER
    for _ in range(0 if count in MOLD_NO_BLOCKS else count):
        if pos + 2 > len(payload):
            raise ValueError("truncated block length")
        n, = struct.unpack_from("!H", payload, pos)
        if pos + 2 + n > len(payload):
            raise ValueError("truncated block")
        blocks.append(payload[pos + 2: pos + 2 + n])
        pos += 2 + n
    return session, seq, blocks
