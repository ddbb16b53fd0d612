"""INT 2.1 layers for scapy, declared field by field from wire-formats.md 3.3-3.5.

scapy has no INT layers; these are written from the spec's tables (bit widths in spec
order), independently of apps/int_events/int_md.py, so that parsing with them checks the
encoder rather than repeating it.
"""

from __future__ import annotations

from scapy.fields import BitField, FieldLenField, PacketListField
from scapy.packet import Packet


class IntHopRecord(Packet):
    """Spec 3.5, bits 0-3 of the instruction bitmap, in bit order."""
    name = "INT hop (bitmap 0xF000)"
    fields_desc = [BitField("node_id", 0, 32), BitField("l1_ingress", 0, 16), BitField("l1_egress", 0, 16),
                   BitField("hop_latency", 0, 32), BitField("queue_id", 0, 8), BitField("queue_occupancy", 0, 24)]

    def extract_padding(self, s):
        return b"", s


class IntShimMd(Packet):
    """Spec 3.3 (shim) then 3.4 (INT-MD header), then Length*4-12 bytes of 16-byte records."""
    name = "INT shim + MD"
    fields_desc = [
        BitField("type", 0, 4), BitField("npt", 0, 2), BitField("shim_reserved", 0, 2),
        FieldLenField("length", None, length_of="stack", fmt="B", adjust=lambda pkt, n: n // 4 + 3),
        BitField("original_port", 0, 16),
        BitField("ver", 0, 4), BitField("d", 0, 1), BitField("e", 0, 1), BitField("m", 0, 1),
        BitField("md_reserved", 0, 12), BitField("hop_ml", 0, 5), BitField("remaining_hop_count", 0, 8),
        BitField("instruction_bitmap", 0, 16), BitField("domain_id", 0, 16),
        BitField("ds_instruction", 0, 16), BitField("ds_flags", 0, 16),
        PacketListField("stack", [], IntHopRecord, length_from=lambda pkt: pkt.length * 4 - 12),
    ]
