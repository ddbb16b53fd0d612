"""The forwarder: an hICN forwarder with a content store, a bounded cache and service rate.

    python -m apps.hicn.forwarder --spec SPEC --ingress udp:@127.0.0.1:0 --client HOST:PORT \
        --producer HOST:PORT --service-us 150 --capacity 500 --data-bytes 1024 --result FILE

What a software hICN forwarder does with the requests the switch sends it (port 1):

* Every packet it handles, a request from the switch or data coming back from the
  producer, costs it `--service-us` of its one core, first come first served (from the
  kernel's arrival time of each packet, in the order the process reads them): a request
  that arrives while the core is busy waits in its queue. That is the forwarder's capacity
  (1e6 / service-us packets a second) and the queueing that loads it. The core's time is
  kept as a schedule (when it is next free) and each packet's handling completes at its
  scheduled time by the event loop's timer; the process does not burn the CPU it models,
  so that the shared machine's load weighs on both configurations alike instead of on the
  model.
* When a request's handling completes, its content is looked up in the content store, an
  LRU cache of `--capacity` entries: a hit is answered to the client at once; a miss is
  sent to the producer as a fetch, unless a fetch of that content is already pending (the
  pending-interest table aggregates it). Data coming back is handled (one more service
  time), stored in the cache (evicting the least recently used entry) and answered to
  every request waiting for it.

On start it prints `ingress DESCRIPTION` and `ready`; on SIGTERM it writes its result
(JSON) to `--result` and exits: per request from the switch its number, arrival, when its
handling completed on the core's schedule and whether it hit; when each answer left on
that schedule (a miss: when its data's handling completed); the completion times of
everything it handled (its load over time); its busy time. (What it sends goes out when the
event loop reaches the completion, which on a busy machine can be later: the clients'
latencies include that.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict

from apps.hicn import wire
from apps.hicn.loop import Loop
from compiler.spec import load_spec


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


class Forwarder:
    def __init__(self, loop: Loop, layout: wire.MessageLayout, ingress, client, producer,
                 service_ns: int, capacity: int, data_bytes: int) -> None:
        self.loop, self.layout, self.ingress = loop, layout, ingress
        self.client, self.producer = client, producer
        self.service_ns, self.capacity, self.data_bytes = service_ns, capacity, data_bytes
        self.sock = wire.udp_socket()
        self.cache: OrderedDict[int, None] = OrderedDict()
        self.pending: dict[int, list[int]] = {}  # content -> request numbers waiting for it
        self.free_at = 0  # when the core is next free (monotonic ns)
        self.busy_ns = 0
        self.requests: list[tuple[int, int, int, bool]] = []  # number, arrival, done, hit
        self.answered: list[tuple[int, int]] = []  # number, when its answer left on the schedule
        self.handled: list[int] = []  # completion time of every packet handled
        self.fetches = 0
        self.evictions = 0
        self.undecodable = 0
        loop.reader(ingress.sock, self.on_frames)
        loop.reader(self.sock, self.on_data)

    def _schedule(self, arrival: int, fn, *args) -> None:
        """Queue a packet's handling on the core: it completes one service time after the
        core is free, and `fn(*args, completion)` runs then."""
        start = max(arrival, self.free_at)
        self.free_at = start + self.service_ns
        self.busy_ns += self.service_ns
        self.loop.at(self.free_at, fn, *args, self.free_at)

    def _send(self, payload: bytes, to) -> None:
        try:
            self.sock.sendto(payload, to)
        except OSError:
            pass  # the peer is gone: the run is over

    def on_frames(self) -> None:
        for frame, now in wire.receive_frames(self.ingress):
            try:
                number, content = self.layout.read_request(frame)
            except ValueError:
                self.undecodable += 1
                continue
            self._schedule(now, self.request_done, number, content, now)

    def request_done(self, number: int, content: int, arrival: int, completion: int) -> None:
        self.handled.append(completion)
        hit = content in self.cache
        self.requests.append((number, arrival, completion, hit))
        if hit:
            self.cache.move_to_end(content)
            self._send(wire.data(number, content, wire.FROM_CACHE, self.data_bytes), self.client)
            self.answered.append((number, completion))
            return
        waiting = self.pending.setdefault(content, [])
        waiting.append(number)
        if len(waiting) == 1:
            self.fetches += 1
            self._send(wire.FETCH.pack(self.fetches, content), self.producer)

    def on_data(self) -> None:
        for payload, _, now in wire.receive_datagrams(self.sock):
            if len(payload) < wire.FETCH.size:
                self.undecodable += 1
                continue
            _, content = wire.FETCH.unpack_from(payload)
            self._schedule(now, self.data_done, content)

    def data_done(self, content: int, completion: int) -> None:
        self.handled.append(completion)
        self.cache[content] = None
        self.cache.move_to_end(content)
        if len(self.cache) > self.capacity:
            self.cache.popitem(last=False)
            self.evictions += 1
        for number in self.pending.pop(content, []):
            self._send(wire.data(number, content, wire.FROM_FORWARDER_FETCH, self.data_bytes), self.client)
            self.answered.append((number, completion))

    def result(self) -> dict:
        return {"requests": self.requests, "answered": self.answered, "handled": self.handled, "busy_ns": self.busy_ns,
                "fetches": self.fetches, "evictions": self.evictions, "undecodable": self.undecodable,
                "service_ns": self.service_ns, "capacity": self.capacity}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m apps.hicn.forwarder")
    p.add_argument("--spec", required=True)
    p.add_argument("--ingress", required=True, help="frame port the switch's forwarder copies arrive on")
    p.add_argument("--client", required=True, help="HOST:PORT answers go to")
    p.add_argument("--producer", required=True, help="the producer's fetch socket, HOST:PORT")
    p.add_argument("--service-us", type=float, default=150.0)
    p.add_argument("--capacity", type=int, default=500)
    p.add_argument("--data-bytes", type=int, default=1024)
    p.add_argument("--result", required=True)
    args = p.parse_args(argv)
    loop = Loop()
    fwd = Forwarder(loop, wire.MessageLayout.of(load_spec(args.spec)), wire.open_frames(args.ingress),
                    _address(args.client), _address(args.producer), int(args.service_us * 1000),
                    args.capacity, args.data_bytes)
    print(f"ingress {fwd.ingress.description}", flush=True)
    print("ready", flush=True)
    loop.run()
    with open(args.result, "w") as fh:
        json.dump(fwd.result(), fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
