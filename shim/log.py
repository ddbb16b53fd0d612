"""Partition logs: record batches by offset, in memory and (with a data dir) on disk.

A log holds whole magic-2 record batches exactly as they will be served to Fetch: a
source partition keeps the producer's batch bytes (compression included) with the
base offset patched in; a view partition keeps batches the data path encoded from the
records the switch delivered, carrying the source offsets, so consecutive batches may
leave gaps. A batch is never split: Fetch returns whole batches.

With a data dir the batches live only in the files (an index of offsets and positions
stays in memory; Fetch reads a contiguous run of batches with one read); without one,
and for views, which are derived, they live in memory. On disk a log is a directory of
segment files named by their first offset (20 digits, as Kafka names them), each the
concatenation of its batches. The last segment is active; it rolls once it passes `segment_bytes`. Retention drops whole segments from
the front: while the log exceeds `retention_bytes` (checked at every append), or while
the oldest segment's newest timestamp is older than `retention_ms` (checked every
min(retention_ms, 5 min), like Kafka's log.retention.check.interval.ms, so records
produced with old timestamps, as clients' test suites do, stay readable for a while as
they do on Kafka, instead of vanishing at once). When every batch has expired an empty
active segment named by the log end offset stays behind, so the next offset survives
a restart. A torn last batch (crash mid-append) is cut off when the log is opened.

Durability, as Kafka's: an append is written to the segment file before it is acknowledged
(so it survives the process being killed), and reaches the disk when the operating system
writes it back, unless the log is told to fsync: after every `flush_messages` records
(`flush.messages`) or once its oldest unflushed append is `flush_ms` old (`flush.ms`,
checked by the broker's tick). A write or fsync that fails (ENOSPC, EIO) is undone by
truncating the segment back to its last whole batch, so no later append can sit behind a
torn one, and the append raises `StorageError` (the produce gets KAFKA_STORAGE_ERROR,
which clients retry). If even that truncation fails, the log goes offline: it refuses every
append until the broker restarts and cuts the tail, as Kafka takes a failed log dir offline.

The log start offset is kept on its own, not read off the first stored batch: a view's
first batch may start well past its true start (its first matching record), and Kafka
keeps a log with gaps (a compacted topic) starting where the log starts, so a Fetch or a
consumer at any offset from there up to the end is answered, not OFFSET_OUT_OF_RANGE. It
is the given start (a view's: its source's), the first segment's base once a data dir is
opened or retention drops segments, and a view's source's start once the view follows
its source's retention (`drop_before`).

Every batch appended or found on opening passes the log's transaction index
(`shim/txn_log.py`: open and aborted transactions, the last stable offset that read_committed
Fetch stops at). Compaction (`shim/compaction.py`) rewrites the segments before the active
one through `replace_front`; `cleaner-offset` in the directory says how far it has cleaned.
"""

from __future__ import annotations

import bisect
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from shim.protocol.errors import RecordBatchError
from shim.protocol.records import Record, decode_batch, encode_batch, read_batch_header
from shim.txn_log import TxnIndex

DEFAULT_SEGMENT_BYTES = 8 << 20
RETENTION_CHECK_MS = 300_000  # Kafka's log.retention.check.interval.ms default
START_CHECKPOINT = "log-start-offset"  # where DeleteRecords' start is kept, in the partition dir


# The producer id on gap batches: outside the range `shim.producers` hands out, so no
# read_committed consumer can mistake a gap for the end of one of its transactions.
GAP_PRODUCER_ID = 2**63 - 1
TRANSACTIONAL_BIT, CONTROL_BIT = 0x10, 0x20
COMMIT_MARKER = struct.pack(">hh", 0, 1)  # control record key: version 0, type COMMIT


def gap_batch(first: int, last: int, timestamp: int) -> bytes:
    """A batch that covers offsets first..last and holds no data record.

    A view's tail of filtered-out offsets is served as one, so that every consumer of a view
    reaches its high watermark whatever the filter dropped at the end. Clients skip a control
    batch and move their position past its last offset, as they do over a transaction
    marker. It is a control batch rather than an empty one because librdkafka stores (and
    so commits) the offset after a control record it skips, but not after an empty batch:
    with an empty batch a confluent-kafka consumer reaches partition EOF yet commits the
    offset after the last match, and its lag never reaches 0. The one control record, a
    COMMIT marker of a producer id no producer has, sits at `last`; the offsets before it
    are absent, as in a compacted batch.
    """
    marker = Record(last, max(timestamp, 0), COMMIT_MARKER, struct.pack(">hi", 0, 0), [])
    return encode_batch([marker], base_offset=first, producer_id=GAP_PRODUCER_ID,
                        producer_epoch=0, attributes=TRANSACTIONAL_BIT | CONTROL_BIT)


