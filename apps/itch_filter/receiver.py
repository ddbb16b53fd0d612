"""A MoldUDP64 subscriber: what a trading process runs, one UDP socket on 127.0.0.1.

Datagrams from the feed carry whole Ethernet frames (the software switch's UDP port binding,
`switch.ports.UdpPort`, sends each copy that way, and the host-filtering baseline receives the
publisher's frames the same way); answers from the retransmission server are plain MoldUDP64
payloads, told apart by their source address.

For every new message the receiver checks it against its own rules (`Matcher`): a message it
selects is *received*, with its arrival time on CLOCK_MONOTONIC (shared by every process on
the host, so the publisher's send times compare directly); a non-empty message it does not
select is *unwanted*: the normal lot of a host-filtering subscriber, and an error behind a
camus switch (which must never deliver one).

Gaps: the `sequence.Tracker` knows which numbers are unexplained. The receiver asks the
retransmission server about them every `request_interval` seconds while the feed runs (None:
only after the end of session), and after the end of session whenever no answer has come
for `RETRY_SECONDS`, until none is left, at most `max_rounds` times. Requests are coalesced
into spans of at most `SPAN` numbers, because a filtered stream has a gap between almost
every two copies.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

from apps.itch_filter import moldudp64
from apps.itch_filter.sequence import Tracker
from apps.itch_filter.subscription import Matcher, Subscription
from switch.packet import read_udp

SPAN = 4096  # numbers per request: one request explains many small gaps at once
RECV_BUFFER = 8 << 20  # room for a burst while the Python loop is busy
RETRY_SECONDS = 0.2
MAX_DATAGRAM = 65535


@dataclass
class Result:
    name: str
    port: int
    received: list[int] = field(default_factory=list)  # sequence numbers of selected messages
    recv_ns: list[int] = field(default_factory=list)  # arrival times of the live ones
    live: list[int] = field(default_factory=list)  # sequence numbers received live
    recovered: list[int] = field(default_factory=list)  # received from retransmissions
    unwanted: int = 0  # non-empty messages its own rules reject
    duplicates: int = 0
    datagrams: int = 0  # from the feed (switch copies, or the whole feed), heartbeats included
    answers: int = 0  # from the retransmission server
    bytes: int = 0  # of both
    requests: int = 0
    cpu_seconds: float = 0.0  # this process's CPU time while receiving (user + system)
    complete: bool = False
    unexplained: list[tuple[int, int]] = field(default_factory=list)


def coalesce(ranges: list[tuple[int, int]], span: int = SPAN) -> list[tuple[int, int]]:
    """(first, count) ranges merged into requests of at most `span` numbers each."""
    out: list[list[int]] = []
    for first, count in ranges:
        end = first + count
        if out and end - out[-1][0] <= span:
            out[-1][1] = end - out[-1][0]
            continue
        while end - first > span:
            out.append([first, span])
            first += span
        out.append([first, end - first])
    return [(f, c) for f, c in out]


class Receiver:
    def __init__(self, subscription: Subscription, retransmit: tuple[str, int] | None = None,
                 request_interval: float | None = None, max_rounds: int = 20):
        self.matcher = Matcher(subscription)
        self.result = Result(subscription.name, subscription.port)
        self.tracker = Tracker()
        self.retransmit = retransmit
        self.request_interval = request_interval
        self.max_rounds = max_rounds
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER)
        self.sock.bind(("127.0.0.1", 0))
        self.address = self.sock.getsockname()

    def run(self, deadline_seconds: float) -> Result:
        """Receive until the session ended and every gap is explained, or the deadline."""
        r, tracker = self.result, self.tracker
        cpu_start = time.process_time()
        deadline = time.monotonic() + deadline_seconds
        last_request = time.monotonic()
        rounds = 0
        self.sock.settimeout(0.05)
        while time.monotonic() < deadline:
            try:
                data, addr = self.sock.recvfrom(MAX_DATAGRAM)
            except socket.timeout:
                data = None
            now_ns = time.monotonic_ns()
            if data is not None:
                from_server = addr == self.retransmit
                if from_server:
                    r.answers += 1
                    last_request = now_ns / 1e9  # answers still coming: no need to ask again yet
                else:
                    r.datagrams += 1
                r.bytes += len(data)
                try:
                    packet = moldudp64.decode(data if from_server else read_udp(data).payload)
                except ValueError:
                    continue  # not MoldUDP64; a real receiver would log it
                for seq, block in tracker.receive(packet):
                    if not self.matcher.selects(block):
                        r.unwanted += 1
                        continue
                    r.received.append(seq)
                    if from_server:
                        r.recovered.append(seq)
                    else:
                        r.live.append(seq)
                        r.recv_ns.append(time.monotonic_ns())
            sessions = list(tracker.sessions.values())
            if sessions and all(s.complete for s in sessions):
                r.complete = True
                break
            if self.retransmit is None:
                continue
            ended = bool(sessions) and all(s.ended for s in sessions)
            interval = RETRY_SECONDS if ended else self.request_interval
            if interval is not None and now_ns / 1e9 - last_request >= interval:
                if ended:
                    rounds += 1
                    if rounds > self.max_rounds:
                        break
                self._request_unexplained()
                last_request = now_ns / 1e9
        r.cpu_seconds = time.process_time() - cpu_start
        r.duplicates = sum(s.duplicates for s in tracker.sessions.values())
        r.unexplained = [g for s in tracker.sessions.values() for g in s.unexplained(16)]
        return r

    def _request_unexplained(self) -> None:
        for session, s in self.tracker.sessions.items():
            for first, count in coalesce(s.unexplained()):
                self.sock.sendto(moldudp64.request(session, first, count), self.retransmit)
                self.result.requests += 1

    def close(self) -> None:
        self.sock.close()


def main(argv: list[str] | None = None) -> int:
    """Run one subscriber as its own process (the demo starts one per subscription).

    Prints its socket address as the first line of stdout, then, when done, its result as
    one line of JSON."""
    import argparse
    import dataclasses
    import json
    import sys

    p = argparse.ArgumentParser(prog="python -m apps.itch_filter.receiver")
    p.add_argument("--name", required=True)
    p.add_argument("--filter", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--retransmit", help="HOST:PORT of the retransmission server")
    p.add_argument("--request-interval", type=float, default=None)
    p.add_argument("--deadline", type=float, default=60.0)
    args = p.parse_args(argv)
    server = None
    if args.retransmit:
        host, _, port = args.retransmit.rpartition(":")
        server = (host, int(port))
    rx = Receiver(Subscription(args.name, args.filter, args.port), server, args.request_interval)
    try:
        print(f"{rx.address[0]}:{rx.address[1]}", flush=True)
        result = rx.run(args.deadline)
    finally:
        rx.close()
    json.dump(dataclasses.asdict(result), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
