"""The producer: the content's origin, behind the upstream path, answering after a delay.

    python -m apps.hicn.producer --ingress udp:@127.0.0.1:0 --client HOST:PORT \
        --delay-ms 4 --jitter-ms 0.5 --data-bytes 1024 --seed 1 --result FILE

Requests arrive two ways: as frames the switch sent out of its upstream port (`--ingress`, a
frame port: `udp:@HOST:PORT` or `iface:NAME`), answered to the client (`--client`); and as
fetches from the forwarder on its fetch socket, answered to the forwarder. Every answer
leaves `delay + jitter` after its request arrived (the kernel's arrival time), `jitter` exponential with mean
`--jitter-ms` (seeded): the extra distance to the origin, the one cost every request going
upstream pays. The producer serves any number of requests at once (it is not the
bottleneck under study). Waiting is done by the event loop's timers, not by sleeping per
request.

On start it prints `fetch HOST:PORT`, `ingress DESCRIPTION` and `ready` (stdout, flushed);
on SIGTERM it writes its result (JSON) to `--result` and exits: the request numbers it got
from the switch, with their arrival times and when their answers were due, and how many
fetches it answered.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

from apps.hicn import wire
from apps.hicn.loop import Loop
from compiler.spec import load_spec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m apps.hicn.producer")
    p.add_argument("--spec", required=True)
    p.add_argument("--ingress", required=True, help="frame port the switch's upstream copies arrive on")
    p.add_argument("--client", required=True, help="HOST:PORT answers to requests from the switch go to")
    p.add_argument("--delay-ms", type=float, default=4.0)
    p.add_argument("--jitter-ms", type=float, default=0.5)
    p.add_argument("--data-bytes", type=int, default=1024)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--result", required=True)
    args = p.parse_args(argv)

    layout = wire.MessageLayout.of(load_spec(args.spec))
    host, _, port = args.client.rpartition(":")
    client = (host, int(port))
    rng = random.Random(f"hicn-producer-{args.seed}")
    delay_ns = int(args.delay_ms * 1e6)
    jitter_rate = 1.0 / (args.jitter_ms * 1e6) if args.jitter_ms > 0 else None
    loop = Loop()
    ingress = wire.open_frames(args.ingress)
    fetch = wire.udp_socket()
    got: list[tuple[int, int, int]] = []  # (request number, arrival, planned answer) in ns
    stats = {"fetches": 0, "undecodable": 0}

    def later(arrival: int) -> int:
        return arrival + delay_ns + (int(rng.expovariate(jitter_rate)) if jitter_rate else 0)

    def answer(payload: bytes, to: tuple[str, int]) -> None:
        try:
            fetch.sendto(payload, to)
        except OSError:
            pass  # the receiver is gone: the run is over

    def on_frames() -> None:
        for frame, now in wire.receive_frames(ingress):
            try:
                number, content = layout.read_request(frame)
            except ValueError:
                stats["undecodable"] += 1
                continue
            when = later(now)
            got.append((number, now, when))
            loop.at(when, answer, wire.data(number, content, wire.FROM_PRODUCER, args.data_bytes), client)

    def on_fetch() -> None:
        for payload, sender, now in wire.receive_datagrams(fetch):
            if len(payload) < wire.FETCH.size:
                stats["undecodable"] += 1
                continue
            stats["fetches"] += 1
            loop.at(later(now), answer, payload[: wire.FETCH.size] + bytes(args.data_bytes), sender)

    loop.reader(ingress.sock, on_frames)
    loop.reader(fetch, on_fetch)
    print(f"fetch {fetch.getsockname()[0]}:{fetch.getsockname()[1]}", flush=True)
    print(f"ingress {ingress.description}", flush=True)
    print("ready", flush=True)
    loop.run()
    with open(args.result, "w") as fh:
        json.dump({"requests": got, **stats}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
