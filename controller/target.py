"""What the broker drives: a target that runs a pipeline, takes frames, and reports copies.

A `Target` is a packet processor the controller programs and the data path
(`shim.datapath`) feeds: it is loaded with a compiled pipeline and its entries, takes an
entry diff (`controller.diff.Changes`) for every subscription change, takes frames on an
ingress port, and reports what its egress ports emitted. This module is the interface
alone and imports none of the targets: `controller.targets.open_target(spec)` is the one
place that knows which exist (the embedded switch, "embedded:native" or "embedded:python";
remote ones, `controller.remote`: "p4runtime://HOST:PORT?io=...", "switch" and "bmv2"; a
network's host, "fabric://..."); the data path never learns which one it drives.

Frames go in packed, as the switch's fast path takes them: one buffer holding the frames
back to back and a u32 little-endian length per frame. What comes out is `Emitted`: the
copies back to back in one buffer and, per copy, four u32 LE words <input frame index,
egress port, offset, length>. A target that cannot tell which input frame a copy came
from (a remote one reading its ports) writes `NO_INDEX`; the data path then reassembles
records from the copies' bytes instead of matching them to what it sent.

Theory of operation, the asynchronous side. A send is answered by one report, later or
at once: the target calls the receiver the data path registered (`set_receiver`) with
the send's token and everything that send made the target emit. The embedded switch
calls it inline, before `send` returns; a remote target calls it from its I/O when it
knows the send's copies are all out. The alternative, `send` returning a future, was not
chosen: a future already done still runs its callbacks on a later loop iteration
(asyncio) or forces a thread to wait on it (concurrent.futures), while a receiver costs
the embedded switch nothing and gives the data path one code path for both. The
contract a target keeps:
  - one report per send, in the order of the sends (the data path keeps per-port
    reassembly state and appends to logs in offset order);
  - the receiver is called on the thread that drives the data path (the broker's event
    loop): a target whose I/O runs on its own thread hands each report over with
    `loop.call_soon_threadsafe`;
  - `load`, `apply` and `entries` are synchronous; frames still under way may meet the
    entries from before or after a write (the data path judges a report by the
    subscriptions of its send's time, so either is safe).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from controller.diff import Changes

NO_INDEX = 0xFFFF_FFFF  # a copy whose input frame the target does not know
INGRESS_PORT = 0  # frames of records produced to this broker
# Frames for this broker's own endpoints only: a new view's replay of its source, records
# that came from the network. A fabric target keeps them here; to every other target it is
# one more ingress port (the Kafka pipeline does not read it).
LOCAL_INGRESS = 510


class TargetError(Exception):
    """The target refused a write: its state is no longer what the caller believes, and
    `load` with the whole state is the way back."""


class TargetUnavailable(Exception):
    """The target cannot be started or reached (a remote device that is not there, a tool
    that is not installed): `camus serve` says so in one line and exits."""


@dataclass(frozen=True)
class Emitted:
    """What one send made the egress ports emit: the copies back to back in `buf`, and
    per copy <input frame index or NO_INDEX, egress port, offset in buf, length> as u32 LE
    words in `copies`."""

    buf: bytes
    copies: bytes


Receiver = Callable[[Any, Emitted], None]  # (the send's token, what it emitted)


class Target(abc.ABC):
    """A packet processor behind the broker (see the module text for the contract)."""

    def __init__(self) -> None:
        self.receiver: Receiver | None = None

    def set_receiver(self, receiver: Receiver) -> None:
        """Where reports go: `receiver(token, emitted)`, once per `send`, in send order."""
        self.receiver = receiver

    @abc.abstractmethod
    def load(self, pipeline: dict, entries: dict) -> None:
        """Run `pipeline` (pipeline.json) holding exactly `entries` (entries.json),
        whatever the target held before."""

    @abc.abstractmethod
    def apply(self, changes: Changes) -> None:
        """Write an entry diff, in `changes.steps()` order; TargetError if a write is refused
        (the target may then hold part of the diff: `load` it whole)."""

    def stage(self, pipeline: dict, entries: dict | Callable[[], dict],
              changes: Changes) -> Callable[[], None]:
        """Prepare, on any thread, taking the target from its entries to `entries` (the
        diff `changes`); return the call that makes it take effect, which the caller runs on
        the thread that sends. The broker stages on its compile worker so that a large
        change costs the event loop only the commit. `entries` may be a call that makes the
        document, for a target to make only if it needs it (an incremental compile makes a
        change's diff without the whole document). By default nothing is prepared and the
        commit is `apply(changes)`."""
        return partial(self.apply, changes)

    @abc.abstractmethod
    def entries(self) -> list[dict]:
        """The table entries the target holds, in entries.json form (a P4Runtime Read)."""

    @abc.abstractmethod
    def send(self, ingress_port: int, buf: bytes, lengths: bytes, token: Any) -> None:
        """Frames packed in `buf` (their u32 LE `lengths`) into `ingress_port`; what they make
        the target emit is reported to the receiver with `token`."""

    def read_cells(self, register: str, first: int, count: int) -> list[tuple[int, int, int]]:
        """(window tag, n, s) of register cells first..first+count-1 (IR 4: docs/pipeline-ir.md
        "State"), as the target holds them; TargetError where it cannot say."""
        raise TargetError(f"{type(self).__name__} cannot read registers")

    def close(self) -> None:
        """Release what the target holds (connections, threads); the embedded one holds none."""

    # A target joined to a network of switches (`controller.fabric_target`) overrides these;
    # for every other target the broker is alone.

    def carries(self, topic_number: int) -> bool:
        """Whether records of this topic go somewhere besides this broker's endpoints (so
        the data path sends them even when no endpoint of its own wants them)."""
        return False

    def topic_number(self, name: str) -> int | None:
        """The number topic `name` is to carry in the Kafka header; None: the broker numbers
        its topics itself."""
        return None

    def subscribed(self, rules: list) -> None:
        """The endpoint rules (`compiler.ast.Rule`, one per endpoint) the target's entries
        were compiled from, after each committed change."""

    def set_arrivals(self, fn: Callable[[list[bytes]], None]) -> None:
        """Where frames that entered elsewhere and were delivered to this broker go: `fn`
        gets them in arrival order, on the broker's event loop."""
