"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
two-phase end of a transaction (KIP-98), durable in the data dir.

Each transactional id has one producer id and epoch. InitProducerId bumps the epoch, which
fences every older instance of the producer (its requests get PRODUCER_FENCED, or
INVALID_PRODUCER_EPOCH on versions before the former existed), and aborts a transaction the
old instance left open. A transaction's life, as Kafka's coordinator keeps it:

    Empty -> Ongoing (AddPartitionsToTxn / AddOffsetsToTxn)
          -> PrepareCommit | PrepareAbort (EndTxn, or the timeout for an abort)
          -> CompleteCommit | CompleteAbort (markers written, offsets applied)

The Prepare state is written to `transactions.json` before any marker is, and the Complete
state after all are (written and renamed into place, not fsynced: as Kafka's transaction
log and camus's partition logs, it survives the process being killed, and reaches the disk
when the system writes it back); a broker killed in between finishes the job when it starts again
(`recover`), so a transaction is either committed in every partition and group or in
none. Writing a marker twice (a crash after some markers) is harmless: a marker of a
producer with no open transaction in that partition changes nothing (shim/txn_log.py).
Offsets committed inside a transaction (TxnOffsetCommit) are held here, durable with the
state, and become the group's committed offsets only when the commit completes.

The coordinator decides; `Broker` does the writing (markers in partition logs, offsets),
through the two callbacks it passes in. A transaction whose producer neither commits nor
aborts within its `transaction.timeout.ms` is aborted by the broker's tick, with the epoch
bumped so the producer is fenced, as Kafka does. Past MAX_EPOCH the transactional id gets a
new producer id, after the open transaction is aborted under the old one
(`_fence_and_abort`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from shim.client_regex import compile_regex

EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT,
          "PrepareEpochFence", "Dead")
MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default
MAX_EPOCH = 32767 - 1  # past this a producer gets a new id (Short.MAX_VALUE - 1, as Kafka)


