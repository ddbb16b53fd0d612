"""Between plain DNS over UDP and the switch's frame ports.

The switch's ports carry whole Ethernet frames as the payloads of loopback UDP datagrams
(switch/ports.py); dnspython and dnsmasq speak DNS over UDP. Two small bridges join them:

* `Gateway`, the clients' side: the address dnspython queries. It wraps each query in an
  Ethernet/IPv4/UDP frame (the client's address and port as source, port 53 as
  destination) and sends it into switch port 0. Frames coming back, from the switch (an
  answerDNS answer, sent out of the ingress port) or from the relay (the server's answer),
  are unwrapped and the DNS payload is sent to the client from the address it queried.
  It records, per query, who answered.
* `Relay`, the server's side: switch port 1's peer. It unwraps each query frame, sends the
  DNS payload to dnsmasq, and wraps dnsmasq's answer into a frame to the client, sent to
  the gateway. The answer does not cross the switch again: dns.p4's default action would
  send a response (QR set, so no query the rules can read) to the server's port.

Both count what they carry; the relay's count is the server's load as the wire sees it.
"""

from __future__ import annotations

import socket
import struct
import threading

from switch.packet import ETH_HEADER, UDP_HEADER, udp_frame

POLL = 0.2
SERVER_IP = 0x0A353535  # the server's address in the frames (10.53.53.53)
MAX_DATAGRAM = 65535


def _ip(text: str) -> int:
    return int.from_bytes(socket.inet_aton(text), "big")


def _unwrap(frame: bytes) -> tuple[int, int, int, int, bytes]:
    """(source ip, source port, destination ip, destination port, payload) of a UDP/IPv4 frame."""
    ihl = (frame[ETH_HEADER] & 0x0F) * 4
    src, dst = struct.unpack_from("!II", frame, ETH_HEADER + 12)
    l4 = ETH_HEADER + ihl
    sport, dport, ulen = struct.unpack_from("!HHH", frame, l4)
    return src, sport, dst, dport, frame[l4 + UDP_HEADER:l4 + ulen]


def question_key(payload: bytes) -> tuple[int, bytes]:
    """A DNS message's id and question section (a query's and its answer's are the same)."""
    pos = 12
    while pos < len(payload) and payload[pos]:
        pos += 1 + payload[pos]
    return struct.unpack_from("!H", payload)[0], payload[12:pos + 5]


def _socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(POLL)
    return s


class _Loops:
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def _loop(self, sock: socket.socket, handle) -> None:
        while not self._stop.is_set():
            try:
                data, peer = sock.recvfrom(MAX_DATAGRAM)
            except (socket.timeout, ConnectionRefusedError):
                continue
            except OSError:
                return  # closed by stop()
            try:
                handle(data, peer)
            except Exception as exc:  # noqa: BLE001 — one bad datagram is reported, not fatal
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _run(self, sock: socket.socket, handle, name: str) -> None:
        t = threading.Thread(target=self._loop, args=(sock, handle), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2 * POLL + 1)


class Gateway(_Loops):
    def __init__(self) -> None:
        super().__init__()
        self.client = _socket()    # what dnspython queries
        self.frames = _socket()    # switch port 0's peer; the relay sends answers here too
        self.address = self.client.getsockname()
        self.frame_address = self.frames.getsockname()
        self.switch: tuple[str, int] | None = None
        self.relay: tuple[str, int] | None = None
        self.answered_by: dict[tuple[int, int, bytes], str] = {}  # (client port, id, question) -> who
        self.sent = 0
        self.delivered = 0  # answers sent on to the clients
        self.unknown = 0  # frames from neither the switch nor the relay

    def start(self, switch: tuple[str, int], relay: tuple[str, int]) -> None:
        self.switch, self.relay = switch, relay
        self._run(self.client, self._query, "dns-gateway-queries")
        self._run(self.frames, self._answer, "dns-gateway-answers")

    def _query(self, data: bytes, peer: tuple[str, int]) -> None:
        frame = udp_frame(data, src_ip=_ip(peer[0]), src_port=peer[1], dst_ip=SERVER_IP, dst_port=53)
        self.sent += 1
        self.frames.sendto(frame, self.switch)

    def _answer(self, frame: bytes, peer: tuple[str, int]) -> None:
        who = "switch" if peer == self.switch else "server" if peer == self.relay else None
        if who is None:
            self.unknown += 1
            return
        _, _, dst, dport, payload = _unwrap(frame)
        # Recorded before the client can have its answer, so it is there when the client looks.
        self.answered_by[(dport, *question_key(payload))] = who
        self.delivered += 1
        self.client.sendto(payload, (socket.inet_ntoa(dst.to_bytes(4, "big")), dport))

    def close(self) -> None:
        self.stop()
        self.client.close()
        self.frames.close()


class Relay(_Loops):
    def __init__(self, server: tuple[str, int]) -> None:
        super().__init__()
        self.server = server
        self.frames = _socket()    # switch port 1's peer
        self.upstream = _socket()  # talks to dnsmasq
        self.frame_address = self.frames.getsockname()
        self.gateway: tuple[str, int] | None = None
        self.pending: dict[tuple[int, bytes], tuple[int, int]] = {}
        self.lock = threading.Lock()
        self.queries = 0   # query frames the switch sent to the server
        self.answers = 0   # answers of the server carried back
        self.unmatched = 0

    def start(self, gateway: tuple[str, int]) -> None:
        self.gateway = gateway
        self._run(self.frames, self._query, "dns-relay-queries")
        self._run(self.upstream, self._answer, "dns-relay-answers")

    def _query(self, frame: bytes, peer: tuple[str, int]) -> None:
        src, sport, _, _, payload = _unwrap(frame)
        with self.lock:
            self.queries += 1
            self.pending[question_key(payload)] = (src, sport)
        self.upstream.sendto(payload, self.server)

    def _answer(self, payload: bytes, peer: tuple[str, int]) -> None:
        with self.lock:
            client = self.pending.pop(question_key(payload), None)
            if client is None:
                self.unmatched += 1
                return
            self.answers += 1
        frame = udp_frame(payload, src_ip=SERVER_IP, src_port=53, dst_ip=client[0], dst_port=client[1])
        self.frames.sendto(frame, self.gateway)

    def close(self) -> None:
        self.stop()
        self.frames.close()
        self.upstream.close()
