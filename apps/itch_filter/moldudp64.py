"""MoldUDP64 packets: downstream (data, heartbeat, end of session) and request packets.

Downstream: a 20-byte header (session 10 bytes ASCII, sequence number u64 of the first
message, message count u16) and `count` blocks of a u16 length and that many bytes. Count 0
is a heartbeat and 0xFFFF the end of session; both carry no blocks and their sequence number
is the next one the server will use. A request is the same 20-byte header alone, asking for
`count` messages from `sequence` (wire-formats.md section 2).

camus's filtered copies keep every kept message's sequence number by leaving zero-length
blocks where unkept messages were (docs/pipeline-ir.md, "Message semantics"), so a decoded
packet is a list of blocks in which `b""` means "a message that is not yours".

Pure functions over bytes (the receivers strip Ethernet/IPv4/UDP with `switch.packet`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

HEADER = struct.Struct("!10sQH")
HEADER_BYTES = HEADER.size  # 20
HEARTBEAT = 0
END_OF_SESSION = 0xFFFF
MAX_BLOCKS = 0xFFFE  # 0xFFFF means end of session, so a data packet holds at most this many
UDP_PORT = 1234  # what the Camus artifacts (and p4/itch/itch.p4) use; Mold has no assigned port


class MoldError(ValueError):
    """Bytes that are not a well-formed MoldUDP64 packet."""


@dataclass(frozen=True)
class Packet:
    session: bytes
    sequence: int
    count: int  # as on the wire: 0 heartbeat, 0xFFFF end of session, else len(blocks)
    blocks: tuple[bytes, ...] = ()

    @property
    def is_heartbeat(self) -> bool:
        return self.count == HEARTBEAT

    @property
    def is_end_of_session(self) -> bool:
        return self.count == END_OF_SESSION

    @property
    def next_sequence(self) -> int:
        """The sequence number of the message after this packet's last one."""
        return self.sequence + len(self.blocks)


def session_id(name: str | bytes) -> bytes:
    """A 10-byte session field: ASCII, space-padded like the other Nasdaq alpha fields."""
    raw = name.encode("ascii") if isinstance(name, str) else name
    if len(raw) > 10:
        raise MoldError(f"session {raw!r} is longer than 10 bytes")
    return raw.ljust(10, b" ")


def encode(session: bytes, sequence: int, blocks: list[bytes] | tuple[bytes, ...]) -> bytes:
    """A data packet carrying `blocks` (messages) numbered from `sequence`."""
    if not 0 < len(blocks) <= MAX_BLOCKS:
        raise MoldError(f"a data packet holds 1..{MAX_BLOCKS} blocks, got {len(blocks)}")
    out = [HEADER.pack(session, sequence, len(blocks))]
    for b in blocks:
        out.append(struct.pack("!H", len(b)))
        out.append(b)
    return b"".join(out)


def heartbeat(session: bytes, next_sequence: int) -> bytes:
    return HEADER.pack(session, next_sequence, HEARTBEAT)


def end_of_session(session: bytes, next_sequence: int) -> bytes:
    return HEADER.pack(session, next_sequence, END_OF_SESSION)


def request(session: bytes, sequence: int, count: int) -> bytes:
    """A retransmission request for `count` messages from `sequence` (exactly 20 bytes)."""
    if not 0 < count < END_OF_SESSION:
        raise MoldError(f"a request asks for 1..{END_OF_SESSION - 1} messages, got {count}")
    return HEADER.pack(session, sequence, count)


def decode(payload: bytes) -> Packet:
    """A downstream packet. Bytes after the last block are ignored (some servers pad)."""
    if len(payload) < HEADER_BYTES:
        raise MoldError(f"MoldUDP64 header is {HEADER_BYTES} bytes, got {len(payload)}")
    session, seq, count = HEADER.unpack_from(payload)
    if count in (HEARTBEAT, END_OF_SESSION):
        return Packet(session, seq, count)
    blocks, pos = [], HEADER_BYTES
    for _ in range(count):
        if pos + 2 > len(payload):
            raise MoldError(f"packet ends before block {len(blocks)}'s length")
        n, = struct.unpack_from("!H", payload, pos)
        if pos + 2 + n > len(payload):
            raise MoldError(f"block {len(blocks)} runs past the end of the packet")
        blocks.append(payload[pos + 2: pos + 2 + n])
        pos += 2 + n
    return Packet(session, seq, count, tuple(blocks))


def decode_request(payload: bytes) -> tuple[bytes, int, int]:
    """(session, first sequence, count) of a request packet."""
    if len(payload) != HEADER_BYTES:
        raise MoldError(f"a request is exactly {HEADER_BYTES} bytes, got {len(payload)}")
    session, seq, count = HEADER.unpack(payload)
    if count in (HEARTBEAT, END_OF_SESSION):
        raise MoldError(f"count {count:#x} is not a request")
    return session, seq, count
