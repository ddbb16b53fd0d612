"""Port bindings: where the switch's numbered ports take frames from and send them to.

A binding carries whole Ethernet frames:
* `QueuePort`: in-process; frames sent out go to a callback (by default a queue the caller
  reads), frames come in through `inject`. This is how the broker embeds the switch.
* `UdpPort` (`udp:HOST:PORT[@BINDHOST:BINDPORT]`): each frame is one UDP datagram's payload
  on 127.0.0.1. Frames out go to HOST:PORT; frames in arrive on the bound address (by
  default an ephemeral port on 127.0.0.1; `local` says which). `udp:@BINDHOST:BINDPORT`
  only receives.
* `UdpRange` (`--egress-range udp:HOST:BASE`): copies for any port N that has no binding of
  its own go, from one socket, to HOST:BASE+N. A controller whose endpoints come and go (the
  broker's remote target, `controller.remote`) then listens on BASE+N for port N without the
  switch being restarted to bind it.
* `InterfacePort` (`iface:NAME`): a Linux interface through an AF_PACKET raw socket, e.g. a
  veth end inside a network namespace. Frames this host sends on the interface are seen by
  the socket as outgoing and skipped, so the switch never re-ingests its own output.

`Ports` runs them: one receive thread per binding (each with a bounded wait, so stopping
takes at most `POLL_SECONDS`), every received frame through `Device.process`, and each
output copy out of its egress port's binding. Copies for a port with no binding are
counted in `unbound` and dropped, like a frame sent out of an unplugged port.
"""

from __future__ import annotations

import abc
import queue
import socket
import sys
import threading
from collections.abc import Callable

from switch.device import Device

POLL_SECONDS = 0.2
MAX_FRAME = 65535
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
RECEIVE_BUFFER = 8 << 20  # bytes: a burst of frames waits in the socket, not lost at its edge


def grow_receive_buffer(sock: socket.socket, size: int = RECEIVE_BUFFER) -> int:
    """Ask for a large receive buffer: beyond net.core.rmem_max with CAP_NET_ADMIN
    (SO_RCVBUFFORCE), else as large as the kernel allows. The default (about 200 KiB) holds a
    few hundred frames: a burst from a producer would overflow it and be lost. Answers the
    size the kernel granted (it reports twice what it keeps for data)."""
    force = getattr(socket, "SO_RCVBUFFORCE", None)
    try:
        if force is None:
            raise PermissionError
        sock.setsockopt(socket.SOL_SOCKET, force, size)
    except OSError:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
        except OSError:
            pass  # the default buffer: bursts may lose frames, which the sender must expect
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


class PortError(ValueError):
    """A port binding that cannot be parsed or opened."""


class Port(abc.ABC):
    """One binding: `send` a frame out; frames received are handed to `deliver` by `receive`."""

    number: int

    @abc.abstractmethod
    def send(self, frame: bytes) -> None: ...

    def receive(self, stop: threading.Event) -> bytes | None:
        """Wait up to POLL_SECONDS for one frame (None if none came or the port only sends)."""
        stop.wait(POLL_SECONDS)
        return None

    def close(self) -> None:
        pass

    @property
    def description(self) -> str:
        return type(self).__name__


class QueuePort(Port):
    """An in-process port: output to `on_output` (default: the `output` queue), input by `inject`."""

    def __init__(self, number: int, on_output: Callable[[bytes], None] | None = None):
        self.number = number
        self.output: queue.Queue[bytes] = queue.Queue()
        self._input: queue.Queue[bytes] = queue.Queue()
        self._on_output = on_output or self.output.put

    def send(self, frame: bytes) -> None:
        self._on_output(frame)

    def inject(self, frame: bytes) -> None:
        """A frame arriving on this port."""
        self._input.put(frame)

    def receive(self, stop: threading.Event) -> bytes | None:
        try:
            return self._input.get(timeout=POLL_SECONDS)
        except queue.Empty:
            return None

    @property
    def description(self) -> str:
        return "in-process queue"


def _address(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 0xFFFF:
        raise PortError(f"{what}: expected HOST:PORT, got {text!r}")
    return host, int(port)


class UdpPort(Port):
    def __init__(self, number: int, remote: tuple[str, int] | None, local: tuple[str, int] = ("127.0.0.1", 0)):
        self.number = number
        self.remote = remote
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.bind(local)
        except OSError as exc:
            self.sock.close()
            raise PortError(f"port {number}: cannot bind {local[0]}:{local[1]}: {exc}") from None
        grow_receive_buffer(self.sock)
        self.sock.settimeout(POLL_SECONDS)
        self.local = self.sock.getsockname()

    def send(self, frame: bytes) -> None:
        if self.remote is not None:
            try:
                self.sock.sendto(frame, self.remote)
            except OSError:
                pass  # nobody listening (ICMP unreachable): the frame is lost, as on a wire

    def receive(self, stop: threading.Event) -> bytes | None:
        try:
            data, _ = self.sock.recvfrom(MAX_FRAME)
            return data
        except (socket.timeout, ConnectionRefusedError):
            return None

    def close(self) -> None:
        self.sock.close()

    @property
    def description(self) -> str:
        out = f" -> {self.remote[0]}:{self.remote[1]}" if self.remote else ""
        return f"udp {self.local[0]}:{self.local[1]}{out}"


class UdpRange:
    """Where copies for ports without a binding go: port N to HOST:BASE+N, from one socket."""

    def __init__(self, host: str, base: int):
        self.host, self.base = host, base
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self, number: int, frame: bytes) -> bool:
        """Send `frame` as port `number`'s copy; False if the port is beyond the range."""
        if not 0 <= self.base + number <= 0xFFFF:
            return False
        try:
            self.sock.sendto(frame, (self.host, self.base + number))
        except OSError:
            pass  # nobody listening: lost, as on a wire
        return True

    def close(self) -> None:
        self.sock.close()

    @property
    def description(self) -> str:
        return f"udp {self.host}:{self.base}+N"


