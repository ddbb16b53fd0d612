"""The regions' monitors: one UDP socket per region on 127.0.0.1, in one monitoring process.

Region n's monitor listens on BASE + n, where the switch sends its egress port n's copies
(`camus switch serve --egress-range udp:127.0.0.1:BASE`: one sending socket in the switch,
no thread per port). Run as `python -m apps.highway.monitor --regions R --out FILE`: it binds
the R sockets (a base where all of them are free), prints `base BASE` and `ready`, and
records every frame that arrives: which region's socket, the report it holds, and when
(CLOCK_MONOTONIC). It stops when stdin says `stop N` (N: the copies the demo expects in
all) and the copies have stopped coming: once N are in and nothing more came for a moment
(so an extra copy still shows), or nothing came for `--idle` seconds, or after `--limit`.
Then it writes one JSON line per delivery to FILE and prints `done`.

It decides nothing: the demo compares what each monitor got with what the reference
evaluator says it should have got.
"""

from __future__ import annotations

import argparse
import errno
import json
import random
import selectors
import socket
import sys
import threading
import time
from collections.abc import Iterable

from apps.highway import wire
from switch.ports import grow_receive_buffer

HOST = "127.0.0.1"
GRACE_SECONDS = 0.3  # after the expected count, how long an extra copy may still come


def bind_range(count: int, host: str = HOST, tries: int = 64) -> tuple[int, list[socket.socket]]:
    """Sockets on BASE+1 .. BASE+count for a random BASE at which every one is free."""
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(20000, 60000 - count)
        socks: list[socket.socket] = []
        try:
            for n in range(1, count + 1):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(s)
                s.bind((host, base + n))
        except OSError as exc:
            for s in socks:
                s.close()
            if exc.errno != errno.EADDRINUSE:
                raise
            continue
        return base, socks
    raise OSError(f"no run of {count} free UDP ports on {host} in {tries} tries")


def udp_drops(ports: Iterable[int], host_hex: str = "0100007F") -> dict[int, int]:
    """Datagrams the kernel dropped at a full receive buffer, per local UDP port on 127.0.0.1
    (the `drops` column of /proc/net/udp); ports not found are left out."""
    wanted = set(ports)
    out: dict[int, int] = {}
    try:
        with open("/proc/net/udp") as fh:
            next(fh)
            for line in fh:
                cols = line.split()
                addr, _, port_hex = cols[1].partition(":")
                port = int(port_hex, 16)
                if addr == host_hex and port in wanted:
                    out[port] = out.get(port, 0) + int(cols[-1])
    except (OSError, ValueError, IndexError):
        pass
    return out


class Monitors:
    def __init__(self, count: int):
        self.base, self.socks = bind_range(count)
        self.selector = selectors.DefaultSelector()
        for n, s in enumerate(self.socks, 1):
            grow_receive_buffer(s)
            s.setblocking(False)
            self.selector.register(s, selectors.EVENT_READ, n)
        self.deliveries: list[tuple] = []  # (region, report fields..., arrival ns)
        self.undecodable = 0
        self.last = time.monotonic()

    def poll(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            region = key.data
            while True:
                try:
                    data = key.fileobj.recv(65535)
                except (BlockingIOError, InterruptedError):
                    break
                now = time.monotonic_ns()
                self.last = time.monotonic()
                try:
                    report = wire.decode(data)
                except ValueError:
                    self.undecodable += 1
                    continue
                self.deliveries.append((region, *report, now))

    def run(self, stop: threading.Event, expected: list[int], idle: float, limit: float) -> None:
        started = time.monotonic()
        while True:
            self.poll(0.05)
            if not stop.is_set():
                continue
            now = time.monotonic()
            quiet = now - max(self.last, stop.time)
            if (len(self.deliveries) >= expected[0] and quiet >= GRACE_SECONDS) or quiet >= idle \
                    or now - started > limit:
                return

    def drops(self) -> int:
        return sum(udp_drops(range(self.base + 1, self.base + len(self.socks) + 1)).values())


class _Stop(threading.Event):
    time = 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m apps.highway.monitor")
    p.add_argument("--regions", type=int, required=True)
    p.add_argument("--out", required=True, help="where the deliveries go, one JSON line each")
    p.add_argument("--idle", type=float, default=3.0, help="stop after this long with nothing arriving")
    p.add_argument("--limit", type=float, default=3600.0, help="stop after this long in any case")
    args = p.parse_args(argv)
    monitors = Monitors(args.regions)
    stop, expected = _Stop(), [0]

    def read_stdin() -> None:
        for line in sys.stdin:
            word, _, count = line.partition(" ")
            if word == "stop":
                expected[0] = int(count or 0)
                stop.time = time.monotonic()
                stop.set()
                return
        stop.time = time.monotonic()
        stop.set()  # the demo went away: finish with what came

    print(f"base {monitors.base}", flush=True)
    print("ready", flush=True)
    threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
    monitors.run(stop, expected, args.idle, args.limit)
    with open(args.out, "w") as fh:
        for d in monitors.deliveries:
            fh.write(json.dumps(d) + "\n")
    print(f"done {len(monitors.deliveries)} undecodable {monitors.undecodable} "
          f"drops {monitors.drops()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
