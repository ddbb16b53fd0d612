"""The fabric's choice of a physical up port, shared by the software switch and the P4 program.

A switch of a network names its up ports as one logical port (`LOGICAL_UP`); a copy for it
leaves by `up[up_hash(frame) % len(up)]`, `frame` being the packet as it arrived.
`switch.fabric_egress` applies this in the software switch; the P4 program's fabric variant
(`compiler.p4.fabric`) hashes the fields `HASHED` with bmv2's `HashAlgorithm.crc32`, which is
zlib's CRC-32 of the fields of the valid headers, big-endian, concatenated (bmv2 skips the
fields of a header the parser did not extract). `hash_input` is what that parser extracts.
"""

from __future__ import annotations

import zlib

LOGICAL_UP = 511

# The fields the up-port choice hashes, in order: (header, field, bytes). The program's
# field list is built from this tuple, so the two cannot drift apart.
HASHED = (("ipv4", "src_addr", 4), ("ipv4", "dst_addr", 4), ("ipv4", "identification", 2),
          ("udp", "src_port", 2), ("udp", "dst_port", 2))


def hash_input(frame: bytes) -> bytes:
    """The bytes the program's parser would hand to the hash: the IPv4 fields if it extracted
    an IPv4 header, the UDP ports if it extracted UDP (protocol 17, not a fragment)."""
    if len(frame) < 34 or frame[12] != 0x08 or frame[13] != 0x00:
        return b""  # not IPv4, or too short for its header: nothing extracted
    ihl = frame[14] & 0x0F
    # source and destination address (contiguous at 26..34), then the identification
    if ihl < 5:
        return frame[26:34] + frame[18:20]  # the parser accepts without options or UDP
    udp = 14 + 4 * ihl
    # protocol 17; neither more fragments (flag 0x20) nor a fragment offset (13 bits)
    if frame[23] == 17 and not frame[20] & 0x3F and not frame[21] and len(frame) >= udp + 8:
        return frame[26:34] + frame[18:20] + frame[udp:udp + 4]
    return frame[26:34] + frame[18:20]


def up_hash(frame: bytes) -> int:
    return zlib.crc32(hash_input(frame))
