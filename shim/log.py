"""Partition logs: record batches by offset, in memory and (with a data dir) on disk.

A log holds whole magic-2 record batches exactly as they will be served to Fetch: a
source partition keeps the producer's batch bytes (compression included) with the
base offset patched in; a view partition keeps batches the data path encoded from the
records the switch delivered, carrying the source offsets, so consecutive batches may
leave gaps. A batch is never split: Fetch returns whole batches.

On disk a log is a directory of segment files named by their first offset (20 digits,
as Kafka names them), each the concatenation of its batches. The last segment is
active; it rolls once it passes `segment_bytes`. Retention drops whole segments from
the front: while the log exceeds `retention_bytes`, or while the oldest segment's
newest timestamp is older than `retention_ms`. When every batch has expired an empty
active segment named by the log end offset stays behind, so the next offset survives
a restart. A torn last batch (crash mid-append) is cut off when the log is opened.
"""

from __future__ import annotations

import bisect
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from shim.protocol.errors import RecordBatchError
from shim.protocol.records import decode_batch, read_batch_header

DEFAULT_SEGMENT_BYTES = 8 << 20


@dataclass
class Segment:
    base_offset: int
    path: Path | None
    batches: list[bytes] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)  # last offset of each batch, for bisect
    size: int = 0
    max_timestamp: int = -1


class PartitionLog:
    def __init__(self, directory: Path | None = None, *, retention_bytes: int = -1,
                 retention_ms: int = -1, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 start_offset: int = 0) -> None:
        self.directory = directory
        self.retention_bytes = retention_bytes
        self.retention_ms = retention_ms
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        self.next_offset = start_offset
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self._open()
        if not self.segments:
            self._roll(self.next_offset)

    # --- reading --------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        for s in self.segments:
            if s.batches:
                return read_batch_header(s.batches[0], verify_crc=False).base_offset
        return self.next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset` on, at least one, about max_bytes."""
        out, total = [], 0
        for s in self.segments:
            if not s.lasts or s.lasts[-1] < offset:
                continue
            i = bisect.bisect_left(s.lasts, offset)
            for b in s.batches[i:]:
                if out and total + len(b) > max_bytes:
                    return b"".join(out)
                out.append(b)
                total += len(b)
        return b"".join(out)

    def headers(self):
        """The header of every batch held, oldest first (no records decoded)."""
        for s in self.segments:
            for b in s.batches:
                yield read_batch_header(b, verify_crc=False)

    def offset_for_time(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped at or after `timestamp`."""
        for s in self.segments:
            for b in s.batches:
                if read_batch_header(b, verify_crc=False).max_timestamp >= timestamp:
                    for r in decode_batch(b, verify_crc=False).records:
                        if r.timestamp >= timestamp:
                            return r.offset, r.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the batch with the newest timestamp, (-1, -1) if empty."""
        best = (-1, -1)
        for s in self.segments:
            for b in s.batches:
                h = read_batch_header(b, verify_crc=False)
                if h.max_timestamp > best[1]:
                    best = (h.last_offset, h.max_timestamp)
        return best

    # --- writing --------------------------------------------------------------------

    def append(self, batch: bytes, last_offset: int, max_timestamp: int) -> None:
        """Add one batch whose offsets are already assigned (last_offset >= next_offset - 1)."""
        active = self.segments[-1]
        if active.size >= self.segment_bytes:
            active = self._roll(self.next_offset)
        active.batches.append(batch)
        active.lasts.append(last_offset)
        active.size += len(batch)
        # A batch without timestamps (-1) ages from when it arrived, not from 1970.
        stamp = max_timestamp if max_timestamp >= 0 else int(time.time() * 1000)
        active.max_timestamp = max(active.max_timestamp, stamp)
        if active.path is not None:
            with open(active.path, "ab") as f:
                f.write(batch)
        self.next_offset = last_offset + 1
        self.enforce_retention()

    def advance(self, next_offset: int) -> None:
        """Move the end without a batch (a view whose source records were all filtered out)."""
        self.next_offset = max(self.next_offset, next_offset)

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Drop expired segments from the front; returns how many were dropped."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        dropped = 0
        while self.segments and self.segments[0].batches:
            first = self.segments[0]
            # Kafka's rule: drop a segment only if what remains still holds retention_bytes.
            too_big = self.retention_bytes >= 0 and self.size - first.size >= self.retention_bytes
            too_old = self.retention_ms >= 0 and first.max_timestamp < now_ms - self.retention_ms
            if not (too_big or too_old):
                break
            if len(self.segments) == 1:
                self._roll(self.next_offset)
            self.segments.pop(0)
            if first.path is not None:
                first.path.unlink(missing_ok=True)
            dropped += 1
        return dropped

    def drop_before(self, offset: int) -> None:
        """Forget whole batches ending before `offset` (a view following its source's retention)."""
        for s in self.segments:
            while s.lasts and s.lasts[0] < offset:
                s.size -= len(s.batches.pop(0))
                s.lasts.pop(0)

    def delete(self) -> None:
        for s in self.segments:
            if s.path is not None:
                s.path.unlink(missing_ok=True)
        if self.directory is not None:
            try:
                self.directory.rmdir()
            except OSError:
                pass

    # --- files ----------------------------------------------------------------------

    def _roll(self, base: int) -> Segment:
        path = None
        if self.directory is not None:
            path = self.directory / f"{base:020d}.log"
            path.touch()
        seg = Segment(base, path)
        self.segments.append(seg)
        return seg

    def _open(self) -> None:
        files = sorted(self.directory.glob("*.log"))
        for path in files:
            seg = Segment(int(path.stem), path)
            data = path.read_bytes()
            pos = 0
            while pos < len(data):
                try:
                    h = read_batch_header(data, pos)
                except RecordBatchError:
                    break  # a torn tail: keep what was written whole
                seg.batches.append(bytes(data[pos:pos + h.size]))
                seg.lasts.append(h.last_offset)
                seg.max_timestamp = max(seg.max_timestamp, h.max_timestamp)
                pos += h.size
            if pos != len(data):
                with open(path, "r+b") as f:
                    f.truncate(pos)
                    os.fsync(f.fileno())
            seg.size = pos
            self.segments.append(seg)
            self.next_offset = max(self.next_offset, seg.lasts[-1] + 1 if seg.lasts else seg.base_offset)