class StorageError(Exception):
    """A partition's files could not be written; nothing of the failed append remains."""


@dataclass
class Segment:
    """Batches back to back: in `data` (in memory) or in the file at `path` (not in memory)."""

    base_offset: int
    path: Path | None
    data: bytearray | None = None
    firsts: list[int] = field(default_factory=list)  # base offset of each batch
    lasts: list[int] = field(default_factory=list)  # last offset of each batch, for bisect
    starts: list[int] = field(default_factory=list)  # byte position of each batch
    size: int = 0
    max_timestamp: int = -1
    # The time index: the newest timestamp of batches 0..i (their headers' max timestamps),
    # non-decreasing, so ListOffsets by time bisects it instead of reading every batch.
    newest: list[int] = field(default_factory=list)

    def span(self, i: int, j: int) -> bytes:
        """The bytes of batches i..j-1."""
        a = self.starts[i]
        b = self.starts[j] if j < len(self.starts) else self.size
        if self.data is not None:
            return bytes(self.data[a:b])
        with open(self.path, "rb") as f:
            f.seek(a)
            return f.read(b - a)

    def add(self, first: int, last: int, length: int, max_timestamp: int) -> None:
        self.firsts.append(first)
        self.lasts.append(last)
        self.starts.append(self.size)
        self.newest.append(max(self.newest[-1], max_timestamp) if self.newest else max_timestamp)
        self.size += length

    def drop_front(self, k: int, headers: list[int]) -> None:
        """Forget batches 0..k-1 (in-memory segments); `headers`: the kept batches' own max
        timestamps, to rebuild the time index without the dropped ones."""
        cut = self.starts[k] if k < len(self.starts) else self.size
        del self.data[:cut]
        self.firsts, self.lasts = self.firsts[k:], self.lasts[k:]
        self.starts = [p - cut for p in self.starts[k:]]
        self.size -= cut
        self.newest = []
        for t in headers:
            self.newest.append(max(self.newest[-1], t) if self.newest else t)


