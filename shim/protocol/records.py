"""Record batches, magic v2 (KIP-98): decoding with CRC-32C checks, encoding, validation.

Layout (61-byte header, big-endian):

    base_offset i64 | batch_length i32 | partition_leader_epoch i32 | magic i8 |
    crc u32 | attributes i16 | last_offset_delta i32 | base_timestamp i64 |
    max_timestamp i64 | producer_id i64 | producer_epoch i16 | base_sequence i32 |
    record_count i32 | records (compressed as one block when attributes & 7)

batch_length counts from partition_leader_epoch to the end; the CRC-32C covers
attributes to the end, so base_offset and the leader epoch can be patched in place
(`patch_base_offset`) without recomputing it: the produce path assigns offsets that
way and stores batches as the producer compressed them.

Each record: length varint | attributes i8 | timestamp_delta varlong |
offset_delta varint | key (varint length, -1 = null) | value (same) |
header count varint | headers (key varint-length string, value nullable).

Written here rather than taken from kio.records, which neither compresses nor keeps
millisecond timestamps. Legacy message sets (magic 0/1) are not decoded: Produce
v3+, the only versions registered, requires magic 2.

The records section is walked by the `shim.protocol._native` extension when it is built
(`check_records`, `decode_records`, shim/native/src/records.rs: ~30x faster than
Python; `shim.protocol.native` loads it, or warns once that it cannot); `_decode_records_py`
is the reference. The extension only ever accepts what
the reference accepts, with the same records; on anything else it answers None and the
reference runs, so errors (messages and Kafka codes) are always the reference's.
`decode_batches(records=False)` validates the records without building them (the
produce path on a topic nobody subscribes to needs none); `batch_records` builds them
later from the batch's kept body.
"""

from __future__ import annotations

import dataclasses
import struct
import time

from crc32c import crc32c

from .compression import DEFAULT_MAX_DECOMPRESSED, Codec, compress, decompress
from .errors import ErrorCode, RecordBatchError
from .native import native as _native  # None: the pure-Python reference does everything

__all__ = [
    "Record",
    "RecordBatch",
    "batch_records",
    "batch_records_at",
    "decode_batches",
    "encode_batch",
    "patch_base_offset",
    "read_batch_header",
    "validate_produce_batch",
]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
CRC_START = 21  # attributes onwards
LENGTH_OVERHEAD = 12  # base_offset + batch_length precede what batch_length counts

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20


# --- varints (zigzag for signed, as Kafka's record format uses) -----------------


def encode_uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    # zigzag over 64 bits covers both varint and varlong
    return encode_uvarint((value << 1) ^ (value >> 63))


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, new position); a varlong is at most 10 bytes."""
    if pos < len(data) and data[pos] < 0x80:  # most deltas and lengths fit one byte
        b = data[pos]
        return (b >> 1) ^ -(b & 1), pos + 1
    result = shift = 0
    for i in range(10):
        if pos >= len(data):
            raise RecordBatchError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise RecordBatchError("varint longer than 10 bytes")


def _read_bytes(data: bytes, pos: int, nullable: bool) -> tuple[bytes | None, int]:
    n, pos = decode_varint(data, pos)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise RecordBatchError(f"invalid length {n}")
    if pos + n > len(data):
        raise RecordBatchError("record field overruns the batch")
    return data[pos : pos + n], pos + n


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += encode_varint(-1)
    else:
        out += encode_varint(len(value))
        out += value


# --- data --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    # shim/native/src/lib.rs `decode_records` sets these six slots directly (no __init__):
    # a field added here must be added there too (the differential tests would fail).
    offset: int
    timestamp: int  # milliseconds since the epoch (absolute, resolved from the batch)
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class RecordBatch:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: tuple[Record, ...] | None = None  # None when only the header was read
    # Set by decode_batches(records=False): the decompressed records section, already
    # validated (batch_records decodes it), and whether its offset deltas run 0, 1, 2, ...
    body: bytes | None = dataclasses.field(default=None, compare=False, repr=False)
    deltas_in_order: bool | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def compression(self) -> Codec:
        return Codec(self.attributes & COMPRESSION_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def size(self) -> int:
        return self.batch_length + LENGTH_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


# --- decoding ----------------------------------------------------------------------


def read_batch_header(data: bytes, pos: int = 0, *, verify_crc: bool = True) -> RecordBatch:
    """The header of the batch at `pos`, checked for magic, size and (by default) CRC."""
    if len(data) - pos < HEADER_SIZE:
        raise RecordBatchError(f"record batch header needs {HEADER_SIZE} bytes, {len(data) - pos} left")
    fields = HEADER.unpack_from(data, pos)
    batch = RecordBatch(*fields)
    if batch.magic != 2:
        raise RecordBatchError(
            f"record batch magic {batch.magic}: only magic 2 is supported", ErrorCode.invalid_record
        )
    if batch.batch_length < HEADER_SIZE - LENGTH_OVERHEAD:
        raise RecordBatchError(f"batch_length {batch.batch_length} is smaller than a batch header")
    if batch.attributes & COMPRESSION_MASK > Codec.ZSTD:
        raise RecordBatchError(f"unknown codec {batch.attributes & COMPRESSION_MASK}", ErrorCode.invalid_record)
    end = pos + batch.size
    if end > len(data):
        raise RecordBatchError(f"batch of {batch.size} bytes overruns the {len(data) - pos} bytes given")
    if verify_crc:
        actual = crc32c(memoryview(data)[pos + CRC_START : end])
        if actual != batch.crc:
            raise RecordBatchError(f"CRC-32C mismatch: batch says {batch.crc:#010x}, bytes give {actual:#010x}")
    return batch


def _decode_records(batch: RecordBatch, body: bytes) -> tuple[Record, ...]:
    if _native is not None:
        records = _native.decode_records(body, batch.record_count, batch.base_offset,
                                         batch.base_timestamp, Record)
        if records is not None:
            return records
    return _decode_records_py(batch, body)


def _check_records(batch: RecordBatch, body: bytes) -> RecordBatch:
    """The batch, its records validated but not built (see `decode_batches`)."""
    if _native is not None:
        in_order = _native.check_records(body, batch.record_count)
        if in_order is not None:
            return dataclasses.replace(batch, body=body, deltas_in_order=in_order)
    # The reference raises what is wrong; if nothing is, its records are as good as built.
    return dataclasses.replace(batch, records=_decode_records_py(batch, body))


def batch_records(batch: RecordBatch) -> tuple[Record, ...]:
    """The batch's records, decoded now if `decode_batches(records=False)` left them."""
    if batch.records is not None:
        return batch.records
    if batch.body is None:
        raise ValueError("only the batch header was read")
    return _decode_records(batch, batch.body)


