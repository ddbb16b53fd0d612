"""The clients: one process making every request, so that the switch sees them in one order.

    python -m apps.hicn.clients --spec SPEC --schedule FILE --streams 2 --window 4 \
        --stream-content ID --duration 6 --grace 5 --result FILE

It prints `reply HOST:PORT` (where answers must be sent) and then waits for one line on
stdin, `go BINDING`: the frame port of the switch's ingress (`udp:HOST:PORT`, or
`iface:NAME` for bmv2's veth), so that the forwarder and producer can be started between the
two with the reply address. Then, from that moment (t0):

* browsing requests at the times the schedule gives (JSON: [[microseconds after t0,
  content], ...], drawn by `apps.hicn.workload`), open loop;
* `--streams` closed-loop streams for `--stream-content`: each sends `--window` requests at
  t0 and one more each time one of its answers comes back, until `--duration` has passed.

Every request is stamped with its send time, on CLOCK_MONOTONIC, in the field and unit the
spec declares with `query_timestamp` (the switch's meter windows run on that field, so the
reference evaluator can replay exactly what the switch saw). Requests leave through one
socket in the order they are numbered, which is the order the switch receives them.

A request's latency runs from its send to its answer's arrival at the reply socket (the
kernel's time). It stops when every request has been answered, or `--grace` seconds after the last was due,
writes its result (JSON) to `--result` and exits: per request (number, client kind: 0
browsing, k the stream, content, time-field value, send ns), per answer (number, arrival ns,
who answered).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from apps.hicn import wire
from apps.hicn.loop import Loop
from compiler.spec import load_spec

UNIT_NS = {"ns": 1, "us": 1000, "ms": 1_000_000}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m apps.hicn.clients")
    p.add_argument("--spec", required=True)
    p.add_argument("--schedule", required=True)
    p.add_argument("--streams", type=int, default=0)
    p.add_argument("--window", type=int, default=1)
    p.add_argument("--stream-content", type=int, default=0)
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--grace", type=float, default=5.0)
    p.add_argument("--time-field", required=True, help="the spec's query_timestamp field")
    p.add_argument("--time-unit", choices=sorted(UNIT_NS), required=True)
    p.add_argument("--result", required=True)
    args = p.parse_args(argv)

    layout = wire.MessageLayout.of(load_spec(args.spec))
    time_width = layout.fields[args.time_field][1]
    unit_ns = UNIT_NS[args.time_unit]
    with open(args.schedule) as fh:
        schedule = json.load(fh)
    reply = wire.udp_socket()
    print(f"reply {reply.getsockname()[0]}:{reply.getsockname()[1]}", flush=True)
    line = sys.stdin.readline().split()
    if len(line) != 2 or line[0] != "go":
        print(f"expected 'go BINDING' on stdin, got {line!r}", file=sys.stderr)
        return 2
    switch = wire.open_frames(line[1])

    loop = Loop()
    sent: list[tuple[int, int, int, int, int]] = []  # number, kind, content, time field, send ns
    kind_of: list[int] = []
    answers: list[tuple[int, int, int]] = []  # number, arrival ns, source
    answered: set[int] = set()
    t0 = time.monotonic_ns()
    end = t0 + int(args.duration * 1e9)
    browsing_left = [len(schedule)]

    def send(kind: int, content: int) -> None:
        now = time.monotonic_ns()
        number = len(sent)
        stamp = (now // unit_ns) & ((1 << time_width) - 1)
        switch.send(layout.request(number, {wire.CONTENT: content, args.time_field: stamp,
                                            "hicn.version": 1}))
        sent.append((number, kind, content, stamp, now))
        kind_of.append(kind)

    def browse(content: int) -> None:
        browsing_left[0] -= 1
        send(0, content)

    def on_answers() -> None:
        for payload, _, arrived in wire.receive_datagrams(reply):
            if len(payload) < wire.DATA.size:
                continue
            number, _content, source = wire.read_data(payload)
            answers.append((number, arrived, source))
            if number in answered or number >= len(sent):
                continue  # a duplicate or a stranger: kept in `answers`, judged by the demo
            answered.add(number)
            kind = kind_of[number]
            if kind and time.monotonic_ns() < end:
                send(kind, args.stream_content)

    for t_us, content in schedule:
        loop.at(t0 + t_us * 1000, browse, content)
    for k in range(1, args.streams + 1):
        for _ in range(args.window):
            send(k, args.stream_content)
    loop.reader(reply, on_answers)

    def done() -> bool:
        now = time.monotonic_ns()
        if now < end or browsing_left[0]:
            return False
        return len(answered) == len(sent) or now >= end + int(args.grace * 1e9)

    loop.run(done)
    with open(args.result, "w") as fh:
        json.dump({"t0": t0, "end": end, "sent": sent, "answers": answers}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
