"""Kafka records as fixed-width UDP packets, and back.

Every record becomes one or more Ethernet/IPv4/UDP packets to the Kafka application's port
(`p4/kafka/kafka.p4`, `@udp_port`), each holding the camus Kafka header and a fragment of the
encoded record. All fragments of a record carry the same header but for the fragment index,
so the switch gives every fragment the same forwarding decision; the receiving endpoint
reassembles. The header layout below is checked against kafka.p4 by the tests, so the two
cannot drift apart.

A record whose encoding is larger than `MAX_RECORD` (what reassembly holds for one record),
or that the encoding cannot represent, crosses the switch as one *by-reference* packet: the
same header with fragment count 0 (`BY_REFERENCE`) and no body. Its forwarding decision is
the record's own, since the switch decides on the header alone; the endpoint that receives
it takes the record from the sender, which keeps every record it sent until the target's
report (`shim.datapath`). So a view delivers every record its source accepted, whatever its
size, and a 95 MiB record costs one packet, not 68,000.

Record encoding inside the packets (big-endian): timestamp i64, key (i32 length, -1 = null,
bytes), value (likewise), header count u16, then per header: name (u16 length, UTF-8) and
value (i32 length, -1 = null, bytes).

The header also carries the record's timestamp, the time the switch's state windows run on
(milliseconds modulo `TIME_MODULUS`, a whole number of days that fits the switch's 48-bit
microseconds: so windows of a second, a minute, an hour or a day start where UTC's do, and
the wrap every 8.9 years falls between windows), and two average lanes. Packets fed to a stateful view
(docs/stateful.md, "Kafka views") carry in the lanes the values of the schema fields the
view averages (`lanes`: their slots) and are `single`: one packet per record, the record
in it or by reference, never fragments, because every packet is one message to the switch's
state and a record must update it once.
"""

from __future__ import annotations

import functools
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from shim.protocol.native import native as _native  # None: `packets` frames every record

# topic, partition, offset, frag index, frag count, length, slots, timestamp, average lanes
HEADER = struct.Struct(">IIQHHI8QQII")
LANES = 2  # average lanes (kafka.avg0, kafka.avg1)
# The header's timestamp is the record's, in ms, modulo this: 3,257 days, the most whole days
# whose microseconds fit the 48 bits of a switch's timestamp (docs/stateful.md, "Kafka views").
TIME_MODULUS = 3257 * 86_400_000
ETH_IP_UDP = 14 + 20 + 8
DEFAULT_FRAGMENT = 1400  # record bytes per packet: whole packets stay under a 1500-byte MTU
MAX_RECORD = (1 << 20) + (1 << 19)  # what reassembly accepts (1.5 MiB), beyond Kafka's 1 MiB default
BY_REFERENCE = 0  # the fragment count of a record's only packet when the record is not in it


@dataclass(frozen=True)
class Record:
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def slots_of(frames: bytes, lengths: bytes) -> dict[int, tuple[int, ...]]:
    """offset -> the slot values a record's packets carry (what the switch matched on), for
    packed frames (`frames` one after another, `lengths` one u32 LE each) as framed here."""
    out: dict[int, tuple[int, ...]] = {}
    view, pos = memoryview(frames), 0
    for (n,) in struct.iter_unpack("<I", lengths):
        start = pos + 14 + (view[pos + 14] & 0x0F) * 4 + 8  # past Ethernet, IPv4, UDP
        _, _, offset, index, _, _, *rest = HEADER.unpack_from(view, start)
        if index == 0:
            out[offset] = tuple(rest[:8])
        pos += n
    return out


@dataclass(frozen=True)
class Addressing:
    src_mac: bytes = bytes.fromhex("02cafe000001")
    dst_mac: bytes = bytes.fromhex("02cafe000002")
    src_ip: bytes = bytes([10, 0, 0, 1])
    dst_ip: bytes = bytes([10, 0, 0, 2])
    src_port: int = 40000
    dst_port: int = 9094


def encode_record(r: Record) -> bytes:
    out = [struct.pack(">q", r.timestamp), _blob(r.key), _blob(r.value),
           struct.pack(">H", len(r.headers))]
    for name, value in r.headers:
        raw = name.encode()
        out.append(struct.pack(">H", len(raw)) + raw)
        out.append(_blob(value))
    return b"".join(out)


