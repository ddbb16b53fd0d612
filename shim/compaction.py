"""Log compaction (`cleanup.policy=compact`, or `compact,delete`), as Kafka's log cleaner does it.

A compacted partition keeps, for every key, at least its newest record. The cleaner works
on the cleanable part of the log: every segment but the active one, and only below the
last stable offset (an open transaction's records are not judged yet). It runs when the
dirty share of that part (bytes written since the last clean, over all cleanable bytes)
reaches `min.cleanable.dirty.ratio`. One pass:

- maps each key to the offset of its newest record in the cleanable part (records in the
  active segment are not looked at, as on Kafka: a key's older value stays until its newer
  one leaves the active segment);
- keeps a record iff it is that newest one; drops the records of aborted transactions;
- drops a tombstone (a record whose value is null) that is the newest for its key only
  once it is older than `delete.retention.ms` (by its timestamp; Kafka counts from when
  the tombstone's segment was first cleaned), so consumers have that long to see deletes;
- keeps every control batch (transaction markers), so read_committed readers and the
  log's transaction index (shim/txn_log.py) still know how transactions ended;
- rewrites the surviving records batch by batch (same base offset, producer, attributes
  and codec), so every record keeps its offset; a batch left empty disappears, unless it
  is its idempotent producer's newest: then its header stays, with no record (as Kafka
  keeps it), so the producer's sequence is still known after a restart (`Producers` is
  rebuilt from batch headers) and its next batch is not OUT_OF_ORDER_SEQUENCE_NUMBER. The
  cleanable segments become one segment named by the first one's base offset, so the
  log start offset does not move (shim/log.py `replace_front`).

Produce to a compacted topic refuses a record without a key (INVALID_RECORD), as Kafka.
A view over a compacted topic is compacted with it: the records a pass removes from the
source partition are removed from the view's partition too (`Broker._compact`), so a view
is always its filter over the compacted source, the same thing a replay after a restart
builds from the compacted source.
"""

from __future__ import annotations

import bisect
import struct

from crc32c import crc32c

from shim.log import PartitionLog
from shim.protocol.records import (CRC_START, HEADER, LENGTH_OVERHEAD, RecordBatch, batch_records,
                                   decode_batches, encode_batch)


def dirty_ratio(lg: PartitionLog, limit: int) -> tuple[float, int]:
    """(dirty share, dirty bytes) of the segments wholly below `limit` but the active one."""
    clean = dirty = 0
    for s in lg.segments[:-1]:
        if not s.lasts or s.lasts[-1] >= limit:
            break
        if s.lasts[-1] < lg.cleaned_upto:
            clean += s.size
        else:
            dirty += s.size
    total = clean + dirty
    return (dirty / total if total else 0.0), dirty


def _aborted(lg: PartitionLog) -> list[tuple[int, int, int]]:
    return sorted((first, last, pid) for last, pid, first in lg.txns.aborted)


def _in_aborted(aborted: list[tuple[int, int, int]], pid: int, offset: int) -> bool:
    i = bisect.bisect_right(aborted, (offset, 1 << 63, 1 << 63))
    return any(first <= offset <= last and p == pid for first, last, p in aborted[:i])


def compact(lg: PartitionLog, now_ms: int, delete_retention_ms: int, min_ratio: float,
            force: bool = False) -> set[int]:
    """One cleaning pass if due (or `force`d); the offsets of the records it removed."""
    limit = lg.txns.last_stable_offset(lg.next_offset)
    ratio, dirty = dirty_ratio(lg, limit)
    if not dirty or (ratio < min_ratio and not force):
        return set()
    count = 0
    for s in lg.segments[:-1]:
        if not s.lasts or s.lasts[-1] >= limit:
            break
        count += 1
    batches: list[RecordBatch] = []
    for s in lg.segments[:count]:
        if s.starts:
            batches.extend(decode_batches(s.span(0, len(s.starts)), verify_crc=False))
    aborted = _aborted(lg)
    dropped = {b.base_offset for b in batches  # batches of aborted transactions
               if b.is_transactional and not b.is_control
               and _in_aborted(aborted, b.producer_id, b.base_offset)}
    newest: dict[bytes | None, int] = {}  # an aborted record never hides a committed one
    for b in batches:
        if not b.is_control and b.base_offset not in dropped:
            for r in batch_records(b):
                newest[r.key] = r.offset
    last_of_producer = {b.producer_id: b.base_offset for b in batches
                        if b.producer_id >= 0 and not b.is_control}
    removed: set[int] = set()
    out: list[tuple[bytes, int, int]] = []
    for b in batches:
        if b.is_control:
            out.append((encode_batch(batch_records(b), base_offset=b.base_offset,
                                     producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                                     base_sequence=b.base_sequence, attributes=b.attributes),
                        b.last_offset, b.max_timestamp))
            continue
        kept = []
        for r in batch_records(b):
            keep = (b.base_offset not in dropped and newest.get(r.key) == r.offset
                    and (r.value is not None or now_ms - r.timestamp <= delete_retention_ms))
            if keep:
                kept.append(r)
            else:
                removed.add(r.offset)
        if kept:
            out.append((encode_batch(kept, base_offset=b.base_offset, compression=b.compression,
                                     producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                                     base_sequence=b.base_sequence, attributes=b.attributes),
                        kept[-1].offset, max(r.timestamp for r in kept)))
        elif last_of_producer.get(b.producer_id) == b.base_offset:
            out.append((empty_batch(b), b.last_offset, b.max_timestamp))
    lg.replace_front(count, out, cleaned_upto=lg.segments[count - 1].lasts[-1] + 1)
    return removed


def empty_batch(b: RecordBatch) -> bytes:
    """`b`'s header with no record: its offsets, producer, epoch and sequences kept."""
    size = HEADER.size
    data = bytearray(HEADER.pack(b.base_offset, size - LENGTH_OVERHEAD, b.partition_leader_epoch,
                                 2, 0, b.attributes & ~0x07, b.last_offset_delta,
                                 b.base_timestamp, b.max_timestamp, b.producer_id,
                                 b.producer_epoch, b.base_sequence, 0))
    struct.pack_into(">I", data, CRC_START - 4, crc32c(bytes(data[CRC_START:])))
    return bytes(data)


def drop_records(vlog: PartitionLog, removed: set[int]) -> None:
    """Remove the records at `removed` offsets from a view's (in-memory) log."""
    if not removed:
        return
    lowest, highest = min(removed), max(removed)
    count = 0
    for s in vlog.segments:
        if s.lasts and s.firsts[0] > highest:
            break
        count += 1
    count = min(count, len(vlog.segments))
    out: list[tuple[bytes, int, int]] = []
    for s in vlog.segments[:count]:
        for b in decode_batches(s.span(0, len(s.starts)), verify_crc=False) if s.starts else []:
            if b.is_control or b.last_offset < lowest:
                out.append((encode_batch(batch_records(b), base_offset=b.base_offset,
                                         producer_id=b.producer_id,
                                         producer_epoch=b.producer_epoch,
                                         attributes=b.attributes), b.last_offset, b.max_timestamp))
                continue
            kept = [r for r in batch_records(b) if r.offset not in removed]
            if kept:
                out.append((encode_batch(kept, base_offset=b.base_offset,
                                         producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                                         attributes=b.attributes), kept[-1].offset,
                            max(r.timestamp for r in kept)))
    if count:
        vlog.replace_front(count, out)
