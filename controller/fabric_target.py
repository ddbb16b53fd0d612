"""A broker's target on a network of switches: `camus serve --target fabric://HOST:PORT?host=H`.

The broker is host H of the network a fabric controller (`camus net serve`,
`controller.fabric_service`) runs. The target is the embedded software switch, which keeps
filtering for this broker's own endpoints exactly as it does alone, plus three links to the
network:
  * records produced to this broker (frames sent on `INGRESS_PORT`) are also sent, frame
    for frame, into H's access switch; frames sent on `LOCAL_INGRESS` (a new view's replay
    of its source, records that came from the network) stay here, so nothing goes round;
  * after every subscription change the data path commits, the broker's endpoint rules
    (`subscribed`) become H's subscriptions at the controller, one filter per endpoint,
    published by a thread (the event loop never waits for the controller) and published
    again every `REPUBLISH` seconds, which restores them after a controller restart;
  * copies the network delivers to H are handed, in arrival order, to the broker's event
    loop (`set_arrivals`), which stores the records and delivers them to its endpoints.
Topic numbers come from the controller (`topic_number`), so every broker puts the same
number in the header for the same topic name.

Frames travel over loopback UDP to and from the host's socket at the controller (the
network in the controller's process), or, with `io=iface:NAME` (a broker on a Mininet host,
`camus net serve --mininet`), on the host's interface as they are (AF_PACKET: frames this
host sends are not read back; only IPv4/UDP to the Kafka port is taken).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import zlib
from collections.abc import Callable
from typing import Any

from compiler.ast import Rule
from controller.embedded import EmbeddedTarget
from controller.filter_wire import to_json
from controller.host_io import ETH_P_ALL, PACKET_OUTGOING, is_udp_to
from controller.target import INGRESS_PORT, TargetUnavailable
from switch.ports import grow_receive_buffer as grow_buffer

log = logging.getLogger("camus.fabric")
REPUBLISH = 1.0  # seconds between publications of an unchanged subscription set
RCVBUF = 64 << 20  # room for bursts of frames while the reader catches up
API_TIMEOUT = 30.0
KAFKA_UDP_PORT = 9094  # p4/kafka/kafka.p4's @udp_port, where reframed records go


def grow_receive_buffer(sock: socket.socket, size: int = RCVBUF) -> int:
    """`switch.ports.grow_receive_buffer`, saying in the log when the kernel granted less
    (without root it caps the buffer at net.core.rmem_max, about 200 KB by default: a burst
    of a few thousand frames beyond what the reader keeps up with is then dropped)."""
    granted = grow_buffer(sock, size)
    if granted < size:
        log.warning("fabric: a UDP receive buffer of %d bytes (asked %d): bursts may lose "
                    "frames; raise net.core.rmem_max or run as root", granted, size)
    return granted


def host_mac(host: str) -> bytes:
    return b"\x02\xca" + zlib.crc32(host.encode()).to_bytes(4, "big")


class _Api:
    """One JSON-lines connection to the controller, reopened when it breaks."""

    def __init__(self, address: tuple[str, int] | str, on_reconnect: Callable[[], None]) -> None:
        self.address = address
        self.lock = threading.Lock()
        self.conn: socket.socket | None = None
        self.reader = None
        self.on_reconnect = on_reconnect

    def _open(self) -> None:
        if isinstance(self.address, str):  # a Unix socket: reachable from any namespace
            self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.conn.settimeout(API_TIMEOUT)
            try:
                self.conn.connect(self.address)
            except OSError:
                self.conn.close()
                raise
        else:
            self.conn = socket.create_connection(self.address, timeout=API_TIMEOUT)
        self.reader = self.conn.makefile("rb")

    def call(self, **req: Any) -> dict:
        """The controller's answer; OSError if it cannot be reached, ValueError if it refused."""
        with self.lock:
            for attempt in (0, 1):
                fresh = self.conn is None
                try:
                    if fresh:
                        self._open()
                    self.conn.sendall(json.dumps(req).encode() + b"\n")
                    line = self.reader.readline()
                    if not line:
                        raise ConnectionError("the fabric controller closed the connection")
                    break
                except OSError:
                    self.close()
                    if attempt:
                        raise
            else:  # pragma: no cover - the loop breaks or raises
                raise ConnectionError("unreachable")
        answer = json.loads(line)
        if fresh and req.get("op") != "attach":
            self.on_reconnect()  # a controller that restarted knows nothing of this host
        if not answer.get("ok"):
            raise ValueError(answer.get("error", "refused"))
        return answer

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
        self.conn = self.reader = None