class TxnError(Exception):
    """A request the coordinator refuses; `code` names the Kafka error."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(message or code)
        self.code = code


@dataclass
class Txn:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: str = EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    # group -> (topic, partition) -> (offset, metadata, leader epoch), applied when the
    # commit completes
    offsets: dict[str, dict[tuple[str, int], tuple[int, str, int]]] = field(default_factory=dict)
    started_ms: int = -1

    def to_json(self) -> dict:
        return {"id": self.transactional_id, "pid": self.producer_id, "epoch": self.epoch,
                "timeout_ms": self.timeout_ms, "state": self.state,
                "partitions": sorted(self.partitions), "started_ms": self.started_ms,
                "offsets": {g: [[t, p, o, md, e] for (t, p), (o, md, e) in parts.items()]
                            for g, parts in self.offsets.items()}}

    @classmethod
    def from_json(cls, d: dict) -> Txn:
        return cls(d["id"], d["pid"], d["epoch"], d["timeout_ms"], d["state"],
                   {(t, p) for t, p in d["partitions"]},
                   {g: {(t, p): (o, md, rest[0] if rest else -1)  # files before the epoch
                        for t, p, o, md, *rest in items}
                    for g, items in d["offsets"].items()}, d["started_ms"])


# (partitions, producer id, epoch, commit?) -> None; raises to leave the transaction prepared
WriteMarkers = Callable[[set, int, int, bool], None]
# group -> {(topic, partition): (offset, metadata, leader epoch)}
ApplyOffsets = Callable[[dict], None]


class TransactionCoordinator:
    def __init__(self, directory: Path | None, new_producer_id: Callable[[], int],
                 write_markers: WriteMarkers, apply_offsets: ApplyOffsets) -> None:
        self.path = directory / "transactions.json" if directory else None
        self._new_producer_id = new_producer_id
        self._write_markers = write_markers
        self._apply_offsets = apply_offsets
        self.txns: dict[str, Txn] = {}
        # producer id -> the transactional id it is the current producer id of, so Produce
        # can refuse a batch that borrows it without that transactional id
        self._owners: dict[int, str] = {}
        if self.path and self.path.exists():
            for d in json.loads(self.path.read_text()):
                t = Txn.from_json(d)
                self.txns[t.transactional_id] = t
                self._owners[t.producer_id] = t.transactional_id

    def _save(self) -> None:
        if not self.path:
            return
        # Written (and renamed into place) before the markers, so a killed process finds the
        # Prepare state; not fsynced, as Kafka does not fsync its transaction log either
        # (durability as the partition logs': shim/log.py).
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([t.to_json() for t in self.txns.values()]))
        os.replace(tmp, self.path)

    # --- requests ---------------------------------------------------------------------

    def init_producer(self, txn_id: str, timeout_ms: int, producer_id: int = -1,
                      epoch: int = -1) -> tuple[int, int]:
        """(producer id, epoch) for InitProducerId with a transactional id."""
        if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            raise TxnError("invalid_transaction_timeout",
                           f"transaction.timeout.ms {timeout_ms} is not in 1..{MAX_TIMEOUT_MS}")
        t = self.txns.get(txn_id)
        if t is None:
            t = self.txns[txn_id] = Txn(txn_id, self._new_producer_id(), 0, timeout_ms)
            self._owners[t.producer_id] = txn_id
            self._save()
            return t.producer_id, t.epoch
        if producer_id >= 0 and (producer_id, epoch) != (t.producer_id, t.epoch):
            raise TxnError("producer_fenced", "another instance of this transactional id "
                                              "has started since")
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            self._complete(t)  # finish what a failed marker write left, then go on
        t.timeout_ms = timeout_ms
        if t.state == ONGOING:  # the old instance's transaction: abort it, fenced
            self._fence_and_abort(t)
        else:
            self._bump(t)
            t.state = EMPTY
            self._save()
        return t.producer_id, t.epoch

    def owner(self, producer_id: int) -> str | None:
        """The transactional id whose current producer id this is, or None."""
        return self._owners.get(producer_id)

    def _bump(self, t: Txn) -> None:
        """The next epoch, or a new producer id at epoch 0 once MAX_EPOCH is used up."""
        if t.epoch >= MAX_EPOCH:
            self._owners.pop(t.producer_id, None)
            t.producer_id, t.epoch = self._new_producer_id(), 0
            self._owners[t.producer_id] = t.transactional_id
        else:
            t.epoch += 1

    def _fence_and_abort(self, t: Txn) -> None:
        """Abort the open transaction at the next epoch, fencing the instance that opened it.

        The markers carry the producer id of the transaction's records, whatever the epoch:
        a partition closes a transaction only on its own producer's marker. At the last
        epoch that is MAX_EPOCH + 1 (Short.MAX_VALUE, never handed to a producer), and the
        transactional id gets its new producer id only once the abort is complete, as
        Kafka's coordinator does (KIP-360). A failed marker write leaves the abort prepared
        under the old producer id, which `recover` and the next InitProducerId finish."""
        t.epoch += 1
        self._end(t, commit=False)
        if t.epoch > MAX_EPOCH:
            self._bump(t)
            self._save()

    def _current(self, txn_id: str, producer_id: int, epoch: int) -> Txn:
        """The transactional id's state, if `producer_id` and `epoch` are its current ones."""
        t = self.txns.get(txn_id)
        if t is None or t.producer_id != producer_id:
            raise TxnError("invalid_producer_id_mapping",
                           f"transactional id {txn_id!r} does not have producer id {producer_id}")
        if epoch != t.epoch:
            raise TxnError("producer_fenced", f"epoch {epoch} is not the current {t.epoch}")
        return t

    def _check(self, txn_id: str, producer_id: int, epoch: int) -> Txn:
        t = self._current(txn_id, producer_id, epoch)
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            raise TxnError("concurrent_transactions", "the previous transaction is completing")
        return t

    def _begin(self, t: Txn) -> None:
        if t.state != ONGOING:
            t.state, t.partitions, t.offsets = ONGOING, set(), {}
            t.started_ms = int(time.time() * 1000)

    def add_partitions(self, txn_id: str, producer_id: int, epoch: int,
                       partitions: list[tuple[str, int]]) -> None:
        t = self._check(txn_id, producer_id, epoch)
        if t.state == ONGOING and set(partitions) <= t.partitions:
            return  # a retry: nothing to write
        self._begin(t)
        t.partitions.update(partitions)
        self._save()

    def verify_partitions(self, txn_id: str, producer_id: int, epoch: int,
                          partitions: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """The partitions of `partitions` not in the open transaction (AddPartitionsToTxn v4+
        verify_only, and the check before a transactional Produce)."""
        t = self._check(txn_id, producer_id, epoch)
        if t.state != ONGOING:
            return set(partitions)
        return set(partitions) - t.partitions

    def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group: str) -> None:
        t = self._check(txn_id, producer_id, epoch)
        if t.state == ONGOING and group in t.offsets:
            return
        self._begin(t)
        t.offsets.setdefault(group, {})
        self._save()

    def commit_offsets(self, txn_id: str, producer_id: int, epoch: int, group: str,
                       offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
        t = self._check(txn_id, producer_id, epoch)
        if t.state != ONGOING or group not in t.offsets:
            raise TxnError("invalid_txn_state", f"group {group!r} was not added to the "
                                                "transaction (AddOffsetsToTxn)")
        t.offsets[group].update(offsets)
        self._save()

    def pending_offsets(self, group: str) -> set[tuple[str, int]]:
        """Partitions of `group` with offsets an open transaction holds (require_stable)."""
        return {tp for t in self.txns.values() if t.state != EMPTY
                and t.state not in (COMPLETE_COMMIT, COMPLETE_ABORT)
                for tp in t.offsets.get(group, {})}

    def end(self, txn_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        t = self._current(txn_id, producer_id, epoch)
        done = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        if t.state == done:
            return  # a retry of the EndTxn that completed
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            if t.state == (PREPARE_COMMIT if commit else PREPARE_ABORT):
                self._complete(t)
                return
            raise TxnError("invalid_txn_state", f"transaction is in state {t.state}")
        if t.state != ONGOING:
            raise TxnError("invalid_txn_state", f"no transaction is open (state {t.state})")
        self._end(t, commit)

    def _end(self, t: Txn, commit: bool) -> None:
        t.state = PREPARE_COMMIT if commit else PREPARE_ABORT
        self._save()
        self._complete(t)

    def _complete(self, t: Txn) -> None:
        """Markers in every partition, offsets applied, then the Complete state. A failed
        marker write leaves the transaction prepared; `recover` (the tick) retries it."""
        commit = t.state == PREPARE_COMMIT
        self._write_markers(t.partitions, t.producer_id, t.epoch, commit)
        if commit:
            self._apply_offsets(t.offsets)
        t.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        t.partitions, t.offsets, t.started_ms = set(), {}, -1
        self._save()

    # --- housekeeping -----------------------------------------------------------------

    def recover(self) -> None:
        """Complete transactions left prepared (a crash or a failed marker write)."""
        for t in self.txns.values():
            if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
                self._complete(t)

    def expire(self, now_ms: int | None = None) -> list[str]:
        """Abort open transactions past their timeout, fencing their producers."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        expired = []
        for t in self.txns.values():
            if t.state == ONGOING and now_ms - t.started_ms > t.timeout_ms:
                self._fence_and_abort(t)
                expired.append(t.transactional_id)
        return expired

    def listing(self, states: set[str], producer_ids: set[int], min_duration_ms: int,
                pattern: str | None) -> list[Txn]:
        """ListTransactions: every filter given must hold."""
        now = int(time.time() * 1000)
        rx = compile_regex(pattern) if pattern else None  # RE2 (linear time); InvalidRegex
        return [t for t in self.txns.values()
                if (not states or t.state in states)
                and (not producer_ids or t.producer_id in producer_ids)
                and (min_duration_ms < 0 or (t.state == ONGOING
                                             and now - t.started_ms >= min_duration_ms))
                and (rx is None or rx.fullmatch(t.transactional_id) is not None)]
