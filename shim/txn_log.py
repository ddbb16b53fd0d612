"""What a partition log knows of transactions: open ones, aborted ones, its last stable offset.

Kafka derives this from the log itself, and so does camus: every batch appended to a
`PartitionLog` (and every batch found in its files when it is opened) passes `observe`.
A transactional data batch opens its producer's transaction at its base offset (if none is
open); a control batch (a COMMIT or ABORT marker, written by the transaction coordinator)
closes it, and an ABORT records (producer id, first offset, marker offset) in the aborted
list that read_committed Fetch answers carry. The last stable offset (LSO) is the first
offset of the oldest open transaction, or the high watermark when none is open:
read_committed consumers read only below it.

A view's log is built from the records the switch delivered, re-encoded with their
producer's id and the transactional bit, and the markers of its source are appended to it
in order (shim/broker.py), so the same bookkeeping makes the view's own LSO and aborted
list: a view over a transactionally written topic serves read_committed consumers exactly
the committed records that satisfy its filter.
"""

from __future__ import annotations

import bisect
import struct

from shim.protocol.records import Record, decode_batch, encode_batch

TRANSACTIONAL_BIT, CONTROL_BIT = 0x10, 0x20
ABORT, COMMIT = 0, 1
_PRODUCER = struct.Struct(">qh")  # producer id and epoch, at byte 43 of a batch
_ATTRIBUTES_LOW = 22  # the low byte of the int16 attributes at bytes 21-22


def marker_type(batch: bytes) -> int | None:
    """ABORT or COMMIT for a control batch's marker, None if its key is not one."""
    records = decode_batch(batch, verify_crc=False).records
    if not records or records[0].key is None or len(records[0].key) < 4:
        return None
    return struct.unpack_from(">h", records[0].key, 2)[0]


def marker_batch(offset: int, timestamp: int, producer_id: int, producer_epoch: int,
                 kind: int, coordinator_epoch: int = 0) -> bytes:
    """The control batch a coordinator writes to end a transaction (Kafka's EndTransactionMarker:
    key = version 0, type; value = version 0, coordinator epoch)."""
    record = Record(offset, timestamp, struct.pack(">hh", 0, kind),
                    struct.pack(">hi", 0, coordinator_epoch), ())
    return encode_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                        attributes=TRANSACTIONAL_BIT | CONTROL_BIT)


class TxnIndex:
    def __init__(self) -> None:
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # (last offset, producer id, first offset) per aborted transaction, by marker offset.
        self.aborted: list[tuple[int, int, int]] = []

    def observe(self, batch: bytes, base_offset: int) -> None:
        """Account for one stored batch (its bytes, offsets assigned)."""
        attributes = batch[_ATTRIBUTES_LOW]
        if not attributes & TRANSACTIONAL_BIT:
            return
        pid, _ = _PRODUCER.unpack_from(batch, 43)
        if not attributes & CONTROL_BIT:
            self.open.setdefault(pid, base_offset)
            return
        first = self.open.pop(pid, None)
        if first is not None and marker_type(batch) == ABORT:
            self.aborted.append((base_offset, pid, first))

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(self.open.values(), default=high_watermark)

    def aborted_between(self, start: int, end: int) -> list[dict]:
        """Aborted transactions a read of offsets start..end-1 must skip: those whose marker
        is at or after `start` and whose first offset is before `end` (as Kafka answers)."""
        i = bisect.bisect_left(self.aborted, (start, -1 << 63, -1 << 63))
        return [{"producer_id": pid, "first_offset": first}
                for _, pid, first in self.aborted[i:] if first < end]

    def drop_before(self, offset: int) -> None:
        """Forget aborted transactions wholly before the log's start."""
        i = bisect.bisect_left(self.aborted, (offset, -1 << 63, -1 << 63))
        del self.aborted[:i]
