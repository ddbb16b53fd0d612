"""Idempotent producers: producer ids, epochs, and per-partition sequence checks.

InitProducerId hands out a producer id (epoch 0), or bumps the epoch of the id a client
names (v3+). Each Produce batch from an idempotent producer carries (producer id, epoch,
base sequence); per (producer id, topic, partition) we keep the sequence ranges and
offsets of the last five batches, as Kafka does:

- a batch equal to one remembered is a retry: it gets its original base offset back and
  is not appended again;
- the first batch of an unknown producer (or of a new, higher epoch) is accepted at any
  sequence;
- a batch whose base sequence is not last + 1 is OUT_OF_ORDER_SEQUENCE_NUMBER;
- an epoch lower than the one seen is INVALID_PRODUCER_EPOCH.

The next producer id persists in the data dir (`producers.json`) so ids are not reused
after a restart; the sequence windows are rebuilt from the batch headers in the logs when
the broker starts (`record` per stored batch), as Kafka rebuilds its producer state.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

WINDOW = 5


@dataclass
class _State:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=WINDOW))  # (first, last, offset)
    last_timestamp: int = -1  # of its newest batch (DescribeProducers)


class Verdict:
    APPEND, DUPLICATE, OUT_OF_ORDER, FENCED = "append", "duplicate", "out_of_order", "fenced"


class Producers:
    def __init__(self, directory: Path | None = None) -> None:
        self.path = directory / "producers.json" if directory else None
        self.next_id = 1000
        self.epochs: dict[int, int] = {}
        self.state: dict[tuple[int, str, int], _State] = {}
        if self.path and self.path.exists():
            self.next_id = json.loads(self.path.read_text()).get("next_id", 1000)

    def init(self, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
        """(producer id, epoch) for an InitProducerId request."""
        if producer_id >= 0 and producer_id in self.epochs:
            self.epochs[producer_id] = max(self.epochs[producer_id], epoch) + 1
            return producer_id, self.epochs[producer_id]
        pid = self.next_id
        self.next_id += 1
        self.epochs[pid] = 0
        if self.path:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"next_id": self.next_id}))
            os.replace(tmp, self.path)
        return pid, 0

    def check(self, pid: int, epoch: int, topic: str, partition: int, first: int,
              count: int) -> tuple[str, int]:
        """(verdict, original base offset for a duplicate)."""
        st = self.state.get((pid, topic, partition))
        if st is None or epoch > st.epoch:
            return Verdict.APPEND, -1
        if epoch < st.epoch:
            return Verdict.FENCED, -1
        last = first + count - 1
        for f, l, off in st.batches:
            if (f, l) == (first, last):
                return Verdict.DUPLICATE, off
        if st.batches and first != (st.batches[-1][1] + 1) % (1 << 31):
            return Verdict.OUT_OF_ORDER, -1
        return Verdict.APPEND, -1

    def record(self, pid: int, epoch: int, topic: str, partition: int, first: int, count: int,
               base_offset: int, timestamp: int = -1) -> None:
        key = (pid, topic, partition)
        self.epochs[pid] = max(self.epochs.get(pid, epoch), epoch)
        st = self.state.get(key)
        if st is None or epoch > st.epoch:
            st = self.state[key] = _State(epoch)
        st.batches.append((first, first + count - 1, base_offset))
        st.last_timestamp = max(st.last_timestamp, timestamp)
