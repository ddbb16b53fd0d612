"""How long an unrelated producer waits while a view's filter compiles (issue 13, item 4).

Starts this checkout's `camus serve` on a free 127.0.0.1 port, creates a source topic with
five u32 fields and an unrelated plain topic, then:

* quiet: one record at a time to the plain topic, each waited for, for `--quiet` seconds:
  the baseline round trip of this run;
* during a compile: the same loop while one AdminClient creates a view whose filter is an
  `or` of `--alternatives` five-field range conjunctions (115 by default: about 365,000 table
  entries, seconds of compile), until the CreateTopics is answered.

It prints the view's creation time, the median and worst produce round trip in each phase,
the worst as a ratio of the quiet median, and the broker's peak RSS. Compare two checkouts
by running each one's copy of this script:

    python bench/compile_stall.py
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from pathlib import Path

from broker_limits import start  # this checkout's `camus serve` on a free port

FIELDS = "abcde"


def range_filter(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    parts = []
    for _ in range(n):
        v = [rng.randrange(10**6) for _ in FIELDS]
        parts.append("(" + " and ".join(f"{x} > {a} and {x} < {a + 400000}"
                                        for x, a in zip(FIELDS, v)) + ")")
    return " or ".join(parts)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def round_trips(producer, topic: str, until) -> list[float]:
    """Produce one record at a time, each flushed, while `until()` is false."""
    out = []
    while not until():
        t0 = time.monotonic()
        producer.produce(topic, b"x")
        if producer.flush(300):
            raise SystemExit("a produce was not answered in 300 s")
        out.append(time.monotonic() - t0)
    return out


def summary(name: str, times: list[float], base: float) -> str:
    worst = max(times)
    return (f"{name:<16} {len(times):>6} {statistics.median(times) * 1e3:>10.1f} "
            f"{worst * 1e3:>10.1f} {worst / base:>12.0f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alternatives", type=int, default=115)
    ap.add_argument("--quiet", type=float, default=3.0, help="seconds of the baseline phase")
    args = ap.parse_args()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    proc, bootstrap = start(None)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        schema = ",".join(f"{x}:u32=$.{x}" for x in FIELDS)
        for f in admin.create_topics([NewTopic("src", 1, 1, config={"camus.schema": schema}),
                                      NewTopic("plain", 1, 1)]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        p.produce("src", json.dumps({x: 1 for x in FIELDS}).encode())
        p.flush(10)
        end = time.monotonic() + args.quiet
        quiet = round_trips(p, "plain", lambda: time.monotonic() > end)

        done = threading.Event()
        took: list[float] = []

        def make_view():
            t0 = time.monotonic()
            f = admin.create_topics([NewTopic("view", config={
                "camus.source": "src", "camus.filter": range_filter(args.alternatives)})],
                request_timeout=600)["view"]
            f.result(900)
            took.append(time.monotonic() - t0)
            done.set()

        maker = threading.Thread(target=make_view)
        maker.start()
        busy = round_trips(p, "plain", done.is_set)
        maker.join()
        base = statistics.median(quiet)
        print(f"view of {args.alternatives} alternatives created in {took[0]:.1f} s; "
              f"broker peak RSS {peak_rss_mib(proc.pid):.0f} MiB")
        print(f"{'phase':<16} {'produces':>6} {'median ms':>10} {'worst ms':>10} "
              f"{'worst/quiet':>13}")
        print(summary("quiet", quiet, base))
        print(summary("during compile", busy, base))
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
