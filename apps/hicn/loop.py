"""A small event loop for the demo's processes: sockets to read, timers, stop on SIGTERM.

Each process (clients, forwarder, producer) is one thread running this loop, as a software
forwarder's core would be: a socket becomes readable, its handler reads everything waiting;
timers fire at their time on CLOCK_MONOTONIC, in time order (a heap). The wait in `select`
is bounded so that a SIGTERM (which sets `stopping`) is seen within `TICK` seconds.
"""

from __future__ import annotations

import heapq
import itertools
import selectors
import signal
import time
from collections.abc import Callable

TICK = 0.2


class Loop:
    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.timers: list[tuple[int, int, Callable, tuple]] = []
        self._order = itertools.count()  # equal times fire in the order they were set
        self.stopping = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)

    def _stop(self, *_args) -> None:
        self.stopping = True

    def reader(self, sock, handler: Callable[[], None]) -> None:
        self.selector.register(sock, selectors.EVENT_READ, handler)

    def at(self, when_ns: int, fn: Callable, *args) -> None:
        heapq.heappush(self.timers, (when_ns, next(self._order), fn, args))

    def run(self, done: Callable[[], bool] = lambda: False) -> None:
        """Until SIGTERM, or until `done()` says so (checked after every round)."""
        while not self.stopping and not done():
            now = time.monotonic_ns()
            wait = TICK if not self.timers else min(TICK, max(0.0, (self.timers[0][0] - now) / 1e9))
            for key, _ in self.selector.select(wait):
                key.data()
            now = time.monotonic_ns()
            while self.timers and self.timers[0][0] <= now:
                _, _, fn, args = heapq.heappop(self.timers)
                fn(*args)