def decode_record(data: bytes) -> Record:
    (ts,) = struct.unpack_from(">q", data, 0)
    key, pos = _unblob(data, 8)
    value, pos = _unblob(data, pos)
    (n,) = struct.unpack_from(">H", data, pos)
    pos += 2
    headers = []
    for _ in range(n):
        (ln,) = struct.unpack_from(">H", data, pos)
        name = data[pos + 2:pos + 2 + ln].decode()
        hv, pos = _unblob(data, pos + 2 + ln)
        headers.append((name, hv))
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} trailing bytes after the record")
    return Record(ts, key, value, tuple(headers))


def _blob(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _unblob(data: bytes, pos: int) -> tuple[bytes | None, int]:
    (ln,) = struct.unpack_from(">i", data, pos)
    pos += 4
    if ln < 0:
        return None, pos
    if pos + ln > len(data):
        raise ValueError("truncated record")
    return data[pos:pos + ln], pos + ln


def lane_values(slots, lanes: tuple[int, ...] | None) -> tuple[int, ...]:
    """The average lanes' values: each lane's slot, in 32 bits (an averaged schema field has
    at most 32); 0 for a lane no field takes."""
    lanes = lanes or ()
    return tuple(slots[lanes[i]] & 0xFFFF_FFFF if i < len(lanes) else 0 for i in range(LANES))


def packets(topic_id: int, partition: int, offset: int, slots: list[int], record: Record,
            addr: Addressing = Addressing(), fragment: int = DEFAULT_FRAGMENT,
            lanes: tuple[int, ...] | None = None, single: bool = False) -> list[bytes]:
    """The record as packets: same header on every fragment but the fragment index; one
    by-reference packet if the record is larger than MAX_RECORD or has no encoding, or,
    `single`, larger than one fragment. `lanes`: the slots the average lanes carry."""
    frame = _framer(addr)
    tail = (record.timestamp % TIME_MODULUS, *lane_values(slots, lanes))
    try:
        body = encode_record(record)
    except (struct.error, UnicodeEncodeError):  # a header beyond its u16 fields, or no UTF-8
        body = None
    count = max(1, -(-len(body) // fragment)) if body is not None else 0
    if body is None or len(body) > MAX_RECORD or count > 0xFFFF or single and count > 1:
        return [frame(HEADER.pack(topic_id, partition, offset, 0, BY_REFERENCE, 0, *slots, *tail))]
    if count == 1:  # the common case, without slicing
        return [frame(HEADER.pack(topic_id, partition, offset, 0, 1, len(body), *slots, *tail)
                      + body)]
    return [frame(HEADER.pack(topic_id, partition, offset, i, count, len(body), *slots, *tail)
                  + body[i * fragment:(i + 1) * fragment]) for i in range(count)]


def frame_records(topic_id: int, partition: int, records, slots: list[list[int]] | bytes | None,
                  shift: int = 0, addr: Addressing = Addressing(),
                  fragment: int = DEFAULT_FRAGMENT, lanes: tuple[int, ...] | None = None,
                  single: bool = False) -> tuple[bytes, bytes, bytes] | None:
    """`packets` for many records at once, by the extension (shim/native/src/reframe.rs):
    the frames of every record in order, packed as `Switch.process_packed` takes them, as
    (frames, u32 LE length per frame, u32 LE record index per frame). `records` are
    `shim.protocol.records.Record`s numbered `r.offset + shift`; `slots` holds each record's
    eight slot values (or all of them packed as u64 LE, `Schema.extract_packed`; None: all 0). None without the extension, or where `packets` must
    decide (anything it would raise on, or not read the way the extension reads it).
    `lanes`, `single`: as `packets` takes them."""
    if _native is None:
        return None
    return _native.frame_records(records, slots, topic_id, partition, shift,
                                 _framer(addr)(b""), fragment, _lane_slots(lanes), single)


def frame_body(topic_id: int, partition: int, batch, paths, shift: int = 0,
               addr: Addressing = Addressing(), fragment: int = DEFAULT_FRAGMENT,
               lanes: tuple[int, ...] | None = None, single: bool = False):
    """`frame_records` of a batch left unbuilt (`decode_batches(records=False)`), straight
    from its records section: `batch_records(batch)` framed with `shift`, slots read by
    `paths` (`Schema.packed_paths()`; None: all 0). (frames, lengths, owner, misses), or
    None where the caller must build the records and take the `frame_records` path."""
    if _native is None or batch.body is None:
        return None
    json_paths, fields = paths if paths is not None else (None, [])
    section = (batch.body, batch.record_count, batch.base_offset, batch.base_timestamp)
    return _native.frame_body(section, json_paths, fields, topic_id, partition, shift,
                              _framer(addr)(b""), fragment, _lane_slots(lanes), single)


def _lane_slots(lanes: tuple[int, ...] | None) -> list[int]:
    """The extension's lane argument: per lane its slot, -1 for a lane no field takes."""
    lanes = lanes or ()
    return [lanes[i] if i < len(lanes) else -1 for i in range(LANES)]


@functools.lru_cache(maxsize=16)
def _framer(a: Addressing) -> Callable[[bytes], bytes]:
    """Ethernet/IPv4/UDP around a payload, for one addressing.

    Only the length fields and the IPv4 checksum depend on the payload, so the checksum of
    the constant words is summed once here and each frame adds its total length to it
    (RFC 1071 one's-complement sums are order-free). The UDP checksum is 0, which IPv4
    allows.
    """
    eth = a.dst_mac + a.src_mac + b"\x08\x00"
    fixed = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 0, 0, 0x4000, 64, 17, 0, a.src_ip, a.dst_ip)
    base = sum(struct.unpack(">10H", fixed))
    ip_head, ip_tail = struct.Struct(">BBH"), struct.Struct(">HHBBH")
    addrs = a.src_ip + a.dst_ip
    udp = struct.Struct(">HHHH")

    def frame(payload: bytes) -> bytes:
        udp_len = 8 + len(payload)
        total = 20 + udp_len
        csum = base + total
        csum = (csum & 0xFFFF) + (csum >> 16)
        csum = ~((csum & 0xFFFF) + (csum >> 16)) & 0xFFFF
        return b"".join((eth, ip_head.pack(0x45, 0, total), ip_tail.pack(0, 0x4000, 64, 17, csum),
                         addrs, udp.pack(a.src_port, a.dst_port, udp_len, 0), payload))

    return frame


def ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclass
class Reassembler:
    """Collects fragments into records; bounded, and counts what it had to give up on."""

    max_pending: int = 4096
    pending: OrderedDict = field(default_factory=OrderedDict)
    malformed: int = 0
    evicted: int = 0

    def push(self, frame: bytes) -> tuple[int, int, int, Record | None] | None:
        """(topic, partition, offset, record) once the frame completes a record, else None;
        the record is None for a by-reference packet (the sender holds the record)."""
        if len(frame) < ETH_IP_UDP + HEADER.size:
            self.malformed += 1
            return None
        ihl = (frame[14] & 0x0F) * 4
        start = 14 + ihl + 8
        try:
            topic, part, off, index, count, length, *_ = HEADER.unpack_from(frame, start)
        except struct.error:
            self.malformed += 1
            return None
        chunk = frame[start + HEADER.size:]
        if count == BY_REFERENCE and index == 0 and length == 0 and not chunk:
            return topic, part, off, None
        if count == 0 or index >= count or length > MAX_RECORD:
            self.malformed += 1
            return None
        key = (topic, part, off)
        if count == 1:
            return self._finish(key, chunk, length)
        parts = self.pending.get(key)
        if parts is None:
            if len(self.pending) >= self.max_pending:
                self.pending.popitem(last=False)
                self.evicted += 1
            parts = self.pending[key] = [None] * count
        if len(parts) != count:
            self.malformed += 1
            return None
        parts[index] = chunk
        if any(p is None for p in parts):
            return None
        del self.pending[key]
        return self._finish(key, b"".join(parts), length)

    def _finish(self, key, body: bytes, length: int):
        if len(body) != length:
            self.malformed += 1
            return None
        try:
            return (*key, decode_record(body))
        except (ValueError, struct.error, UnicodeDecodeError):
            self.malformed += 1
            return None