class FabricTarget(EmbeddedTarget):
    """The embedded switch of host `host`'s broker, joined to the network at `controller`."""

    def __init__(self, controller: tuple[str, int] | str, host: str, impl: str = "native",
                 iface: str | None = None, bind: str = "127.0.0.1") -> None:
        super().__init__(impl)
        self.host = host
        self.iface = iface
        # The frames this host sends carry it as their Ethernet source (locally administered,
        # from the host's name): a receiver reassembles each sender's fragments apart, since
        # two brokers number the records of one partition independently.
        self.mac = host_mac(host)
        if iface is None:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.bind((bind, 0))
        else:
            try:
                self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                          socket.htons(ETH_P_ALL))
                self.sock.bind((iface, 0))
            except OSError as exc:
                raise TargetUnavailable(f"interface {iface}: {exc}") from None
        grow_receive_buffer(self.sock)
        self.sock.settimeout(0.2)
        self.udp_port = KAFKA_UDP_PORT
        self.api = _Api(controller, self._attach)
        self.ingress: tuple[str, int] | None = None
        try:
            self._attach()
        except (OSError, ValueError) as exc:
            self.sock.close()
            where = controller if isinstance(controller, str) else "%s:%d" % controller
            raise TargetUnavailable(f"fabric controller at {where}: {exc}") from None
        self._arrivals: Callable[[list[bytes]], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # What to publish next (None: nothing new) and what was published last (None:
        # nothing yet: the first publication waits up to REPUBLISH for the broker's first
        # commit, so a restarted broker does not drop its subscriptions and add them back).
        self._filters: list | None = None
        self._published: list | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self.stats = {"frames_sent": 0, "frames_received": 0, "strangers": 0, "publications": 0,
                      "publish_errors": 0}
        self._threads = [threading.Thread(target=self._receive, name="fabric-rx", daemon=True),
                         threading.Thread(target=self._publish, name="fabric-pub", daemon=True)]
        for t in self._threads:
            t.start()

    def _attach(self) -> None:
        answer = self.api.call(op="attach", host=self.host,
                               deliver=None if self.iface else list(self.sock.getsockname()[:2]))
        self.ingress = tuple(answer["ingress"]) if answer["ingress"] else None

    # --- what the broker asks of a fabric target ----------------------------------------

    def carries(self, topic_number: int) -> bool:
        return True  # the access switch decides who in the network wants it

    def topic_number(self, name: str) -> int:
        return int(self.api.call(op="topic", name=name)["number"])

    def subscribed(self, rules: list[Rule]) -> None:
        with self._cond:
            self._filters = [to_json(r.filter) for r in rules]
            self._cond.notify()

    def set_arrivals(self, fn: Callable[[list[bytes]], None]) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None  # no loop: frames are handed over on the receiving thread
        self._arrivals = fn

    def send(self, ingress_port: int, buf: bytes, lengths: bytes, token: Any) -> None:
        if ingress_port == INGRESS_PORT and (self.ingress is not None or self.iface):
            pos = 0
            for i in range(0, len(lengths), 4):
                n = int.from_bytes(lengths[i:i + 4], "little")
                frame = bytearray(buf[pos:pos + n])
                frame[6:12] = self.mac
                try:
                    if self.iface:
                        self.sock.send(frame)
                    else:
                        self.sock.sendto(frame, self.ingress)
                    self.stats["frames_sent"] += 1
                except OSError as exc:
                    log.warning("fabric: a frame to the network was not sent: %s", exc)
                pos += n
        super().send(ingress_port, buf, lengths, token)

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify()
        for t in self._threads:
            t.join(timeout=2)
        try:
            self.api.call(op="detach", host=self.host)
        except (OSError, ValueError):
            pass
        self.api.close()
        self.sock.close()

    # --- threads ------------------------------------------------------------------------

    def _publish(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                if self._filters is None:
                    self._cond.wait(REPUBLISH)
                if self._stop.is_set():
                    return
                filters = self._filters if self._filters is not None else self._published
                self._filters = None
            if filters is None:
                filters = []
            try:
                self.api.call(op="subscriptions", host=self.host, filters=filters)
                self._published = filters
                self.stats["publications"] += 1
            except (OSError, ValueError) as exc:
                self.stats["publish_errors"] += 1
                log.warning("fabric: host %s's subscriptions not published (retried): %s",
                            self.host, exc)
                with self._cond:
                    if self._filters is None:
                        self._filters = filters
                self._stop.wait(REPUBLISH)

    def _ours(self, frame: bytes, sender) -> bool:
        """Whether a frame read is one the network delivered to this host."""
        if self.iface:  # not one this host sent; Kafka's packets, not the kernel's chatter
            return sender[2] != PACKET_OUTGOING and is_udp_to(frame, self.udp_port)
        if tuple(sender[:2]) == self.ingress:
            return True
        self.stats["strangers"] += 1
        return False

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                frame, sender = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            frames = []
            while True:
                if self._ours(frame, sender):
                    frames.append(frame)
                if len(frames) >= 4096:
                    break
                try:
                    frame, sender = self.sock.recvfrom(65535, socket.MSG_DONTWAIT)
                except (BlockingIOError, OSError):
                    break
            if not frames or self._arrivals is None:
                continue
            self.stats["frames_received"] += len(frames)
            if self._loop is not None:
                try:
                    self._loop.call_soon_threadsafe(self._arrivals, frames)
                except RuntimeError:
                    return  # the loop is closed: the broker is gone
            else:
                self._arrivals(frames)
