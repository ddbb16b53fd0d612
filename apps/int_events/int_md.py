"""INT 2.1 INT-MD over UDP: the shim, the metadata header and the hop stack, as bytes.

The variant is UDP-port signalling with NPT=1 (wire-formats.md 3.2, case 1a): the packet
already had UDP; the INT source puts the 4-byte shim, the 12-byte INT-MD header and the
metadata stack right after the UDP header, saves the original destination port in the shim
and sets the destination port to the INT port (1337, `@udp_port` in p4/int/int.p4). The
original UDP payload follows the stack.

Every record is the one for instruction bitmap 0xF000 (bits 0-3: node id; level-1 ingress
and egress ports; hop latency; queue id + occupancy), Hop ML = 4 words. Nodes push on top,
so the most recent hop comes first. The shim's length counts the MD header and the stack in
words and excludes the shim itself (true since INT 2.0). This module only builds and reads
bytes; who pushes what, and when, is the fabric's business (apps.int_events.fabric).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

INT_UDP_PORT = 1337
SHIM_BYTES = 4
MD_HEADER_BYTES = 12
INT_TYPE_MD = 1
NPT_UDP_PAYLOAD = 1  # the original UDP payload follows the INT stack
INT_VERSION = 2  # the MD header's Ver for INT 2.0 and 2.1
BITMAP_F000 = 0xF000  # node id, L1 ports, hop latency, queue id + occupancy
HOP_ML = 4  # words per record for BITMAP_F000
HOP_BYTES = 4 * HOP_ML
NOT_AVAILABLE = 0xFFFFFFFF  # the spec fills a value a node cannot supply with all ones

_SHIM = struct.Struct("!BBH")
_MD = struct.Struct("!IHHHH")
_HOP = struct.Struct("!IHHII")


@dataclass(frozen=True)
class Hop:
    """One node's record for bitmap 0xF000."""

    node_id: int
    ingress_port: int
    egress_port: int
    hop_latency: int
    queue_id: int
    queue_occupancy: int

    def __post_init__(self) -> None:
        for name, width in (("node_id", 32), ("ingress_port", 16), ("egress_port", 16),
                            ("hop_latency", 32), ("queue_id", 8), ("queue_occupancy", 24)):
            v = getattr(self, name)
            if not 0 <= v < 1 << width:
                raise ValueError(f"{name} {v} does not fit in {width} bits")

    def encode(self) -> bytes:
        return _HOP.pack(self.node_id, self.ingress_port, self.egress_port, self.hop_latency,
                         (self.queue_id << 24) | self.queue_occupancy)

    @classmethod
    def decode(cls, data: bytes, offset: int = 0) -> Hop:
        node, ingress, egress, latency, queue = _HOP.unpack_from(data, offset)
        return cls(node, ingress, egress, latency, queue >> 24, queue & 0xFFFFFF)


@dataclass(frozen=True)
class IntStack:
    """The INT part of a packet: header flags, the stack (most recent hop first) and the
    original destination port the shim saves."""

    original_port: int
    remaining_hop_count: int
    hops: tuple[Hop, ...] = ()
    hop_count_exceeded: bool = False  # E: a node found Remaining Hop Count at 0
    discard: bool = False  # D: the sink drops the packet after taking the metadata
    mtu_exceeded: bool = False  # M

    def push(self, hop: Hop) -> IntStack:
        """What an INT node does on the way out: push its record on top and decrement the
        remaining hop count, or, at 0, push nothing and set E (spec 3.4, stack rules)."""
        if self.remaining_hop_count == 0:
            return replace(self, hop_count_exceeded=True)
        return replace(self, hops=(hop, *self.hops), remaining_hop_count=self.remaining_hop_count - 1)

    @property
    def length_words(self) -> int:
        """The shim's Length: MD header plus stack, in words, the shim itself excluded."""
        return (MD_HEADER_BYTES + HOP_BYTES * len(self.hops)) // 4

    def encode(self) -> bytes:
        shim = _SHIM.pack((INT_TYPE_MD << 4) | (NPT_UDP_PAYLOAD << 2), self.length_words, self.original_port)
        word0 = ((INT_VERSION << 28) | (int(self.discard) << 27) | (int(self.hop_count_exceeded) << 26)
                 | (int(self.mtu_exceeded) << 25) | (HOP_ML << 8) | self.remaining_hop_count)
        md = _MD.pack(word0, BITMAP_F000, 0, 0, 0)  # default domain: no DS instruction or flags
        return shim + md + b"".join(h.encode() for h in self.hops)


class NotIntMd(ValueError):
    """Bytes that are not an INT-MD stack this module reads (another type, bitmap or version)."""


def decode(payload: bytes) -> tuple[IntStack, bytes]:
    """The INT stack at the start of a UDP payload, and the original payload after it."""
    if len(payload) < SHIM_BYTES + MD_HEADER_BYTES:
        raise NotIntMd(f"{len(payload)} bytes: shorter than shim + MD header")
    type_npt, length, original_port = _SHIM.unpack_from(payload, 0)
    if type_npt >> 4 != INT_TYPE_MD or (type_npt >> 2) & 3 != NPT_UDP_PAYLOAD:
        raise NotIntMd(f"shim type/NPT byte {type_npt:#04x}: not INT-MD with NPT=1")
    word0, bitmap, _ds_id, _ds_instruction, _ds_flags = _MD.unpack_from(payload, SHIM_BYTES)
    version, hop_ml = word0 >> 28, (word0 >> 8) & 0x1F
    if version != INT_VERSION or bitmap != BITMAP_F000 or hop_ml != HOP_ML:
        raise NotIntMd(f"version {version}, bitmap {bitmap:#06x}, Hop ML {hop_ml}: not the 0xF000 records")
    end = SHIM_BYTES + 4 * length
    stack_bytes = 4 * length - MD_HEADER_BYTES
    if stack_bytes < 0 or stack_bytes % HOP_BYTES or end > len(payload):
        raise NotIntMd(f"shim length {length} words does not fit whole records in {len(payload)} bytes")
    hops = tuple(Hop.decode(payload, off) for off in range(SHIM_BYTES + MD_HEADER_BYTES, end, HOP_BYTES))
    stack = IntStack(original_port, word0 & 0xFF, hops,
                     hop_count_exceeded=bool(word0 >> 26 & 1), discard=bool(word0 >> 27 & 1),
                     mtu_exceeded=bool(word0 >> 25 & 1))
    return stack, payload[end:]


def top_hop_values(hop: Hop) -> dict[str, int]:
    """The top record as the `header.field` values p4/int/int.p4 names (what rules test)."""
    return {"int_hop.switch_id": hop.node_id, "int_hop.ingress_port": hop.ingress_port,
            "int_hop.egress_port": hop.egress_port, "int_hop.hop_latency": hop.hop_latency,
            "int_hop.queue_id": hop.queue_id, "int_hop.queue_occupancy": hop.queue_occupancy}
