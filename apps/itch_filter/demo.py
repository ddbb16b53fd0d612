"""`camus demo itch`: publisher -> software switch -> subscribers, against host filtering.

Two modes over the same packets at the same rate, alternating for a few rounds so that
other work on the machine weighs on both alike:

* camus: the subscriptions are compiled (`compiler.compile`) into the native software switch
  (`switch.dataplane`), which runs inline in the publisher's process; each egress port is
  bound to one subscriber's UDP socket on 127.0.0.1, so a subscriber receives only copies
  holding messages its rule selected (pruned per docs/pipeline-ir.md).
* host: the same subscribers receive every packet and filter in the host.

Each subscriber is its own process (a trading process would be), so subscribers run in
parallel and the ones reading the whole feed pay for it in CPU as they would on a host. A
message's latency is its arrival at its subscriber, after the subscriber's own rule check,
minus the time its packet left the publisher (before the switch), both on CLOCK_MONOTONIC.
Then the Kafka half: the same feed through `camus serve` into one view per subscriber
(`apps.itch_filter.kafka_view` says what they are, `apps.kafka_demo` runs them).

Expected deliveries come from `compiler.semantics.evaluate` over all the rules; every
subscriber must have received exactly its expected messages in every run and view, with
missing ones recovered through the retransmission server (which makes gaps in the filtered
stream explainable, see `apps.itch_filter.retransmit`).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from apps.itch_filter import binaryfile, feed, kafka_view, moldudp64
from apps.itch_filter.publisher import Publisher
from apps.itch_filter.receiver import Result
from apps.itch_filter.retransmit import Server, Store
from apps.itch_filter.subscription import (DEMO_SUBSCRIPTIONS, Fields, Subscription, expected_ports,
                                           itch_spec, rules_text)
from apps.kafka_demo import ViewsRead, through_views
from compiler.compile import Compiled, compile_rules
from compiler.rules import parse_rules
from switch.dataplane import load

SESSION = moldudp64.session_id("CAMUSDEMO1")
ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0  # subscriber processes import the compiler before they bind


@dataclass
class ModeRun:
    mode: str  # "camus" or "host"
    results: dict[str, Result]
    send_ns: dict[int, int]
    seconds: float
    datagrams_sent: int
    retransmit_requests: int
    load: float  # the 1-minute load average after the run: other work on the machine shows here

    def latencies_us(self, name: str) -> list[float]:
        r = self.results[name]
        return [(t - self.send_ns[s]) / 1000 for s, t in zip(r.live, r.recv_ns)]


@dataclass
class Demo:
    subscriptions: tuple[Subscription, ...]
    messages: list[bytes]
    packets: list[tuple[int, list[bytes]]]
    expected: dict[str, list[int]]
    rate: float
    source: str
    compiled: Compiled
    runs: list[ModeRun] = field(default_factory=list)
    kafka: ViewsRead | None = None  # the Kafka half; `received` by subscriber name

    def kafka_ok(self, name: str) -> bool:
        """The view's records are exactly the subscriber's messages: offset = sequence - 1."""
        got = self.kafka.received[name]
        return ([o + 1 for o, _ in got] == self.expected[name]
                and all(v == self.messages[o] for o, v in got))

    def ok(self) -> bool:
        return (bool(self.runs) and all(_ok(self, run, s) for run in self.runs for s in self.subscriptions)
                and (self.kafka is None or all(self.kafka_ok(s.name) for s in self.subscriptions)))


def _start_subscriber(s: Subscription, retransmit: tuple[str, int], request_interval: float | None,
                      deadline: float) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "apps.itch_filter.receiver", "--name", s.name, "--filter", s.filter,
           "--port", str(s.port), "--retransmit", f"{retransmit[0]}:{retransmit[1]}",
           "--deadline", str(deadline)]
    if request_interval is not None:
        cmd += ["--request-interval", str(request_interval)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)


def _read_line(proc: subprocess.Popen, timeout: float, what: str) -> str:
    """One line of a subscriber's stdout within `timeout` seconds (RuntimeError otherwise)."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if not line:
        raise RuntimeError(f"{what}: no answer (exit code {proc.poll()})")
    return line


