"""Anomaly subscribers: one UDP socket on 127.0.0.1 per switch egress port, and what arrived.

A subscriber is what an operator's alerting process would run: it names a rule (a packet
subscription over the top hop record, e.g. `switch_id == 2 and hop_latency > 100`), gets
the egress port the rule forwards to, and reads whole Ethernet frames from its socket (the
switch's `UdpPort` for that port sends each copy as one datagram). Every frame is decoded
back to the INT stack and the sender's packet number, so the demo can compare what came
with what should have come, packet by packet.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

from apps.int_events.fabric import packet_number
from apps.int_events.int_md import Hop, NotIntMd, decode
from switch.packet import read_udp

RECV_TIMEOUT = 0.2
RCVBUF = 8 << 20  # large enough that a burst of copies is never dropped by the kernel


@dataclass(frozen=True)
class Subscription:
    name: str
    filter: str
    port: int | None  # the switch egress port; None for a Kafka view's consumer

    @property
    def rule(self) -> str:
        return f"{self.filter} : fwd({self.port})"


@dataclass(frozen=True)
class Event:
    """One delivered anomaly: the sender's packet number and time, and the top record."""

    number: int
    time_ns: int
    top: Hop
    hops: int
    frame_bytes: int


@dataclass
class UdpSubscriber:
    subscription: Subscription
    sock: socket.socket = field(init=False, repr=False)
    events: list[Event] = field(default_factory=list)
    undecodable: int = 0
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(RECV_TIMEOUT)
        self.last_arrival = time.monotonic()

    @property
    def address(self) -> tuple[str, int]:
        return self.sock.getsockname()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"sub-{self.subscription.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                frame = self.sock.recv(65535)
            except (socket.timeout, ConnectionRefusedError):
                continue
            except OSError:
                return  # closed under us by stop()
            self.last_arrival = time.monotonic()
            try:
                stack, rest = decode(read_udp(frame).payload)
                number, time_ns = packet_number(rest)
            except (NotIntMd, ValueError, IndexError):
                self.undecodable += 1
                continue
            self.events.append(Event(number, time_ns, stack.hops[0], len(stack.hops), len(frame)))

    def wait(self, count: int, idle_seconds: float = 1.0, limit_seconds: float = 30.0) -> None:
        """Wait until `count` events came (then a short grace period, so that an unexpected
        extra copy is still seen), or nothing came for `idle_seconds`, or `limit_seconds`
        passed. It never decides anything: the caller compares what came afterwards."""
        started = time.monotonic()
        while time.monotonic() - started < limit_seconds:
            quiet = time.monotonic() - max(self.last_arrival, started)
            if quiet > idle_seconds or (len(self.events) >= count and quiet > 0.05):
                return
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * RECV_TIMEOUT + 1)
        self.sock.close()
