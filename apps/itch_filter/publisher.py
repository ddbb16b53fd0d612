"""The feed publisher: MoldUDP64 packets out at a chosen rate, through camus or straight to hosts.

Each packet is framed as Ethernet/IPv4/UDP to the feed's multicast group on UDP port 1234 and
sent one of two ways:

* `via_switch`: the frame goes into the embedded software switch (a `switch.dataplane`,
  native by default) on port 0, inline in this thread, and each copy leaves by its
  egress port, bound to its subscriber's UDP socket on 127.0.0.1 (a copy travels as one
  datagram holding the whole frame, as `switch.ports.UdpPort` sends it);
* `to_hosts`: the frame goes to every subscriber's socket (the host-filtering baseline; on a
  LAN it would be one multicast frame, here it is one datagram per subscriber).

The send time of each packet (CLOCK_MONOTONIC, taken before the switch) is kept per sequence
number for latency. Heartbeats (count 0, the next sequence number) go to every subscriber
once per `heartbeat_seconds` of sending, and end-of-session packets after the last data
packet; neither is subscription traffic, which the switch would forward by `ipv4_lpm` to a
single port only, so they go to every subscriber directly, like a control-plane flood.

`drop` names packet indexes lost on the publisher's link (before the switch) and `drop_copy`
copies lost after it, on one subscriber's link: the tests use them to make deterministic
loss that the retransmission server must repair.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence

from apps.itch_filter import moldudp64
from apps.itch_filter.retransmit import Server
from switch.dataplane import DataPlane
from switch.packet import udp_frame

FEED_GROUP = 0xE9360C01  # 233.54.12.1, a multicast group in the range exchanges use
SEND_BUFFER = 8 << 20


def frames(session: bytes, packets: Sequence[tuple[int, list[bytes]]]) -> list[bytes]:
    return [udp_frame(moldudp64.encode(session, seq, msgs), dst_port=moldudp64.UDP_PORT, dst_ip=FEED_GROUP)
            for seq, msgs in packets]


class Publisher:
    def __init__(self, session: bytes, packets: Sequence[tuple[int, list[bytes]]],
                 server: Server | None = None, heartbeat_seconds: float = 1.0):
        self.session = session
        self.packets = packets
        self.frames = frames(session, packets)
        self.server = server
        self.heartbeat_seconds = heartbeat_seconds
        self.next_sequence = packets[-1][0] + len(packets[-1][1]) if packets else 1
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        self.sock.bind(("127.0.0.1", 0))
        self.send_ns: dict[int, int] = {}  # sequence number -> send time of its packet
        self.heartbeats = 0
        self.copies = 0

    def via_switch(self, dataplane: DataPlane, port_addresses: dict[int, tuple[str, int]],
                   rate: float, drop: Callable[[int], bool] = lambda i: False,
                   drop_copy: Callable[[int, int], bool] = lambda i, port: False) -> None:
        """Publish through the switch; copies for ports without an address are discarded, and
        so are those `drop_copy(packet index, port)` names (loss on one subscriber's link)."""
        def send(i: int, frame: bytes) -> None:
            for egress, copy in dataplane.process(frame, 0):
                addr = port_addresses.get(egress)
                if addr is not None and not drop_copy(i, egress):
                    self.sock.sendto(copy, addr)
                    self.copies += 1
        self._publish(send, list(port_addresses.values()), rate, drop)

    def to_hosts(self, addresses: list[tuple[str, int]], rate: float,
                 drop: Callable[[int], bool] = lambda i: False) -> None:
        """Publish the whole feed to every host (the host-filtering baseline)."""
        def send(i: int, frame: bytes) -> None:
            for addr in addresses:
                self.sock.sendto(frame, addr)
                self.copies += 1
        self._publish(send, addresses, rate, drop)

    def _publish(self, send: Callable[[int, bytes], None], everyone: list[tuple[str, int]],
                 rate: float, drop: Callable[[int], bool]) -> None:
        """Send packet i when message number i would be due at `rate` messages per second."""
        due, last_heartbeat = _message_clock(rate), time.monotonic()
        first = self.packets[0][0] if self.packets else 1
        for i, (seq, msgs) in enumerate(self.packets):
            due(seq - first)
            if self.server is not None:
                self.server.add(self.session, seq, msgs)
            now = time.monotonic_ns()
            for k in range(len(msgs)):
                self.send_ns[seq + k] = now
            if not drop(i):
                send(i, self.frames[i])
            if now / 1e9 - last_heartbeat >= self.heartbeat_seconds:
                self._flood(moldudp64.heartbeat(self.session, seq + len(msgs)), everyone)
                self.heartbeats += 1
                last_heartbeat = now / 1e9
        for _ in range(3):  # servers repeat the end of session; one may be lost
            self._flood(moldudp64.end_of_session(self.session, self.next_sequence), everyone)
            time.sleep(0.01)

    def _flood(self, payload: bytes, everyone: list[tuple[str, int]]) -> None:
        frame = udp_frame(payload, dst_port=moldudp64.UDP_PORT, dst_ip=FEED_GROUP)
        for addr in everyone:
            self.sock.sendto(frame, addr)

    def close(self) -> None:
        self.sock.close()


def _message_clock(rate: float) -> Callable[[int], None]:
    """A function that waits until message number n is due at `rate` per second.

    Each packet waits for its own scheduled time, so a slow moment is caught up instead of
    drifting; sleep() overshoots by 0.1 ms or more, so the last stretch is spun."""
    start = time.perf_counter()

    def wait(n: int) -> None:
        if rate <= 0:
            return
        due = start + n / rate
        ahead = due - time.perf_counter()
        if ahead > 0.002:
            time.sleep(ahead - 0.001)
        while time.perf_counter() < due:
            pass
    return wait

