"""What travels between the demo's processes: request frames, data datagrams, frame ports.

A *request* (an hICN interest) is an Ethernet/IPv4/UDP frame to the spec's UDP port whose
payload is one hICN message laid out by the spec (p4/hicn/hicn.p4: version, flags, the
content identifier, the time it was sent) and, after it, the request number the client gave
it. The switch reads the message, decides, and sends the frame out of port 1 (the forwarder)
or port 2 (upstream, to the producer) unchanged.

*Data* (the answer) is a plain UDP datagram to the client: request number, content, who
answered (the forwarder from its cache, the forwarder after fetching, or the producer
directly) and `data_bytes` of content. Answers do not pass the switch: the rules route
requests; in hICN the data retraces the request's path, which here would be one more
traversal of the same loopback in both configurations alike.

A forwarder's *fetch* on a cache miss is a UDP datagram to the producer's fetch socket
(fetch number, content), answered by a datagram with the same two numbers and the data.

Frame ports (`open_frames`) use the software switch's own bindings (`switch.ports`):
`udp:HOST:PORT` frames as UDP payloads on loopback, `iface:NAME` an interface (a veth end
facing bmv2).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from compiler.spec import Spec
from switch.packet import read_udp, udp_frame
from switch.ports import PACKET_OUTGOING, InterfacePort, Port, parse_binding

CONTENT = "hicn.content"
TRAILER = struct.Struct("!Q")  # the request number, after the hICN message
DATA = struct.Struct("!QQB")  # request number, content, who answered
FETCH = struct.Struct("!QQ")  # fetch number, content
FROM_CACHE, FROM_FORWARDER_FETCH, FROM_PRODUCER = 1, 2, 3
SOURCES = {FROM_CACHE: "forwarder (cache hit)", FROM_FORWARDER_FETCH: "forwarder (miss, fetched)",
           FROM_PRODUCER: "producer (upstream)"}
CLIENT_IP, PRODUCER_IP = 0x0A000064, 0x0A0000C8  # 10.0.0.100 and 10.0.0.200, for the frames' looks
MAX_DATAGRAM = 65535
RECEIVE_BUFFER = 8 << 20
# Arrival times are the kernel's (SO_TIMESTAMPNS: when the datagram or frame reached the
# socket), not when the process got round to reading it: a process the shared machine did
# not schedule for a while still knows when each request came, so the forwarder's queue is
# that of a core of its own. The kernel stamps CLOCK_REALTIME; the processes compare
# CLOCK_MONOTONIC, so each process converts with the offset between the two at its start.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; Python does not name it
_STAMP = struct.Struct("qq")  # struct timespec
_ANCILLARY = socket.CMSG_SPACE(_STAMP.size)
_REALTIME_TO_MONOTONIC = time.monotonic_ns() - time.time_ns()


@dataclass(frozen=True)
class MessageLayout:
    """Where each field of the spec's message lies, to write and read requests without the
    switch's code: (bit offset from the message start, width) by qualified name."""

    fields: dict[str, tuple[int, int]]
    message_bytes: int
    udp_port: int

    @classmethod
    def of(cls, spec: Spec) -> "MessageLayout":
        fields, offset = {}, 0
        for h in spec.message_headers:
            for f in h.fields:
                fields[f.qname] = (offset + f.bit_offset, f.width)
            offset += h.bits
        if CONTENT not in fields:
            raise ValueError(f"the spec has no field {CONTENT}")
        return cls(fields, spec.message_bytes, spec.udp_port)

    def encode(self, values: dict[str, int]) -> bytes:
        bits = self.message_bytes * 8
        word = 0
        for name, value in values.items():
            offset, width = self.fields[name]
            if not 0 <= value < 1 << width:
                raise ValueError(f"{name} = {value} does not fit in {width} bits")
            word |= value << (bits - offset - width)
        return word.to_bytes(self.message_bytes, "big")

    def decode(self, message: bytes, name: str) -> int:
        offset, width = self.fields[name]
        word = int.from_bytes(message[: self.message_bytes], "big")
        return (word >> (self.message_bytes * 8 - offset - width)) & ((1 << width) - 1)

    def request(self, number: int, values: dict[str, int]) -> bytes:
        payload = self.encode(values) + TRAILER.pack(number)
        return udp_frame(payload, dst_port=self.udp_port, src_port=40000 + number % 20000,
                         src_ip=CLIENT_IP, dst_ip=PRODUCER_IP)

    def read_request(self, frame: bytes) -> tuple[int, int]:
        """(request number, content) of a request frame; ValueError if it is not one."""
        view = read_udp(frame)
        if view.dst_port != self.udp_port or len(view.payload) < self.message_bytes + TRAILER.size:
            raise ValueError("not an hICN request")
        (number,) = TRAILER.unpack_from(view.payload, self.message_bytes)
        return number, self.decode(view.payload, CONTENT)


def data(number: int, content: int, source: int, size: int) -> bytes:
    return DATA.pack(number, content, source) + bytes(size)


def read_data(datagram: bytes) -> tuple[int, int, int]:
    return DATA.unpack_from(datagram)


def udp_socket(bind: tuple[str, int] = ("127.0.0.1", 0)) -> socket.socket:
    """A non-blocking UDP socket on loopback with a receive buffer a burst fits in and
    arrival times from the kernel."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(bind)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    except OSError:
        pass
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setblocking(False)
    return sock


def open_frames(spec_text: str) -> Port:
    """A frame port (`udp:HOST:PORT` to send to, `udp:@HOST:PORT` to receive on, or
    `iface:NAME`), made non-blocking for an event loop, arrival times from the kernel."""
    port = parse_binding(0, spec_text)
    port.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    port.sock.setblocking(False)
    return port


def _receive(sock: socket.socket):
    """One (data, sender, arrival on CLOCK_MONOTONIC in ns) from `sock`; BlockingIOError if
    none is waiting."""
    data, ancillary, _, address = sock.recvmsg(MAX_DATAGRAM, _ANCILLARY)
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _STAMP.size:
            seconds, nanoseconds = _STAMP.unpack_from(raw)
            return data, address, seconds * 1_000_000_000 + nanoseconds + _REALTIME_TO_MONOTONIC
    return data, address, time.monotonic_ns()  # no stamp (not Linux): when it was read


def receive_frames(port: Port) -> list[tuple[bytes, int]]:
    """Every frame waiting on `port` (non-blocking) with its arrival time, leaving out what
    this host sent on an interface (an AF_PACKET socket sees its own output too)."""
    frames = []
    while True:
        try:
            frame, address, arrival = _receive(port.sock)
        except (BlockingIOError, InterruptedError):
            return frames
        except ConnectionRefusedError:
            continue
        if isinstance(port, InterfacePort) and address[2] == PACKET_OUTGOING:
            continue
        frames.append((frame, arrival))


def receive_datagrams(sock: socket.socket) -> list[tuple[bytes, tuple[str, int], int]]:
    """Every datagram waiting on `sock`: (payload, sender, arrival time)."""
    out = []
    while True:
        try:
            out.append(_receive(sock))
        except (BlockingIOError, InterruptedError):
            return out
        except ConnectionRefusedError:
            continue
