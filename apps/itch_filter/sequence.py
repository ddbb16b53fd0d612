"""Per-session MoldUDP64 sequence tracking: which sequence numbers are accounted for.

A receiver of an *unfiltered* feed sees every sequence number once; a jump is loss. A
receiver of a camus-filtered feed sees jumps by design: the switch sends a subscriber no copy
of a packet none of whose messages it selected, and drops the blocks after the last kept
one. Inside a copy, unkept messages stay as zero-length blocks, so they are accounted for;
between copies nothing tells a filtered range from a lost one.

So a sequence number counts as *accounted for* once some packet carried a block for it: the
message itself, or a zero-length block meaning "not yours". Whatever lies below the highest
number the session has announced (a data packet's end, a heartbeat's or an end-of-session's
next sequence) and is not accounted for is *unexplained*: the receiver asks the
retransmission server about it (`apps.itch_filter.retransmit`), whose answer accounts for
every number it covers. Loss is what such an answer brings back as a message; filtering is
what it answers with a zero-length block.

No I/O here: the receiver feeds decoded packets in and asks what is unexplained.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from apps.itch_filter.moldudp64 import Packet


class IntervalSet:
    """Disjoint half-open integer intervals, merged on insert; cheap when inserts are in order."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def add(self, lo: int, hi: int) -> None:
        if lo >= hi:
            return
        starts, ends = self._starts, self._ends
        if starts and lo >= starts[-1]:  # the common case: at or after the last interval
            if lo <= ends[-1]:
                ends[-1] = max(ends[-1], hi)
            else:
                starts.append(lo)
                ends.append(hi)
            return
        i = bisect.bisect_left(ends, lo)  # first interval that ends at or after lo
        j = bisect.bisect_right(starts, hi)  # intervals [i, j) touch [lo, hi)
        if i < j:
            lo, hi = min(lo, starts[i]), max(hi, ends[j - 1])
        starts[i:j] = [lo]
        ends[i:j] = [hi]

    def __contains__(self, x: int) -> bool:
        i = bisect.bisect_right(self._starts, x) - 1
        return i >= 0 and x < self._ends[i]

    def gaps(self, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """The maximal sub-intervals of [lo, hi) not covered."""
        pos = lo
        i = max(bisect.bisect_right(self._starts, lo) - 1, 0)
        while pos < hi and i < len(self._starts):
            s, e = self._starts[i], self._ends[i]
            if s > pos:
                yield pos, min(s, hi)
            pos = max(pos, e)
            i += 1
        if pos < hi:
            yield pos, hi

    def __len__(self) -> int:
        return len(self._starts)


@dataclass
class Session:
    """What one receiver knows of one MoldUDP64 session."""

    first: int = 1  # sequence numbers start at 1 in MoldUDP64
    high: int = 1  # one past the highest sequence number announced so far
    ended: bool = False  # an end-of-session packet was seen
    accounted: IntervalSet = field(default_factory=IntervalSet)
    messages: int = 0  # distinct non-empty blocks received
    duplicates: int = 0  # non-empty blocks for already accounted numbers

    def unexplained(self, limit: int | None = None) -> list[tuple[int, int]]:
        """Ranges (first, count) below `high` not accounted for, at most `limit` of them."""
        out = []
        for lo, hi in self.accounted.gaps(self.first, self.high):
            out.append((lo, hi - lo))
            if limit is not None and len(out) >= limit:
                break
        return out

    @property
    def complete(self) -> bool:
        """Ended, and every number before the end is accounted for."""
        return self.ended and not self.unexplained(1)


class Tracker:
    """Sessions by id; `receive` returns the new messages a packet brings as (seq, bytes)."""

    def __init__(self, first_sequence: int = 1):
        self.first_sequence = first_sequence
        self.sessions: dict[bytes, Session] = {}

    def session(self, session: bytes) -> Session:
        s = self.sessions.get(session)
        if s is None:
            s = self.sessions[session] = Session(self.first_sequence, self.first_sequence)
        return s

    def receive(self, packet: Packet) -> list[tuple[int, bytes]]:
        s = self.session(packet.session)
        if packet.is_end_of_session:
            s.ended = True
        s.high = max(s.high, packet.next_sequence)
        new = []
        for i, block in enumerate(packet.blocks):
            seq = packet.sequence + i
            if seq in s.accounted:
                if block:
                    s.duplicates += 1
                continue
            if block:
                new.append((seq, block))
        s.messages += len(new)
        s.accounted.add(packet.sequence, packet.next_sequence)
        return new
