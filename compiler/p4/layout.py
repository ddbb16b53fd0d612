"""Where each application's data lives in the generated program: header types, instances, metadata.

One `AppLayout` per IR application names everything the parser, the controls and the
deparser refer to, so the three sections cannot disagree. A `single` application has one
instance per message header (`hdr.int_hop`). A `moldudp64` application has its packet
header (`hdr.mold`) and, for each of `slots` message blocks, a length header
(`hdr.itch_len_3`), the message headers when the block is a subscription message
(`hdr.itch_order_3`) followed by the rest of the block (`hdr.itch_tail_3`, variable
length), or the whole block as opaque bytes otherwise (`hdr.itch_raw_3`). The message under
evaluation is copied into metadata (`meta.msg_itch_order_stock`) because a table's key is fixed
while the slot changes from pass to pass (docs/p4.md, "Several messages per packet"); each
slot's decision is kept in metadata too (`meta.itch_dkind_3`, and its port bitmap
`meta.itch_dports_3`), which egress tests against each copy's port.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4rt.names import DEFAULT_SLOTS, ident
from pipeline.model import Application

# A MoldUDP64 block longer than this is not parsed: it and every later block stay payload.
# The largest ITCH 5.0 message is 50 bytes (NOII); 64 leaves room and keeps varbits small.
MAX_BLOCK_BYTES = 64


@dataclass(frozen=True)
class Field:
    qname: str  # IR name, "header.field": the control-plane name of the key element
    header: str  # IR header name
    name: str  # IR field name
    width: int


class AppLayout:
    def __init__(self, app: Application, slots: int = DEFAULT_SLOTS):
        self.app = app
        self.name = ident(app.name)
        self.port = app.udp_port
        self.framing = app.framing
        if self.framing not in ("single", "moldudp64"):  # the IR's "dns": answerDNS
            raise ValueError(f"application {app.name!r}: framing {app.framing!r} has no P4 program "
                             f"(it runs on camus's software switch); the P4 target emits single "
                             f"and moldudp64 applications")
        self.message_bytes = app.message_bytes
        self.headers = app.message.headers
        for h in self.headers + ((app.packet_header,) if app.packet_header else ()):
            # p4c-bm2-ss: "BMv2 target only supports headers with fields totaling a multiple
            # of 8 bits" (a fatal target error).
            if sum(f.width for f in h.fields) % 8:
                raise ValueError(f"application {app.name!r}: header {h.name!r} is not a whole "
                                 f"number of bytes, which bmv2 refuses")
        if sum(h.bits for h in self.headers) != 8 * self.message_bytes:
            raise ValueError(f"application {app.name!r}: message headers do not add up to "
                             f"{self.message_bytes} bytes")
        self.type_field = app.type_field
        self.types = list(app.types)
        self.type_offset = app.type_field.bit_offset if app.type_field else 0
        self.type_width = app.type_field.width if app.type_field else 0
        widths = {f"{h.name}.{f.name}": f.width for h in self.headers for f in h.fields}
        self.fields = {}
        for qname in app.fields:
            header, name = qname.split(".", 1)
            self.fields[qname] = Field(qname, header, name, widths[qname])
        self.stages = app.stages
        self.leaf_table = app.leaf_table
        self.lanes = app.all_lanes  # (stages, leaf table) chains, walked one after the other
        self.packet_header = app.packet_header
        self.slots = slots if self.framing == "moldudp64" else 1
        if self.framing == "moldudp64":
            widths = [f.width for f in self.packet_header.fields]
            if widths != [80, 64, 16]:
                raise ValueError(f"application {app.name!r}: a MoldUDP64 header is session 80, "
                                 f"sequence 64, count 16 bits, not {widths}")
            if not 1 <= slots <= 32:
                raise ValueError("between 1 and 32 message slots per packet")
        self.block_bytes = max(MAX_BLOCK_BYTES, self.message_bytes)

    # ---- names ----

    def htype(self, header: str) -> str:
        return ident(header) + "_t"

    def msg_instance(self, header: str, slot: int | None = None) -> str:
        """hdr.<h> (single) or hdr.<h>_<slot> (moldudp64)."""
        return ident(header) if slot is None else f"{ident(header)}_{slot}"

    def field_ref(self, f: Field, slot: int | None = None) -> str:
        return f"hdr.{self.msg_instance(f.header, slot)}.{ident(f.name)}"

    def key_expr(self, f: Field) -> str:
        """What a stage table matches: the header field, or its metadata copy (moldudp64)."""
        if self.framing == "single":
            return self.field_ref(f)
        return f"meta.msg_{ident(f.header)}_{ident(f.name)}"

    def meta(self, what: str) -> str:
        return f"{self.name}_{what}"

    @property
    def mold(self) -> str:
        return ident(self.packet_header.name)

    def mold_field(self, i: int) -> str:
        return ident(self.packet_header.fields[i].name)

    def len_instance(self, slot: int) -> str:
        return f"{self.name}_len_{slot}"

    def tail_instance(self, slot: int) -> str:
        return f"{self.name}_tail_{slot}"

    def raw_instance(self, slot: int) -> str:
        return f"{self.name}_raw_{slot}"

    @property
    def tail_bits(self) -> int:
        return 8 * (self.block_bytes - self.message_bytes)

    def slot_instances(self, slot: int) -> list[str]:
        """Every header instance of one block, in wire order (the deparser's order)."""
        out = [self.len_instance(slot)] + [self.msg_instance(h.name, slot) for h in self.headers]
        if self.tail_bits:
            out.append(self.tail_instance(slot))
        return out + [self.raw_instance(slot)]
