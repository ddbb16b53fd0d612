"""What the broker drives: a target that runs a pipeline, takes frames, and reports copies.

A `Target` is a packet processor the controller programs and the data path
(`shim.datapath`) feeds: it is loaded with a compiled pipeline and its entries, takes an
entry diff (`controller.diff.Changes`) for every subscription change, takes frames on an
ingress port, and reports what its egress ports emitted. `open_target(spec)` is the one
place that knows which targets exist (the embedded switch, "embedded:native" or
"embedded:python"; remote ones, `controller.remote`: "p4runtime://HOST:PORT?io=...", "switch"
and "bmv2", see `open_target`); the data path never learns which one it drives.

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


KNOWN = ("embedded:native, embedded:python, switch[:IMPL], switch-veth[:IMPL], bmv2, "
         "p4runtime://HOST:PORT?io=udp:INGRESS_HOST:INGRESS_PORT,EGRESS_HOST:BASE, "
         "fabric://HOST:PORT?host=H, fabric:///SOCKET?host=H&io=iface:NAME")


def check_spec(spec: str) -> tuple[str, str]:
    """(kind, argument) of a target spec; ValueError saying what is known if it names no
    target (so `camus serve --target` can refuse it in one line before anything starts)."""
    kind, _, arg = spec.partition(":")
    if kind in ("embedded", "switch", "switch-veth"):
        from switch.dataplane import IMPLEMENTATIONS

        if (arg or "native") not in IMPLEMENTATIONS:
            raise ValueError(f"{kind}:IMPL takes one of {', '.join(IMPLEMENTATIONS)}")
        return kind, arg or "native"
    if kind == "bmv2" and not arg:
        return kind, ""
    if kind == "p4runtime":
        from controller.remote_spec import parse_p4runtime

        parse_p4runtime(spec)
        return kind, spec
    if kind == "fabric":
        parse_fabric(spec)
        return kind, spec
    raise ValueError(f"unknown target {spec!r} (known: {KNOWN})")


def open_target(spec: str) -> Target:
    """The target `spec` names, not yet loaded:
    - "embedded:native" or "embedded:python": the in-process software switch
      (`controller.embedded`);
    - "switch[:IMPL]": `camus switch serve` started as a child process, reached over
      P4Runtime and loopback UDP (`controller.remote`, `controller.launch`);
    - "switch-veth[:IMPL]": the same inside a private network namespace behind veth pairs
      (root only): bmv2's plumbing with a switch that runs everywhere;
    - "bmv2": `simple_switch_grpc` so, with the Kafka program compiled by p4c-bm2-ss
      (both must be on PATH);
    - "p4runtime://HOST:PORT?io=udp:IHOST:IPORT,EHOST:BASE": a device already running:
      frames to IHOST:IPORT, port N's copies from EHOST:BASE+N (`camus switch serve
      --ingress udp:IHOST:IPORT --egress-range udp:EHOST:BASE`); `io=iface:PREFIX,PORTS`
      reads and writes interfaces PREFIX0..PREFIX{PORTS-1}; `device=` and `election=` set
      the P4Runtime device and election ids;
    - "fabric://HOST:PORT?host=H[&impl=IMPL]": host H of the network whose controller
      (`camus net serve`) listens at HOST:PORT (`controller.fabric_target`)."""
    kind, arg = check_spec(spec)
    if kind == "fabric":
        from controller.fabric_target import FabricTarget

        address, host, impl, iface = parse_fabric(arg)
        return FabricTarget(address, host, impl, iface)
    if kind == "embedded":
        from controller.embedded import EmbeddedTarget

        return EmbeddedTarget(arg)
    from controller.remote_spec import open_remote

    return open_remote(kind, arg)


def parse_fabric(spec: str) -> tuple[tuple[str, int] | str, str, str, str | None]:
    """(controller address: (host, port) or a Unix socket's path, network host, switch
    implementation, interface or None) of `fabric://HOST:PORT?host=H[&impl=IMPL]` or
    `fabric:///PATH?host=H[&impl=IMPL][&io=iface:NAME]`; ValueError saying what is wrong."""
    from urllib.parse import parse_qs, urlsplit

    from switch.dataplane import IMPLEMENTATIONS

    url = urlsplit(spec)
    try:
        port = url.port
    except ValueError:
        port = None
    address: tuple[str, int] | str | None = None
    if url.scheme == "fabric" and url.hostname and port is not None:
        address = (url.hostname, port)
    elif url.scheme == "fabric" and not url.netloc and url.path.startswith("/"):
        address = url.path
    if address is None:
        raise ValueError(f"{spec!r}: expected fabric://HOST:PORT?host=H or "
                         "fabric:///SOCKET_PATH?host=H")
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    unknown = set(query) - {"host", "impl", "io"}
    if unknown:
        raise ValueError(f"{spec!r}: unknown parameter(s) {', '.join(sorted(unknown))} "
                         "(known: host, impl, io)")
    iface = None
    if "io" in query:
        kind, _, iface = query["io"].partition(":")
        if kind != "iface" or not iface:
            raise ValueError(f"io={query['io']!r}: expected iface:NAME")
    if not query.get("host"):
        raise ValueError(f"{spec!r}: host= names this broker's host in the network")
    impl = query.get("impl", "native")
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl= takes one of {', '.join(IMPLEMENTATIONS)}")
    return address, query["host"], impl, iface