def prepare(n_messages: int, seed: int = 1, rate: float = 50000.0, replay: str | Path | None = None,
            subscriptions: Sequence[Subscription] = DEMO_SUBSCRIPTIONS) -> Demo:
    if replay is not None:
        messages, source = list(binaryfile.read(replay, limit=n_messages)), f"replay of {replay}"
    else:
        messages, source = feed.synthetic_day(n_messages, seed), f"synthetic day, seed {seed}"
    packets = feed.packets(messages, seed)
    spec = itch_spec()
    rules = parse_rules(rules_text(subscriptions), spec)
    compiled = compile_rules(spec, rules)
    fields_ = Fields(spec)
    expected: dict[str, list[int]] = {s.name: [] for s in subscriptions}
    by_port = {s.port: s.name for s in subscriptions}
    for seq0, msgs in packets:
        for k, m in enumerate(msgs):
            for port in expected_ports(rules, fields_, m):
                if port in by_port:
                    expected[by_port[port]].append(seq0 + k)
    return Demo(tuple(subscriptions), messages, packets, expected, rate, source, compiled)


def run_mode(demo: Demo, mode: str, drop: Callable[[int], bool] = lambda i: False,
             request_interval: float | None = None, impl: str = "native",
             drop_copy: Callable[[int, int], bool] = lambda i, port: False) -> ModeRun:
    """Publish the demo's packets in one mode and collect every subscriber's result (`drop`
    and `drop_copy` make loss, see `Publisher`)."""
    compiled = demo.compiled
    views: dict = {}
    server = Server(Store(), views).start()
    deadline = len(demo.messages) / demo.rate + 20.0 if demo.rate > 0 else 60.0
    procs: dict[str, subprocess.Popen] = {}
    addresses: dict[int, tuple[str, int]] = {}
    try:
        for s in demo.subscriptions:
            procs[s.name] = _start_subscriber(s, server.address, request_interval, deadline)
        for s in demo.subscriptions:
            line = _read_line(procs[s.name], START_TIMEOUT, f"subscriber {s.name}")
            host, _, port = line.strip().rpartition(":")
            addresses[s.port] = (host, int(port))
        publisher = Publisher(SESSION, demo.packets, server)
        started = time.perf_counter()
        if mode == "camus":
            dataplane = load(compiled.pipeline, compiled.entries, impl=impl)
            for port, addr in addresses.items():
                # The server answers each subscriber as its switch port sees the feed.
                views[addr] = (load(compiled.pipeline, compiled.entries, impl=impl), port)
            publisher.via_switch(dataplane, addresses, demo.rate, drop, drop_copy)
        else:
            publisher.to_hosts(list(addresses.values()), demo.rate, drop)
        seconds = time.perf_counter() - started
        results = {}
        for s in demo.subscriptions:
            line = _read_line(procs[s.name], deadline + 10, f"subscriber {s.name}")
            results[s.name] = Result(**json.loads(line))
        run = ModeRun(mode, results, publisher.send_ns, seconds, publisher.copies, server.requests,
                      os.getloadavg()[0])
        publisher.close()
        return run
    finally:
        server.stop()
        for p in procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99 (numpy's linear interpolation, as the plot's legend) and the maximum."""
    import numpy as np

    if not len(values):
        return {}
    p50, p90, p99 = np.percentile(np.asarray(values, dtype=float), [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(max(values))}


def run_kafka(demo: Demo, log_path: Path) -> ViewsRead:
    """Produce the feed to a `camus serve` child process and read every subscriber's view."""
    names = {kafka_view.view_name(s): s.name for s in demo.subscriptions}
    read = through_views(log_path, kafka_view.CLIENT, kafka_view.TOPIC, kafka_view.SCHEMA,
                         kafka_view.views(demo.subscriptions), demo.messages,
                         {view: len(demo.expected[name]) for view, name in names.items()})
    return replace(read, received={names[view]: got for view, got in read.received.items()})


def _ok(demo: Demo, run: ModeRun, s: Subscription) -> bool:
    r = run.results[s.name]
    return (sorted(r.received) == demo.expected[s.name] and r.complete
            and (run.mode == "host" or r.unwanted == 0))


def _by_mode(demo: Demo) -> dict[str, list[ModeRun]]:
    out: dict[str, list[ModeRun]] = {}
    for run in demo.runs:
        out.setdefault(run.mode, []).append(run)
    return out


def pooled_latencies(demo: Demo) -> dict[str, list[float]]:
    """Every live message's latency, all subscribers and rounds, per mode."""
    return {mode: [x for run in runs for s in demo.subscriptions for x in run.latencies_us(s.name)]
            for mode, runs in _by_mode(demo).items()}