class PartitionLog:
    def __init__(self, directory: Path | None = None, *, retention_bytes: int = -1,
                 retention_ms: int = -1, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 start_offset: int = 0, flush_messages: int = -1, flush_ms: int = -1) -> None:
        self.directory = directory
        self.retention_bytes = retention_bytes
        self.retention_ms = retention_ms
        self.segment_bytes = segment_bytes
        self.flush_messages = flush_messages  # fsync after this many records (< 1: never)
        self.flush_ms = flush_ms  # fsync once the oldest unflushed append is this old (< 0: never)
        self.segments: list[Segment] = []
        self.start_offset = start_offset  # see the module text: not the first batch's offset
        self.next_offset = start_offset
        self.offline: str | None = None  # why appends are refused until a restart
        self.txns = TxnIndex()  # open and aborted transactions, the last stable offset
        self.cleaned_upto = 0  # compaction: offsets below this were cleaned (shim/compaction.py)
        self._unflushed = 0  # records appended since the last fsync
        self._unflushed_since = 0.0  # monotonic time of the oldest unflushed append
        self._unsynced: list[Path] = []  # segment files (and new ones' directory) to fsync
        self._time_checked = int(time.time() * 1000)
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self._open()
        if not self.segments:
            self._roll(self.next_offset)

    # --- reading --------------------------------------------------------------------

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> bytes:
        """Whole batches from the one holding `offset` on, at least one, about max_bytes;
        ending, when the read reaches a tail of filtered-out offsets, in a gap batch.
        `upto` (read_committed: the last stable offset) stops before the first batch that
        starts there or later; a gap batch then reaches no further than it."""
        out, total, complete = [], 0, True
        limit = self.next_offset if upto is None else min(upto, self.next_offset)
        read_end = offset  # one past the last offset of what is read
        for s in self.segments:
            if not s.lasts or s.lasts[-1] < offset:
                continue
            i = j = bisect.bisect_left(s.lasts, offset)
            while j < len(s.starts) and s.firsts[j] < limit:
                end = s.starts[j + 1] if j + 1 < len(s.starts) else s.size
                length = end - s.starts[j]
                if (out or j > i) and total + length > max_bytes:
                    break
                total += length
                read_end = max(read_end, s.lasts[j] + 1)
                j += 1
            if j > i:
                out.append(s.span(i, j))
            if j < len(s.starts):
                complete = s.firsts[j] >= limit  # stopped at the limit, not at max_bytes
                break
        if complete and read_end < limit:
            out.append(gap_batch(read_end, limit - 1, self._newest_timestamp()))
        return b"".join(out)

    def _newest_timestamp(self) -> int:
        return max((s.max_timestamp for s in self.segments), default=-1)

    def headers(self):
        """The header of every batch held, oldest first (no records decoded)."""
        for s in self.segments:
            for i in range(len(s.starts)):
                yield read_batch_header(s.span(i, i + 1), verify_crc=False)

    def offset_for_time(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped at or after `timestamp`: the
        time index names the first batch that can hold one; only that batch is decoded."""
        for s in self.segments:
            i = bisect.bisect_left(s.newest, timestamp)
            while i < len(s.starts):  # a batch whose header overstates its records: go on
                for r in decode_batch(s.span(i, i + 1), verify_crc=False).records:
                    if r.timestamp >= timestamp:
                        return r.offset, r.timestamp
                i += 1
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record with the newest timestamp, (-1, -1) if
        empty: the record's own offset, as Kafka answers since 3.8 (KAFKA-16310), not the
        end of its batch (confluent-kafka's list_offsets test checks it)."""
        newest = max((s.newest[-1] for s in self.segments if s.newest), default=-1)
        if newest < 0:
            return -1, -1
        s = next(s for s in self.segments if s.newest and s.newest[-1] == newest)
        i = bisect.bisect_left(s.newest, newest)
        batch = s.span(i, i + 1)
        for r in decode_batch(batch, verify_crc=False).records:
            if r.timestamp == newest:
                return r.offset, r.timestamp
        return read_batch_header(batch, verify_crc=False).last_offset, newest

    # --- writing --------------------------------------------------------------------

    def append(self, batch: bytes, last_offset: int, max_timestamp: int) -> None:
        """Add one batch whose offsets are already assigned (last_offset >= next_offset - 1)."""
        self.append_all([(batch, last_offset, max_timestamp)])

    def append_all(self, batches: list[tuple[bytes, int, int]]) -> None:
        """Add (batch, last offset, max timestamp) batches as one write: all of them or, with
        StorageError, none (see the module text)."""
        if self.offline:
            raise StorageError(self.offline)
        active = self.segments[-1]
        if active.size >= self.segment_bytes:
            active = self._roll(self.next_offset)
        data = b"".join(b for b, _, _ in batches)
        records = sum(last - int.from_bytes(b[0:8], "big", signed=True) + 1 for b, last, _ in batches)
        if active.data is not None:
            active.data += data
        else:
            self._write(active, data)
            if not self._unflushed:
                self._unflushed_since = time.monotonic()
            self._unflushed += records
            if self.flush_messages > 0 and self._unflushed >= self.flush_messages:
                self._flush_or_undo(active)
        for batch, last_offset, max_timestamp in batches:
            first = int.from_bytes(batch[0:8], "big", signed=True)
            active.add(first, last_offset, len(batch), max_timestamp)
            self.txns.observe(batch, first)
            # A batch without timestamps (-1) ages from when it arrived, not from 1970.
            stamp = max_timestamp if max_timestamp >= 0 else int(time.time() * 1000)
            active.max_timestamp = max(active.max_timestamp, stamp)
            self.next_offset = last_offset + 1
        self.enforce_retention(by_time=False)

    def _flush_or_undo(self, segment: Segment) -> None:
        """fsync before the append is acknowledged; if that fails the append is cut off again
        (the log is offline by then, see `flush`), so it is neither refused nor stored."""
        try:
            self.flush()
        except StorageError:
            try:
                os.truncate(segment.path, segment.size)
            except OSError:
                pass  # offline already; the restart cuts the unacknowledged tail
            raise

    def _write(self, segment: Segment, data: bytes) -> None:
        """Append `data` to the segment file whole, or leave the file as it was."""
        try:
            fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise StorageError(f"{segment.path}: cannot open for append: {exc.strerror}") from exc
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            self._undo(fd, segment, exc)
        finally:
            os.close(fd)
        if segment.path not in self._unsynced:
            self._unsynced.append(segment.path)

    def _undo(self, fd: int, segment: Segment, exc: OSError) -> None:
        """Cut a failed write off the file; a log whose file cannot be cut goes offline."""
        reason = f"{segment.path}: write failed: {exc.strerror or exc}"
        try:
            os.ftruncate(fd, segment.size)
        except OSError as cut:
            self.offline = f"{reason}; and could not be truncated back ({cut.strerror}): offline until restart"
            raise StorageError(self.offline) from exc
        raise StorageError(reason) from exc

    def flush(self) -> None:
        """fsync what was appended since the last flush (and new segments' directory)."""
        paths, self._unsynced = self._unsynced, []
        try:
            for path in paths:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            # What the page cache held is now of unknown durability (fsync reports a lost
            # write-back once): refuse further appends rather than acknowledge on top of it.
            self.offline = f"fsync of {path} failed: {exc.strerror or exc}: offline until restart"
            raise StorageError(self.offline) from exc
        self._unflushed = 0

    def flush_due(self, now: float | None = None) -> bool:
        """Whether `flush_ms` has passed since the oldest unflushed append (`time.monotonic()`)."""
        now = time.monotonic() if now is None else now
        return (self.flush_ms >= 0 and self._unflushed > 0 and not self.offline
                and (now - self._unflushed_since) * 1000 >= self.flush_ms)

    def advance(self, next_offset: int) -> None:
        """Move the end without a batch (a view whose source records were all filtered out)."""
        self.next_offset = max(self.next_offset, next_offset)

    def time_retention_due(self, now_ms: int) -> bool:
        """Whether the periodic time-based retention check is due (then it counts as done)."""
        if self.retention_ms < 0 or now_ms - self._time_checked < min(self.retention_ms,
                                                                      RETENTION_CHECK_MS):
            return False
        self._time_checked = now_ms
        return True

    def enforce_retention(self, now_ms: int | None = None, *, by_time: bool = True) -> int:
        """Drop expired segments from the front; returns how many were dropped."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        dropped = 0
        # An empty first segment (compaction removed everything in it) is dropped like any.
        while self.segments and (self.segments[0].starts or len(self.segments) > 1):
            first = self.segments[0]
            # Kafka's rule: drop a segment only if what remains still holds retention_bytes,
            # and never the active one for size (so retention.bytes=0 keeps the newest).
            too_big = (self.retention_bytes >= 0 and len(self.segments) > 1
                       and self.size - first.size >= self.retention_bytes)
            too_old = (by_time and self.retention_ms >= 0
                       and first.max_timestamp < now_ms - self.retention_ms)
            if not (too_big or too_old):
                break
            if len(self.segments) == 1:
                self._roll(self.next_offset)
            self.segments.pop(0)
            # Never back before a DeleteRecords start inside the new first segment.
            self.start_offset = max(self.start_offset, self.segments[0].base_offset)
            self.txns.drop_before(self.start_offset)
            if first.path is not None:
                first.path.unlink(missing_ok=True)
            dropped += 1
        return dropped

    def drop_before(self, offset: int) -> None:
        """Start at `offset` and forget whole batches ending before it (a view following
        its source's retention, whose start it takes; views live in memory)."""
        self.start_offset = max(self.start_offset, offset)  # never back past what was dropped
        self.txns.drop_before(self.start_offset)
        for s in self.segments:
            k = bisect.bisect_left(s.lasts, offset)
            if k == 0 or s.data is None:
                continue
            kept = [read_batch_header(s.span(i, i + 1), verify_crc=False).max_timestamp
                    for i in range(k, len(s.starts))]
            s.drop_front(k, kept)

    def replace_front(self, count: int, batches: list[tuple[bytes, int, int]],
                      cleaned_upto: int | None = None) -> None:
        """Replace the first `count` segments by one holding `batches` (bytes, last offset,
        max timestamp; offsets kept, so the log's start and end stay), named by the first
        one's base offset: compaction's rewrite. On disk the new file replaces the first
        segment's atomically, `cleaner-offset` records the cleaned end, then the others are
        removed; a crash in between leaves segments starting below that end (or below
        their predecessor's end), which `_open` discards."""
        old = self.segments[:count]
        seg = Segment(old[0].base_offset, old[0].path,
                      None if old[0].path is not None else bytearray())
        data = b"".join(b for b, _, _ in batches)
        for batch, last, ts in batches:
            seg.add(int.from_bytes(batch[0:8], "big", signed=True), last, len(batch), ts)
            seg.max_timestamp = max(seg.max_timestamp, ts)
        if seg.path is not None:
            tmp = seg.path.with_name(seg.path.name + ".cleaned")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, seg.path)
            if cleaned_upto is not None:  # before the unlinks: `_open` uses it to find leftovers
                (self.directory / "cleaner-offset").write_text(str(cleaned_upto))
            for s in old[1:]:
                s.path.unlink(missing_ok=True)
            self._unsynced = [p for p in self._unsynced if all(p != s.path for s in old)]
        else:
            seg.data += data
        self.segments[:count] = [seg]
        if cleaned_upto is not None:
            self.cleaned_upto = cleaned_upto

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: the log starts at `offset` (the caller keeps it at most the end).
        Segments wholly before it go, their files too; in memory, whole batches before it;
        the batch holding it stays whole, as Kafka keeps it. The start is written to a
        checkpoint file (Kafka's log-start-offset-checkpoint) so it survives a restart.
        Returns the log start offset."""
        if offset <= self.start_offset:
            return self.start_offset
        while self.segments and (self.segments[1].base_offset <= offset if len(self.segments) > 1
                                 else self.segments[0].starts and offset >= self.next_offset):
            if len(self.segments) == 1:
                self._roll(self.next_offset)
            gone = self.segments.pop(0)
            if gone.path is not None:
                gone.path.unlink(missing_ok=True)
        self.drop_before(offset)
        if self.directory is not None:
            tmp = self.directory / (START_CHECKPOINT + ".tmp")
            tmp.write_text(str(self.start_offset))
            os.replace(tmp, self.directory / START_CHECKPOINT)
        return self.start_offset

    def delete(self) -> None:
        for s in self.segments:
            if s.path is not None:
                s.path.unlink(missing_ok=True)
        if self.directory is not None:
            (self.directory / START_CHECKPOINT).unlink(missing_ok=True)
            (self.directory / "cleaner-offset").unlink(missing_ok=True)
            try:
                self.directory.rmdir()
            except OSError:
                pass

    # --- files ----------------------------------------------------------------------

    def _roll(self, base: int) -> Segment:
        if self.directory is not None:
            path = self.directory / f"{base:020d}.log"
            try:
                path.touch()
            except OSError as exc:
                raise StorageError(f"{path}: cannot create segment: {exc.strerror}") from exc
            seg = Segment(base, path)
            self._unsynced.append(self.directory)  # the new file's name is in the directory
        else:
            seg = Segment(base, None, bytearray())
        self.segments.append(seg)
        return seg

    def _open(self) -> None:
        marker = self.directory / "cleaner-offset"
        if marker.exists():
            self.cleaned_upto = int(marker.read_text() or 0)
        for path in sorted(self.directory.glob("*.log")):
            if self.segments and int(path.stem) < max(self.next_offset, self.cleaned_upto):
                path.unlink()  # left by a compaction the process did not finish removing
                continue
            seg = Segment(int(path.stem), path)
            data = path.read_bytes()  # once, to index the batches; reads go to the file
            pos = 0
            while pos < len(data):
                try:
                    h = read_batch_header(data, pos)
                except RecordBatchError:
                    break  # a torn tail: keep what was written whole
                seg.add(h.base_offset, h.last_offset, h.size, h.max_timestamp)
                if h.is_transactional:
                    self.txns.observe(data[pos:pos + h.size], h.base_offset)
                seg.max_timestamp = max(seg.max_timestamp, h.max_timestamp)
                pos += h.size
            if pos != len(data):
                with open(path, "r+b") as f:
                    f.truncate(pos)
                    os.fsync(f.fileno())
            self.segments.append(seg)
            self.next_offset = max(self.next_offset, seg.lasts[-1] + 1 if seg.lasts else seg.base_offset)
        if self.segments:  # the log starts where the first segment retention left starts
            self.start_offset = self.segments[0].base_offset
        checkpoint = self.directory / START_CHECKPOINT  # or where DeleteRecords put it
        if checkpoint.exists():
            try:
                start = int(checkpoint.read_text())
            except ValueError:
                start = self.start_offset
            self.start_offset = min(max(self.start_offset, start), self.next_offset)
