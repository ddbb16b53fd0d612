"""Record batch compression codecs: none, gzip, snappy, lz4, zstd (attribute bits 0-2).

Each quirk below is what real clients send or expect:
- snappy: the Java client wraps snappy in xerial's stream framing (magic
  `\\x82SNAPPY\\x00`, two int32 versions, then int32-length-prefixed raw blocks);
  librdkafka sends raw snappy. Decoding accepts both; encoding writes xerial
  framing because every client (Java included) reads it.
- lz4: Kafka uses the standard LZ4 frame format (magic v2 fixed the old header
  checksum bug). Encoding uses independent 64 KiB blocks without content size or
  checksums, the frame the Java client itself writes, since its reader rejects
  linked blocks.
- gzip: decoding accepts multi-member streams (concatenated gzip members).
- zstd: frames may omit the content size (librdkafka streams them).

Decompression stops at `max_size` bytes (MESSAGE_TOO_LARGE beyond): a few KiB of
zstd or gzip can otherwise expand to gigabytes inside the broker.

Backends: python-lz4 for lz4 (cramjam cannot turn off block linking), zstandard
for zstd (cramjam's cannot stop at a size), cramjam for snappy (raw and the
blocks inside xerial framing), the standard library for gzip.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import io

import cramjam
import lz4.frame
import zstandard

from .errors import ErrorCode, RecordBatchError

__all__ = ["Codec", "compress", "decompress"]


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_BLOCK_LEN = struct.Struct(">i")
# xerial-snappy's default block size, as the Java client writes.
XERIAL_BLOCK_SIZE = 32 * 1024

# Largest decompressed records section accepted from one batch.
DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024


def _too_large(limit: int) -> RecordBatchError:
    return RecordBatchError(f"batch decompresses to more than {limit} bytes", ErrorCode.message_too_large)


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    out, total = [], 0
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = d.decompress(data, limit - total + 1)
        total += len(chunk)
        if total > limit:
            raise _too_large(limit)
        out.append(chunk)
        if not d.eof:
            raise RecordBatchError("truncated gzip stream")
        data = d.unused_data
    return b"".join(out)


def _snappy_raw(block: bytes, budget: int, limit: int) -> bytes:
    # Raw snappy states its decompressed length up front: check before expanding.
    if cramjam.snappy.decompress_raw_len(block) > budget:
        raise _too_large(limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_raw(data, limit, limit)
    if len(data) < _XERIAL_HEADER.size:
        raise RecordBatchError("truncated xerial snappy header")
    pos, out, total = _XERIAL_HEADER.size, [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise RecordBatchError("truncated xerial snappy block length")
        (n,) = _BLOCK_LEN.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise RecordBatchError(f"xerial snappy block of {n} bytes overruns the batch")
        out.append(_snappy_raw(data[pos : pos + n], limit - total, limit))
        total += len(out[-1])
        pos += n
    return b"".join(out)


def _snappy_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_BLOCK_LEN.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_compress(data: bytes) -> bytes:
    return lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )


def _lz4_decompress(data: bytes, limit: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(data, max_length=limit + 1)
    if len(out) > limit:
        raise _too_large(limit)
    if not d.eof:
        raise RecordBatchError("truncated lz4 frame")
    return out


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    out = bytearray()
    while chunk := reader.read(min(limit + 1 - len(out), 1 << 20) or 1):
        out += chunk
        if len(out) > limit:
            raise _too_large(limit)
    return bytes(out)


def compress(codec: Codec | int, data: bytes) -> bytes:
    codec = Codec(codec)
    if codec is Codec.NONE:
        return data
    if codec is Codec.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec is Codec.SNAPPY:
        return _snappy_compress(data)
    if codec is Codec.LZ4:
        return _lz4_compress(data)
    return zstandard.ZstdCompressor(level=3).compress(data)


def decompress(codec: Codec | int, data: bytes, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress a batch's records section; any failure is a `RecordBatchError`."""
    try:
        codec = Codec(codec)
    except ValueError:
        raise RecordBatchError(f"unknown compression codec {codec}", ErrorCode.invalid_record) from None
    try:
        if codec is Codec.NONE:
            return data
        if codec is Codec.GZIP:
            return _gzip_decompress(data, max_size)
        if codec is Codec.SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec is Codec.LZ4:
            return _lz4_decompress(data, max_size)
        return _zstd_decompress(data, max_size)
    except RecordBatchError:
        raise
    except Exception as exc:  # each backend has its own error types
        raise RecordBatchError(f"{codec.name.lower()} decompression failed: {exc}") from exc
