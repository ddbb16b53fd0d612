"""The publisher's MoldUDP64 retransmission (re-request) server, aware of camus views.

It keeps the last `capacity` messages of each session it published and answers a 20-byte
request (session, first sequence, count) with ordinary downstream packets sent back to the
requester's address (wire-formats.md 2.4).

What it answers depends on who asks. A requester that is not behind a camus switch port gets
the messages themselves, as any MoldUDP64 server would send them. A requester that is (the
address a switch port sends its copies to, given in `views`) gets the range *as that port
sees the feed*: each message runs through the same compiled tables as the live traffic (its
own `switch.dataplane` loaded with the same pipeline and entries), and every message the port
does not select is answered with a zero-length block. Unlike the live copies, an answer
keeps its trailing zero-length blocks, so it accounts for every number requested: a
subscriber learns, for each number of a gap, whether it lost a message of its own or the
switch filtered that number out (see `apps.itch_filter.sequence`). The cost of asking is two
bytes per filtered message, never the filtered message itself.

`Store` and `answer` do no I/O; `Server` owns the socket and a thread.
"""

from __future__ import annotations

import collections
import socket
import threading
from collections.abc import Iterable

from apps.itch_filter import moldudp64
from switch.dataplane import DataPlane
from switch.packet import read_mold, read_udp, udp_frame

CHUNK = 128  # messages per pass through the tables: 128 * (50 + 2) bytes fits a 9216-byte frame
MAX_PAYLOAD = 1400  # bytes of MoldUDP64 per answer packet, to fit an Ethernet MTU with headers
POLL_SECONDS = 0.05


class Store:
    """The last `capacity` messages of each session, by sequence number."""

    def __init__(self, capacity: int = 1 << 20):
        self.capacity = capacity
        self._sessions: dict[bytes, tuple[int, collections.deque]] = {}

    def add(self, session: bytes, first_sequence: int, messages: Iterable[bytes]) -> None:
        first, ring = self._sessions.get(session, (first_sequence, collections.deque()))
        if first + len(ring) != first_sequence and ring:
            raise ValueError(f"session {session!r}: expected sequence {first + len(ring)}, "
                             f"got {first_sequence}")
        if not ring:
            first = first_sequence
        ring.extend(messages)
        while len(ring) > self.capacity:
            ring.popleft()
            first += 1
        self._sessions[session] = (first, ring)

    def get(self, session: bytes, sequence: int, count: int) -> tuple[int, list[bytes]]:
        """(first sequence held, messages) for the part of the range still held."""
        if session not in self._sessions:
            return sequence, []
        first, ring = self._sessions[session]
        lo, hi = max(sequence, first), min(sequence + count, first + len(ring))
        return lo, [ring[i - first] for i in range(lo, hi)]


def answer(store: Store, request: bytes, view: tuple[DataPlane, int] | None,
           udp_port: int = moldudp64.UDP_PORT, max_bytes: int = MAX_PAYLOAD) -> list[bytes]:
    """The downstream packets answering one request (none if nothing requested is held)."""
    session, seq, count = moldudp64.decode_request(request)
    first, held = store.get(session, seq, count)
    blocks: list[bytes] = []
    for i in range(0, len(held), CHUNK):
        chunk = held[i: i + CHUNK]
        blocks += chunk if view is None else _as_seen_by(view, session, first + i, chunk, udp_port)
    return pack(session, first, blocks, max_bytes)


def pack(session: bytes, first: int, blocks: list[bytes], max_bytes: int = MAX_PAYLOAD) -> list[bytes]:
    """Consecutive blocks numbered from `first` as packets of at most `max_bytes` each (a
    packet always takes at least one block)."""
    out, start, size = [], 0, moldudp64.HEADER_BYTES
    for i, b in enumerate(blocks):
        if i > start and (size + 2 + len(b) > max_bytes or i - start == moldudp64.MAX_BLOCKS):
            out.append(moldudp64.encode(session, first + start, blocks[start:i]))
            start, size = i, moldudp64.HEADER_BYTES
        size += 2 + len(b)
    if start < len(blocks):
        out.append(moldudp64.encode(session, first + start, blocks[start:]))
    return out


def _as_seen_by(view: tuple[DataPlane, int], session: bytes, start: int, chunk: list[bytes],
                udp_port: int) -> list[bytes]:
    """`chunk` with every message the view's port does not select replaced by b""."""
    dataplane, port = view
    frame = udp_frame(moldudp64.encode(session, start, chunk), dst_port=udp_port)
    kept = [b""] * len(chunk)
    for egress, copy in dataplane.process(frame, 0):
        if egress == port:
            _, copy_seq, blocks = read_mold(read_udp(copy).payload)
            for j, block in enumerate(blocks):
                if block:
                    kept[copy_seq - start + j] = block
    return kept


class Server:
    """Answers requests on a UDP socket on 127.0.0.1 from a thread, until `stop`."""

    def __init__(self, store: Store, views: dict[tuple[str, int], tuple[DataPlane, int]] | None = None,
                 host: str = "127.0.0.1", port: int = 0):
        self.store = store
        self.views = views if views is not None else {}
        self.lock = threading.Lock()  # guards `store` against the publisher adding to it
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.sock.settimeout(POLL_SECONDS)
        self.address = self.sock.getsockname()
        self.requests = 0
        self.answered_messages = 0
        self.malformed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mold-retransmit", daemon=True)

    def start(self) -> "Server":
        self._thread.start()
        return self

    def add(self, session: bytes, first_sequence: int, messages: list[bytes]) -> None:
        with self.lock:
            self.store.add(session, first_sequence, messages)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(2048)
            except (socket.timeout, ConnectionRefusedError):
                continue
            except OSError:
                return
            try:
                with self.lock:
                    packets = answer(self.store, data, self.views.get(addr))
            except moldudp64.MoldError:
                self.malformed += 1
                continue
            self.requests += 1
            for p in packets:
                self.answered_messages += moldudp64.HEADER.unpack_from(p)[2]
                try:
                    self.sock.sendto(p, addr)
                except OSError:
                    pass  # requester gone; it will ask again or give up

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1 + 2 * POLL_SECONDS)
        self.sock.close()
