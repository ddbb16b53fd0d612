"""ITCH, INT, DNS and plain IPv4 on one switch: the mixed stream's rate against each
application's stream alone (issue 26 item 6).

The frames are tests/switch/four_apps_helpers.py's (`mixed_stream`: MoldUDP64 packets of 1-4
ITCH messages, INT reports, DNS queries, plain UDP datagrams routed by longest prefix), the
rules and routes its defaults. In the same run, on the same frames:

* mixed: the whole stream through the combined program (every application and the routes);
* KIND on the combined program: only that kind's frames of the stream, same program;
* KIND alone: those frames through a program holding that application alone (and the routes).

Rates are frames per second of this process's CPU time (`time.process_time`), median of the
rounds, the programs compared taking turns round by round. The Python reference switch runs
all four (answerDNS runs there only); the native switch runs ITCH, INT and IPv4 (it refuses
a program with DNS), so its mixed stream has no DNS frames. "Plain IP alone" is a program
whose one application (int, without rules) never sees the stream's plain datagrams: a
program has at least one application.

Run: `python bench/four_apps.py` (`--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's camus, not an installed one

from tests.switch.four_apps_helpers import (DNS_RULES, INT_RULES, ITCH_RULES,  # noqa: E402
                                            ROUTES, board, mixed_stream)
from switch.dataplane import new  # noqa: E402

IN_PORT = 20


def rates(boards: list, impl: str, frames: list[bytes], rounds: int) -> list[float]:
    """Each program's rate on `frames`, the programs taking turns round by round (so a
    burst of load from the machine's other jobs falls on all of them alike)."""
    planes = []
    for b in boards:
        dp = new(b.pipeline, impl)
        dp.load_entries(b.entries())
        dp.process_batch(frames[:100], IN_PORT)  # warm-up
        planes.append(dp)
    times: list[list[float]] = [[] for _ in boards]
    for _ in range(rounds):
        for dp, t in zip(planes, times):
            started = time.process_time()
            dp.process_batch(frames, IN_PORT)
            t.append(time.process_time() - started)
    return [len(frames) / statistics.median(t) for t in times]


def alone(kind: str, with_dns: bool):
    """A program with one application (and the routes), or the routes alone for "ip"."""
    from compiler.multi import Switchboard
    from compiler.routes import parse_routes

    full = board(dns_=DNS_RULES if with_dns else None)
    if kind == "ip":  # no application at all: a program needs one, so take one whose UDP
        # port the stream's plain datagrams never use, with no rules
        spec = full.spec("int")
        return Switchboard({"int": (spec, [])}, parse_routes(ROUTES))
    return Switchboard({kind: (full.spec(kind), full.rules(kind))}, parse_routes(ROUTES))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.frames, args.rounds = 2000, 2
    assert ITCH_RULES and INT_RULES  # the helpers' defaults are the rules measured
    for impl, with_dns in (("python", True), ("native", False)):
        stream = [(k, f) for k, f in mixed_stream(1, args.frames) if with_dns or k != "dns"]
        combined = board(dns_=DNS_RULES if with_dns else None)
        mixed, = rates([combined], impl, [f for _, f in stream], args.rounds)
        print(f"\n{impl} switch ({'ITCH, INT, DNS' if with_dns else 'ITCH, INT'} and IPv4), "
              f"{len(stream)} frames, {args.rounds} rounds, frames/s of CPU:")
        print(f"  {'stream':<8} {'frames':>7} {'combined':>12} {'alone':>12} "
              f"{'combined/alone':>15}")
        print(f"  {'mixed':<8} {len(stream):>7} {mixed:>12,.0f} {'':>12} {'':>15}")
        kinds = ("itch", "int", "dns", "ip") if with_dns else ("itch", "int", "ip")
        for kind in kinds:
            frames = [f for k, f in stream if k == kind]
            on_combined, by_itself = rates([combined, alone(kind, with_dns)], impl, frames,
                                           args.rounds)
            print(f"  {kind:<8} {len(frames):>7} {on_combined:>12,.0f} {by_itself:>12,.0f} "
                  f"{on_combined / by_itself:>15.2f}")


if __name__ == "__main__":
    main()