def parse_range(spec: str) -> UdpRange:
    """`udp:HOST:BASE` as a `UdpRange`."""
    kind, sep, rest = spec.partition(":")
    if kind != "udp" or not sep:
        raise PortError(f"--egress-range: expected udp:HOST:BASE, got {spec!r}")
    return UdpRange(*_address(rest, "--egress-range"))


class InterfacePort(Port):
    def __init__(self, number: int, ifname: str):
        self.number = number
        self.ifname = ifname
        try:
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except (OSError, AttributeError) as exc:
            raise PortError(f"port {number}: cannot open a raw socket (needs Linux and CAP_NET_RAW): {exc}") from None
        try:
            self.sock.bind((ifname, 0))
        except OSError as exc:
            self.sock.close()
            raise PortError(f"port {number}: no interface {ifname!r}: {exc}") from None
        grow_receive_buffer(self.sock)
        self.sock.settimeout(POLL_SECONDS)

    def send(self, frame: bytes) -> None:
        try:
            self.sock.send(frame)
        except OSError:
            pass  # interface down or frame too long for it: lost, as on a wire

    def receive(self, stop: threading.Event) -> bytes | None:
        try:
            data, addr = self.sock.recvfrom(MAX_FRAME)
        except socket.timeout:
            return None
        return None if addr[2] == PACKET_OUTGOING else data

    def close(self) -> None:
        self.sock.close()

    @property
    def description(self) -> str:
        return f"interface {self.ifname}"


def parse_binding(number: int, spec: str) -> Port:
    """Open the binding `spec` (`udp:HOST:PORT[@BINDHOST:BINDPORT]`, `udp:@HOST:PORT`, `iface:NAME`)."""
    kind, sep, rest = spec.partition(":")
    if kind == "udp" and sep:
        remote_text, at, local_text = rest.partition("@")
        remote = _address(remote_text, f"port {number}") if remote_text else None
        local = _address(local_text, f"port {number}") if at else ("127.0.0.1", 0)
        if remote is None and not at:
            raise PortError(f"port {number}: {spec!r} names neither a peer nor a local address")
        return UdpPort(number, remote, local)
    if kind == "iface" and rest:
        return InterfacePort(number, rest)
    raise PortError(f"port {number}: unknown binding {spec!r} (udp:HOST:PORT[@HOST:PORT] or iface:NAME)")


def parse_port_option(text: str, default_number: int | None = None) -> tuple[int, str]:
    """`N=SPEC` (or, with a default number, just `SPEC`) as (N, SPEC)."""
    number, sep, spec = text.partition("=")
    if sep and number.isdigit():
        return int(number), spec
    if default_number is not None:
        return default_number, text
    raise PortError(f"expected N=BINDING, got {text!r}")


class Ports:
    """The bound ports of a running switch, and the threads moving frames through `device`."""

    def __init__(self, device: Device):
        self.device = device
        self.egress: dict[int, Port] = {}
        self.bindings: list[Port] = []
        self.range: UdpRange | None = None  # where copies for unbound ports go, if anywhere
        self.unbound = 0
        self.fabric = None  # a switch.fabric_egress.FabricEgress inside a network of switches
        self.errors = 0  # frames whose processing raised (reported once on stderr)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._count_lock = threading.Lock()

    def add(self, port: Port, egress: bool = True) -> Port:
        """Bind `port`; `egress=False` for ingress-only bindings that must not receive copies."""
        if egress:
            if port.number in self.egress:
                raise PortError(f"port {port.number} is bound twice")
            self.egress[port.number] = port
        self.bindings.append(port)
        if self._threads:
            self._start(port)
        return port

    def set_range(self, where: UdpRange) -> None:
        """Copies for ports without a binding go to `where` instead of being dropped."""
        self.range = where

    def start(self) -> None:
        for port in self.bindings:
            self._start(port)

    def _start(self, port: Port) -> None:
        t = threading.Thread(target=self._run, args=(port,), name=f"port-{port.number}", daemon=True)
        self._threads.append(t)
        t.start()

    def _run(self, port: Port) -> None:
        while not self._stop.is_set():
            try:
                frame = port.receive(self._stop)
            except OSError:
                if self._stop.is_set():
                    return
                raise
            if frame is None:
                continue
            try:
                self.forward(frame, port.number)
            except Exception as exc:  # one bad frame or send must not silence the port for good
                with self._count_lock:
                    self.errors += 1
                if self.errors == 1:
                    print(f"switch port {port.number}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    def forward(self, frame: bytes, in_port: int) -> None:
        """Run one frame through the device and send its copies out of their ports."""
        fabric = self.fabric
        for egress, copy in self.device.process(frame, in_port):
            if fabric is not None:
                egress = fabric.port(in_port, egress, frame)
                if egress is None:
                    continue
            out = self.egress.get(egress)
            if out is not None:
                out.send(copy)
            elif self.range is None or not self.range.send(egress, copy):
                with self._count_lock:
                    self.unbound += 1

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2 * POLL_SECONDS + 1)
        for port in self.bindings:
            port.close()
        if self.range is not None:
            self.range.close()
