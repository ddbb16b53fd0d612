"""Record batches: every codec, batches from real clients, corruption, validation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shim.protocol import ErrorCode, RecordBatchError, ServerConnection
from shim.protocol import produce
from shim.protocol.compression import XERIAL_MAGIC, Codec, compress, decompress
from shim.protocol.records import (
    CRC_START,
    Record,
    decode_batch,
    decode_batches,
    decode_varint,
    encode_batch,
    encode_varint,
    patch_base_offset,
    read_batch_header,
    records_now,
    validate_produce_batch,
)
from protocol_helpers import FIXTURES

RECORDS = [
    Record(10 + i, 1_700_000_000_000 + 3 * i, b"key-%d" % i if i % 3 else None, b"value " * i or None,
           (("side", b"B"), ("empty", None)) if i % 2 else ())
    for i in range(25)
]


@pytest.mark.parametrize("codec", list(Codec), ids=[c.name.lower() for c in Codec])
def test_every_codec_round_trips(codec):
    data = encode_batch(RECORDS, compression=codec, producer_id=42, producer_epoch=3, base_sequence=17)
    [batch] = decode_batches(data)
    assert batch.compression is codec
    assert batch.records == tuple(RECORDS)
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (10, 34, 25)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 17)
    assert batch.max_timestamp == RECORDS[-1].timestamp
    assert batch.size == len(data)
    validate_produce_batch(batch)


def _produce_batches(name: str):
    conn = ServerConnection()
    conn.receive_data((FIXTURES / name).read_bytes())
    [(_, _, records)] = list(produce.partitions(conn.next_request()))
    return decode_batches(records)


REAL = sorted(p.name for p in FIXTURES.glob("*-produce-*.bin"))


@pytest.mark.parametrize("name", REAL)
def test_real_client_batches_decode(name):
    client = name.split("-produce-")[0]
    tag = name.rsplit("-", 1)[-1].removesuffix(".bin")
    batches = _produce_batches(name)
    assert batches
    for batch in batches:
        validate_produce_batch(batch)
        if tag in ("gzip", "snappy", "lz4", "zstd", "none"):
            assert batch.compression.name.lower() == tag
    records = [r for b in batches for r in b.records]
    if client != "java" and tag in ("gzip", "snappy", "lz4", "zstd", "none"):
        assert [r.key for r in records] == [b"k%d" % i for i in range(5)]
        assert all(r.headers == (("side", b"B"),) for r in records)
        assert records[0].value.startswith(b'{"price": 0')
    if client == "java":
        assert all(len(r.value) == 100 for r in records)  # ProducerPerformance --record-size 100


def test_java_sends_xerial_snappy_and_librdkafka_raw_snappy():
    java = (FIXTURES / "java-produce-v13-snappy.bin").read_bytes()
    rdkafka = (FIXTURES / "librdkafka-produce-v10-snappy.bin").read_bytes()
    assert XERIAL_MAGIC in java
    assert XERIAL_MAGIC not in rdkafka


def test_idempotent_producers_send_producer_ids():
    for name in ("librdkafka-produce-v10-none-idempotent.bin", "kafka-python-produce-v9-none-idempotent.bin"):
        [batch] = _produce_batches(name)
        assert (batch.producer_id, batch.base_sequence) == (1000, 0)


def test_crc_mismatch_is_corrupt_message():
    data = bytearray(encode_batch(RECORDS))
    data[-1] ^= 0xFF
    with pytest.raises(RecordBatchError, match="CRC") as info:
        decode_batches(bytes(data))
    assert info.value.error_code == ErrorCode.corrupt_message


def test_base_offset_patch_keeps_the_crc_valid():
    data = encode_batch(RECORDS, compression=Codec.LZ4)
    patched = patch_base_offset(data, 1000)
    [batch] = decode_batches(bytes(patched))
    assert [r.offset for r in batch.records] == list(range(1000, 1025))
    assert bytes(patched[CRC_START:]) == data[CRC_START:]


def test_magic_1_is_invalid_record():
    data = bytearray(encode_batch(RECORDS))
    data[16] = 1
    with pytest.raises(RecordBatchError) as info:
        decode_batches(bytes(data))
    assert info.value.error_code == ErrorCode.invalid_record


@pytest.mark.parametrize("cut", [1, 30, 60, 61, 100])
def test_truncated_batches(cut):
    data = encode_batch(RECORDS)
    with pytest.raises(RecordBatchError):
        decode_batches(data[:-cut])
    # Fetch responses may end in a partial batch: skipped, not an error.
    assert decode_batches(data + data[:-cut], allow_partial=True)[0].records == tuple(RECORDS)


def _with_header_fields(data: bytes, **fields) -> bytes:
    """Rewrite header fields after the CRC and recompute it, to test validation alone."""
    from crc32c import crc32c

    out = bytearray(data)
    offsets = {"attributes": (21, ">h"), "last_offset_delta": (23, ">i"), "record_count": (57, ">i")}
    for name, value in fields.items():
        pos, fmt = offsets[name]
        struct.pack_into(fmt, out, pos, value)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def test_validation_rejects_control_batches_and_bad_deltas():
    data = encode_batch(RECORDS)
    control = decode_batch(_with_header_fields(data, attributes=0x20))
    with pytest.raises(RecordBatchError, match="control") as info:
        validate_produce_batch(control)
    assert info.value.error_code == ErrorCode.invalid_record
    header = read_batch_header(_with_header_fields(data, last_offset_delta=3))
    with pytest.raises(RecordBatchError, match="last_offset_delta"):
        validate_produce_batch(header)
    gap = encode_batch([Record(0, 1, None, b"a"), Record(2, 1, None, b"b")])
    with pytest.raises(RecordBatchError):
        validate_produce_batch(decode_batch(_with_header_fields(gap, last_offset_delta=1)))


def test_lying_record_count_is_rejected_without_looping():
    data = _with_header_fields(encode_batch(RECORDS[:2]), record_count=2**31 - 1)
    with pytest.raises(RecordBatchError, match="record_count"):
        decode_batches(data)


def test_unknown_codec_is_invalid_record():
    data = _with_header_fields(encode_batch(RECORDS), attributes=5)
    with pytest.raises(RecordBatchError) as info:
        decode_batches(data)
    assert info.value.error_code == ErrorCode.invalid_record


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_corrupt_compressed_payload(codec):
    with pytest.raises(RecordBatchError, match="decompression|truncated|overruns"):
        decompress(codec, compress(codec, b"x" * 5000)[:-7] + b"garbage")


def test_xerial_snappy_multi_block_and_raw():
    payload = bytes(range(256)) * 600  # > 32 KiB: several xerial blocks
    framed = compress(Codec.SNAPPY, payload)
    assert framed.startswith(XERIAL_MAGIC)
    assert decompress(Codec.SNAPPY, framed) == payload
    import cramjam

    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(payload))) == payload


def test_lz4_frames_are_the_ones_java_writes():
    # FLG 0x60: version 01, independent blocks, no checksums or size; BD 0x40: 64 KiB.
    assert compress(Codec.LZ4, b"abc" * 100)[4:6] == b"\x60\x40"


def test_gzip_multi_member():
    import gzip

    assert decompress(Codec.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_varint_edges(value):
    encoded = encode_varint(value)
    assert decode_varint(encoded + b"\x00", 0) == (value, len(encoded))


def test_varint_too_long_and_truncated():
    with pytest.raises(RecordBatchError):
        decode_varint(b"\xff" * 11, 0)
    with pytest.raises(RecordBatchError):
        decode_varint(b"\x80", 0)


record_strategy = st.builds(
    lambda k, v, h, dt: (k, v, tuple(h), dt),
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=200),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
    st.integers(0, 10_000),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=20), st.sampled_from(list(Codec)), st.integers(0, 2**40))
def test_batches_round_trip(items, codec, base):
    records = [Record(base + i, 1_600_000_000_000 + dt, k, v, h) for i, (k, v, h, dt) in enumerate(items)]
    [batch] = decode_batches(encode_batch(records, compression=codec))
    assert batch.records == tuple(records)


def test_records_now_helper():
    records = records_now([(None, b"a"), (b"k", b"b")], first_offset=5)
    assert [r.offset for r in records] == [5, 6]
    assert decode_batch(encode_batch(records)).records == tuple(records)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_real_batches_raise_only_record_batch_errors(data):
    name = data.draw(st.sampled_from(REAL))
    raw = bytearray(b"".join(_raw_batches(name)))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_batches(bytes(raw), verify_crc=data.draw(st.booleans()))
    except RecordBatchError as error:
        # MESSAGE_TOO_LARGE: a mutated length can make snappy claim more than
        # max_decompressed (found by this test).
        assert error.error_code in (ErrorCode.corrupt_message, ErrorCode.invalid_record,
                                    ErrorCode.message_too_large)


def _raw_batches(name: str) -> list[bytes]:
    conn = ServerConnection()
    conn.receive_data((FIXTURES / name).read_bytes())
    return [records for _, _, records in produce.partitions(conn.next_request())]


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD], ids=lambda c: c.name.lower())
def test_decompression_bombs_stop_at_the_limit(codec):
    bomb = compress(codec, b"\0" * (4 << 20))
    assert len(bomb) < 300 * 1024
    with pytest.raises(RecordBatchError) as info:
        decompress(codec, bomb, max_size=1 << 20)
    assert info.value.error_code == ErrorCode.message_too_large
    assert decompress(codec, bomb, max_size=4 << 20) == b"\0" * (4 << 20)
    batch = encode_batch([Record(0, 1, None, b"\0" * (2 << 20))], compression=codec)
    with pytest.raises(RecordBatchError):
        decode_batches(batch, max_decompressed=1 << 20)
