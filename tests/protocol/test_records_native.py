"""The native records walk (shim.protocol._native check_records/decode_records) against the Python
reference (`_decode_records_py`): on random, hand-built adversarial and mutated record
sections, whenever the native walk answers it answers what the reference returns, and
whenever the reference refuses the native walk defers to it. Also `decode_batches
(records=False)` + `validate_produce_batch` against the full decode on whole batches."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from crc32c import crc32c

from shim.protocol import ErrorCode, RecordBatchError
from shim.protocol import records as rec
from shim.protocol.records import (
    CRC_START,
    HEADER_SIZE,
    Codec,
    Record,
    RecordBatch,
    batch_records,
    batch_records_at,
    decode_batches,
    encode_batch,
    encode_record,
    encode_uvarint,
    encode_varint,
    read_batch_header,
    validate_produce_batch,
)
from shim.protocol.native import native

pytestmark = pytest.mark.skipif(native is None, reason="shim.protocol._native not built or stale: "
                                "tests/protocol/test_native.py fails")

I64 = st.integers(-(1 << 63), (1 << 63) - 1)
BLOB = st.one_of(st.none(), st.binary(max_size=40))
HEADER = st.tuples(st.text(max_size=8), BLOB)
RECORD = st.builds(
    Record,
    offset=st.integers(0, 1 << 20),
    timestamp=st.one_of(st.integers(0, 1 << 45), I64),
    key=BLOB,
    value=BLOB,
    headers=st.lists(HEADER, max_size=3).map(tuple),
    attributes=st.integers(0, 255),
)


def _batch(count: int, base_offset: int = 0, base_timestamp: int = 0) -> RecordBatch:
    return RecordBatch(base_offset, 0, -1, 2, 0, 0, count - 1, base_timestamp, base_timestamp,
                       -1, -1, -1, count)


def _reference(batch: RecordBatch, body: bytes):
    """The records, or the error as (type, message, Kafka code)."""
    try:
        return rec._decode_records_py(batch, body)
    except RecordBatchError as exc:
        return (RecordBatchError, str(exc), exc.error_code)


def _agree(body: bytes, count: int, base_offset: int = 0, base_timestamp: int = 0) -> None:
    batch = _batch(count, base_offset, base_timestamp)
    want = _reference(batch, body)
    got = native.decode_records(body, count, base_offset, base_timestamp, Record)
    checked = native.check_records(body, count)
    if isinstance(want, tuple) and want and want[0] is RecordBatchError:
        assert got is None and checked is None, want
        return
    if got is not None:
        assert got == want
        assert [type(r) for r in got] == [Record] * len(got)
    if checked is not None:
        in_order = [r.offset - base_offset for r in want] == list(range(count))
        assert checked == in_order
    # The dispatcher answers what the reference answers, whoever walked.
    assert rec._decode_records(batch, body) == want


def _section(records, base_offset=0, base_timestamp=None) -> tuple[bytes, int, int]:
    base_timestamp = min((r.timestamp for r in records), default=0) if base_timestamp is None \
        else base_timestamp
    return b"".join(encode_record(r, base_offset, base_timestamp) for r in records), \
        base_offset, base_timestamp


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=12), st.integers(0, 1 << 40))
def test_valid_sections_decode_the_same(records, base_offset):
    records = [r for r in records if -(1 << 63) <= r.timestamp - min(
        x.timestamp for x in records) < 1 << 63]
    body, base, ts = _section(records, base_offset)
    _agree(body, len(records), base, ts)
    if all(-(1 << 63) <= r.offset - base < 1 << 63 for r in records):
        # in range of i64 everywhere: the native walk must not have deferred
        assert native.decode_records(body, len(records), base, ts, Record) is not None


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORD, min_size=1, max_size=6), st.data())
def test_mutated_sections_get_the_same_answer(records, data):
    body, base, ts = _section(records)
    buf = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if kind == "cut":
            del buf[data.draw(st.integers(0, len(buf))):]
        elif not buf or kind == "insert":
            buf.insert(data.draw(st.integers(0, len(buf))), data.draw(st.integers(0, 255)))
        else:
            i = data.draw(st.integers(0, len(buf) - 1))
            if kind == "flip":
                buf[i] ^= 1 << data.draw(st.integers(0, 7))
            elif kind == "set":
                buf[i] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE]))
            else:
                del buf[i]
    count = len(records) + data.draw(st.sampled_from([0, 0, 0, -1, 1, -len(records) - 1]))
    _agree(bytes(buf), count, base, ts)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64), st.integers(-2, 8))
def test_random_bytes_get_the_same_answer(body, count):
    _agree(body, count)


def _raw_record(*fields: bytes, length: int | None = None) -> bytes:
    inner = b"".join(fields)
    return encode_varint(len(inner) if length is None else length) + inner


V = encode_varint
TEN_BYTES_BIG = b"\xff" * 9 + b"\x7f"  # a 10-byte varint whose value exceeds 64 bits
ELEVEN_BYTES = b"\x80" * 10 + b"\x01"


@pytest.mark.parametrize("body,count", [
    (b"", 0),
    (b"", 1),
    (b"\x00", 1),  # a last record of length 0 (the reference once raised IndexError)
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(0)), -1),
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(0)) + b"\x00", 1),  # stray byte
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(0), b"\x00"), 1),  # record too long
    (_raw_record(b"\x00", V(0), V(0), V(-2), V(-1), V(0)), 1),  # key length -2
    (_raw_record(b"\x00", V(0), V(0), V(5), b"ab", V(-1), V(0)), 1),  # key overruns
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(-1), V(-1)), 1),  # null header key
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(2), b"\xff\xfe", V(-1)), 1),
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(3), b"\xed\xa0\x80", V(-1)), 1),
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(2), "é".encode(), V(0)), 1),
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(1 << 40)), 1),  # header count
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(-1)), 1),
    (_raw_record(b"\x00", TEN_BYTES_BIG, V(0), V(-1), V(-1), V(0)), 1),  # beyond i64
    (_raw_record(b"\x00", V(0), TEN_BYTES_BIG, V(-1), V(-1), V(0)), 1),
    (_raw_record(b"\x00", ELEVEN_BYTES, V(0), V(-1), V(-1), V(0)), 1),
    (_raw_record(b"\x00", V((1 << 63) - 1), V(0), V(-1), V(-1), V(0)), 1),
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(0), length=-1), 1),
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(0), length=1 << 40), 1),
    (b"\x80" * 12, 1),  # truncated / overlong length varint
    (_raw_record(b"\x00", V(0), V(0), V(-1), V(-1), V(0)) * 3, 2),
])
def test_adversarial_sections(body, count):
    _agree(body, count)
    _agree(body, count, base_offset=(1 << 63) - 1, base_timestamp=(1 << 63) - 1)  # overflow
    _agree(body, count, base_offset=-(1 << 63), base_timestamp=-(1 << 63))


def test_an_overflowing_offset_defers_to_the_reference():
    body = _raw_record(b"\x00", V(1), V(1), V(-1), V(-1), V(0))
    assert native.decode_records(body, 1, (1 << 63) - 1, 0, Record) is None
    [r] = rec._decode_records(_batch(1, (1 << 63) - 1), body)
    assert r.offset == 1 << 63  # Python's ints, as before the native walk


# --- whole batches through the produce path's calls ---------------------------------------


def _produce_outcome(data: bytes, records: bool):
    try:
        batches = decode_batches(data, records=records)
        for b in batches:
            validate_produce_batch(b)
    except RecordBatchError as exc:
        return ("error", str(exc), exc.error_code)
    except Exception as exc:  # noqa: BLE001 - what escapes must escape alike
        return ("raised", type(exc).__name__)
    # the header fields, and the records however they were built
    return [(dataclasses.replace(b, records=None), batch_records(b)) for b in batches]


def _recrc(data: bytearray, pos: int = 0) -> bytes:
    """Fix the CRC of the batch at `pos`, so mutations reach the records walk."""
    end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
    if pos + HEADER_SIZE <= end <= len(data):
        struct.pack_into(">I", data, pos + 17, crc32c(bytes(data[pos + CRC_START:end])))
    return bytes(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORD, min_size=1, max_size=5), st.sampled_from(list(Codec)), st.data())
@example(records=[Record(0, 0, None, None)], codec=Codec.NONE, data=None)
def test_produce_validation_without_records_matches_the_full_decode(records, codec, data):
    records = [Record(i, 1_700_000_000_000 + i, r.key, r.value, r.headers, 0)
               for i, r in enumerate(records)]
    raw = bytearray(encode_batch(records, compression=codec))
    if data is not None and codec is Codec.NONE:  # mutate inside the records section
        for _ in range(data.draw(st.integers(0, 3))):
            i = data.draw(st.integers(HEADER_SIZE, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        raw = bytearray(_recrc(raw))
        if data.draw(st.booleans()):  # a second batch after it, whose deltas may be wrong
            second = bytearray(encode_batch(records, compression=Codec.NONE))
            second[HEADER_SIZE + 3] ^= data.draw(st.sampled_from([0, 2]))  # first offset delta
            raw += _recrc(second)
    full, lazy = _produce_outcome(bytes(raw), True), _produce_outcome(bytes(raw), False)
    assert lazy == full
    if not isinstance(full, tuple):
        assert [rs for _, rs in full][0] == tuple(records) or data is not None


def test_deltas_out_of_order_are_invalid_record_either_way():
    records = [Record(i, 5, None, b"v") for i in range(3)]
    raw = bytearray(encode_batch(records))
    # the second record's offset delta 1 -> 2: still a well-formed batch
    first_len = raw[HEADER_SIZE] >> 1
    delta_at = HEADER_SIZE + 1 + first_len + 1 + 1 + 1
    assert raw[delta_at] == 2
    raw[delta_at] = 4
    data = _recrc(raw)
    for records_flag in (True, False):
        [b] = decode_batches(data, records=records_flag)
        with pytest.raises(RecordBatchError) as err:
            validate_produce_batch(b)
        assert err.value.error_code == ErrorCode.invalid_record


def test_lazy_batch_records_are_built_from_the_kept_body():
    records = [Record(i, 10 + i, b"k", b"v" * i, (("h", None),)) for i in range(4)]
    for codec in Codec:
        [b] = decode_batches(encode_batch(records, compression=codec), records=False)
        assert b.records is None and b.deltas_in_order is True
        assert batch_records(b) == tuple(records)
    with pytest.raises(ValueError):
        batch_records(read_batch_header(encode_batch(records)))


def test_without_the_extension_the_reference_does_everything(monkeypatch):
    monkeypatch.setattr(rec, "_native", None)
    records = [Record(i, 10 + i, None, b"v") for i in range(3)]
    [b] = decode_batches(encode_batch(records), records=False)
    assert b.records == tuple(records)  # the reference built them while validating
    validate_produce_batch(b)
    assert batch_records(b) == tuple(records)
    assert encode_uvarint(0) == b"\x00"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.builds(Record, offset=st.just(0), timestamp=st.integers(0, 2**40),
                          key=st.none() | st.binary(max_size=8),
                          value=st.none() | st.binary(max_size=20),
                          headers=st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)),
                                           max_size=2).map(tuple)),
                min_size=1, max_size=10), st.integers(0, 2**40), st.data())
def test_batch_records_at_builds_the_chosen_records(records, base, data):
    records = [dataclasses.replace(r, offset=base + i) for i, r in enumerate(records)]
    [b] = decode_batches(encode_batch(records), records=False)
    indices = data.draw(st.lists(st.integers(0, len(records) - 1), max_size=12))
    assert batch_records_at(b, indices) == tuple(batch_records(b)[j] for j in indices)