def summary(demo: Demo) -> str:
    """The text report: per subscriber and mode, received vs expected and latency."""
    modes = _by_mode(demo)
    rounds = max((len(r) for r in modes.values()), default=0)
    lines = [
        f"camus demo itch: {len(demo.messages)} ITCH 5.0 messages ({demo.source}) in "
        f"{len(demo.packets)} MoldUDP64 packets, paced at {demo.rate:,.0f} messages/s; "
        f"{len(demo.subscriptions)} subscribers; {rounds} round(s) per mode, modes alternating",
        "camus: native software switch (switch.dataplane) inline in the publisher, egress ports bound "
        "to UDP sockets on 127.0.0.1; host: every subscriber receives every packet and filters itself.",
        f"compiled: {demo.compiled.stats['entries']['total']} table entries, "
        f"{demo.compiled.stats['multicast_groups']} multicast groups; load average during the runs: "
        + ", ".join(f"{run.mode} {run.load:.1f}" for run in demo.runs),
        "",
        "counts are totals over the rounds; 'packets': datagrams from the feed; 'answers': from the "
        "retransmission server; 'cpu ms': the subscriber process's CPU time while receiving",
        f"{'subscriber':<20} {'mode':<6} {'expected':>8} {'received':>8} {'recovered':>9} {'packets':>7} "
        f"{'answers':>7} {'unwanted':>8} {'cpu ms':>7} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8} "
        f"{'max us':>8}  ok",
    ]
    for s in demo.subscriptions:
        for mode, runs in modes.items():
            rs = [run.results[s.name] for run in runs]
            pc = percentiles([x for run in runs for x in run.latencies_us(s.name)])
            ok = all(_ok(demo, run, s) for run in runs)
            cells = " ".join(f"{pc[k]:>8,.0f}" if pc else f"{'-':>8}" for k in ("p50", "p90", "p99", "max"))
            lines.append(
                f"{s.name:<20} {mode:<6} {len(runs) * len(demo.expected[s.name]):>8} "
                f"{sum(len(r.received) for r in rs):>8} {sum(len(r.recovered) for r in rs):>9} "
                f"{sum(r.datagrams for r in rs):>7} {sum(r.answers for r in rs):>7} "
                f"{sum(r.unwanted for r in rs):>8} {1000 * sum(r.cpu_seconds for r in rs):>7,.0f} {cells}  "
                f"{'yes' if ok else 'NO'}")
    lines.append("")
    for mode, values in pooled_latencies(demo).items():
        runs = modes[mode]
        pc = percentiles(values)
        text = ", ".join(f"{k} {v:,.0f} us" for k, v in pc.items()) if pc else "no messages"
        lines.append(f"{mode:<6} all subscribers: {text}; {sum(r.datagrams_sent for r in runs)} datagrams "
                     f"sent; {sum(r.retransmit_requests for r in runs)} retransmission requests")
    if demo.kafka is not None:
        k = demo.kafka
        lines.append("")
        lines.append(f"Kafka views (camus serve; one view per subscriber over topic 'itch', value = the raw "
                     f"ITCH message): produced in {k.produce_seconds:.2f} s, views read in "
                     f"{k.consume_seconds:.2f} s")
        for s in demo.subscriptions:
            lines.append(f"{s.name:<20} kafka  {len(demo.expected[s.name]):>8} {len(k.received[s.name]):>8}"
                         f"  {'yes' if demo.kafka_ok(s.name) else 'NO'}")
    lines.append("")
    where = "in both modes" + (" and in its Kafka view" if demo.kafka is not None else "")
    lines.append(f"every subscriber received exactly its expected messages {where}"
                 if demo.ok() else "MISMATCH: some subscriber did not receive exactly its expected messages")
    return "\n".join(lines) + "\n"


def run_demo(n_messages: int, out: str | Path, seed: int = 1, rate: float = 50000.0,
             replay: str | Path | None = None, impl: str = "native", rounds: int = 2,
             kafka: bool = True) -> Demo:
    """Both modes over the same packets, alternating for `rounds` rounds so that changing load
    on the machine falls on both alike; then (with `kafka`) the same feed through `camus serve`
to one Kafka view per subscriber. Writes itch-latency.png and summary.txt into `out`."""
    from apps.itch_filter.plot import latency_cdf

    demo = prepare(n_messages, seed, rate, replay)
    for i in range(rounds):
        for mode in (("camus", "host") if i % 2 == 0 else ("host", "camus")):
            demo.runs.append(run_mode(demo, mode, impl=impl))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if kafka:
        demo.kafka = run_kafka(demo, out / "camus-serve.log")
    (out / "summary.txt").write_text(summary(demo))
    latency_cdf(pooled_latencies(demo), out / "itch-latency.png",
                f"ITCH 5.0: {len(demo.messages):,} messages at {rate:,.0f}/s, "
                f"{len(demo.subscriptions)} subscribers, {rounds} round(s) per mode")
    return demo