def batch_records_at(batch: RecordBatch, indices: list[int]) -> tuple[Record, ...]:
    """`batch_records(batch)[j]` for each j of `indices`, building only those records when
    the batch's records were left unbuilt (a view wants ~1 % of a batch)."""
    if batch.records is None and batch.body is not None and _native is not None:
        records = _native.decode_records(batch.body, batch.record_count, batch.base_offset,
                                         batch.base_timestamp, Record, list(indices))
        if records is not None:
            return records
    records = batch_records(batch)
    return tuple(records[j] for j in indices)


def _decode_records_py(batch: RecordBatch, body: bytes) -> tuple[Record, ...]:
    """The reference decoder: what the produce path accepts, and the error it answers."""
    if batch.record_count < 0 or batch.record_count > len(body):
        # Every record takes at least 7 bytes, so more records than bytes is a lie
        # (and would let a tiny batch make us loop for billions of iterations).
        raise RecordBatchError(f"record_count {batch.record_count} impossible for {len(body)} bytes")
    records, pos = [], 0
    for _ in range(batch.record_count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise RecordBatchError(f"record length {length} overruns the batch")
        if pos == len(body):  # a last record of length 0: nothing to read its attributes from
            raise RecordBatchError("record length 0 at the end of the batch")
        attributes = body[pos]
        pos += 1
        ts_delta, pos = decode_varint(body, pos)
        off_delta, pos = decode_varint(body, pos)
        key, pos = _read_bytes(body, pos, nullable=True)
        value, pos = _read_bytes(body, pos, nullable=True)
        count, pos = decode_varint(body, pos)
        if count < 0 or count > end - pos:
            raise RecordBatchError(f"header count {count} impossible")
        headers = []
        for _ in range(count):
            hkey, pos = _read_bytes(body, pos, nullable=False)
            hvalue, pos = _read_bytes(body, pos, nullable=True)
            try:
                headers.append((hkey.decode(), hvalue))
            except UnicodeDecodeError:
                raise RecordBatchError("record header key is not UTF-8") from None
        if pos != end:
            raise RecordBatchError(f"record declares {length} bytes but holds {length + pos - end}")
        records.append(
            Record(batch.base_offset + off_delta, batch.base_timestamp + ts_delta, key, value, tuple(headers), attributes)
        )
    if pos != len(body):
        raise RecordBatchError(f"{len(body) - pos} stray bytes after the last record")
    return tuple(records)


def decode_batch(
    data: bytes,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    records: bool = True,
) -> RecordBatch:
    """Decode the batch at `pos` fully, decompressing its records.

    `records=False` validates the records exactly as decoding would (same errors) but
    may leave them unbuilt: `records` None, `body` and `deltas_in_order` set.
    """
    batch = read_batch_header(data, pos, verify_crc=verify_crc)
    body = bytes(data[pos + HEADER_SIZE : pos + batch.size])
    body = decompress(batch.compression, body, max_decompressed)
    if type(body) is not bytes:  # the extension takes bytes; codecs may hand back buffers
        body = bytes(body)
    if not records:
        return _check_records(batch, body)
    return dataclasses.replace(batch, records=_decode_records(batch, body))


def decode_batches(
    data: bytes,
    *,
    verify_crc: bool = True,
    allow_partial: bool = False,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    records: bool = True,
) -> list[RecordBatch]:
    """Every batch in a records field (a Produce partition or a Fetch answer).

    `allow_partial` ignores a truncated last batch, which Fetch responses may hold
    because brokers cut at max_bytes; a Produce request never legitimately does.
    `records=False`: see `decode_batch`.
    """
    batches, pos = [], 0
    while pos < len(data):
        if allow_partial and (
            len(data) - pos < HEADER_SIZE or pos + LENGTH_OVERHEAD + struct.unpack_from(">i", data, pos + 8)[0] > len(data)
        ):
            break
        batch = decode_batch(data, pos, verify_crc=verify_crc, max_decompressed=max_decompressed,
                             records=records)
        batches.append(batch)
        pos += batch.size
    return batches


# --- encoding ----------------------------------------------------------------------


def encode_record(record: Record, base_offset: int, base_timestamp: int) -> bytes:
    body = bytearray()
    body.append(record.attributes & 0xFF)
    body += encode_varint(record.timestamp - base_timestamp)
    body += encode_varint(record.offset - base_offset)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    body += encode_varint(len(record.headers))
    for hkey, hvalue in record.headers:
        _write_bytes(body, hkey.encode())
        _write_bytes(body, hvalue)
    return encode_varint(len(body)) + bytes(body)


def encode_batch(
    records: list[Record] | tuple[Record, ...],
    *,
    compression: Codec | int = Codec.NONE,
    base_offset: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """One magic-2 batch holding `records` (their offsets and timestamps are absolute).

    base_offset defaults to the first record's offset; `attributes` adds flag bits
    (transactional, control, LogAppendTime) to the compression bits.
    """
    if not records:
        raise ValueError("a record batch holds at least one record")
    if base_offset is None:
        base_offset = records[0].offset
    base_timestamp = min(r.timestamp for r in records)
    max_timestamp = max(r.timestamp for r in records)
    body = b"".join(encode_record(r, base_offset, base_timestamp) for r in records)
    body = compress(compression, body)
    attributes = (attributes & ~COMPRESSION_MASK) | int(compression)
    last_offset_delta = records[-1].offset - base_offset
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + body
    crc = crc32c(after_crc)
    batch_length = len(after_crc) + 4 + 1 + 4  # + leader epoch, magic, crc
    return struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, 2, crc) + after_crc


def records_now(values: list[tuple[bytes | None, bytes | None]], first_offset: int = 0) -> list[Record]:
    """Records with consecutive offsets and the current time, for tests and tools."""
    now = int(time.time() * 1000)
    return [Record(first_offset + i, now, k, v) for i, (k, v) in enumerate(values)]


def patch_base_offset(data: bytes | bytearray, base_offset: int, pos: int = 0) -> bytearray:
    """Rewrite the base_offset of the batch at `pos`; the CRC stays valid (it excludes it)."""
    out = data if isinstance(data, bytearray) else bytearray(data)
    struct.pack_into(">q", out, pos, base_offset)
    return out


# --- produce-side validation -------------------------------------------------------


def validate_produce_batch(batch: RecordBatch) -> None:
    """What a broker checks in a batch from a client before assigning offsets.

    Raises RecordBatchError(INVALID_RECORD) for: control batches (only brokers
    write them), offset deltas that do not start at 0 and run to
    last_offset_delta, or a record count that disagrees with them.
    """
    if batch.is_control:
        raise RecordBatchError("clients may not send control batches", ErrorCode.invalid_record)
    if batch.last_offset_delta != batch.record_count - 1:
        raise RecordBatchError(
            f"last_offset_delta {batch.last_offset_delta} with {batch.record_count} records",
            ErrorCode.invalid_record,
        )
    if batch.records is not None:
        in_order = [r.offset - batch.base_offset for r in batch.records] == list(range(batch.record_count))
    else:
        in_order = batch.deltas_in_order is not False  # None: only the header was read
    if not in_order:
        raise RecordBatchError("record offset deltas must run 0, 1, 2, ...", ErrorCode.invalid_record)
