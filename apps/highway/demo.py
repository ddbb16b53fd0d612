"""`camus demo highway`: cars' position reports through camus's switch to the regions' monitors.

The run, in order:

1. the traffic model (apps.highway.traffic) drives `cars` cars for `duration` seconds and
   gives every position report; `regions` monitored regions are placed on its highways
   (apps.highway.regions), each with its rule `x > X0 and x < X1 and y > Y0 and y < Y1 and
   spd > 55 : fwd(n)`;
2. the rules are compiled against p4/highway/highway.p4 into `OUT/switch/` (what `camus
   compile` writes), and the spec's static P4 program is generated and checked for the
   single pass (apps.highway.onepass; p4c-bm2-ss where it is on PATH);
3. what each monitor must get is computed from the reports alone: per report,
   `compiler.semantics.evaluate` over all the rules (the definition of correct);
4. the same frames go through the native data plane in process, to measure its rate
   without sockets and compare its copies with the evaluator's;
5. live: the monitoring process (apps.highway.monitor, one socket per region) and `camus
   switch serve` (ingress port 0 on a loopback UDP socket, copies for port n to the monitor of
   region n) are started; the reports are sent to the switch as UDP datagrams at the motes'
   own pace (`speed` 1: 10 a second per car, each car at its own phase), or `speed` times
   faster (0: as fast as this process can send); then the monitors say what came, and the
   switch its counters.

Checked: every monitor got exactly the reports the evaluator gives its port, each once and
unaltered, in process and live. Nothing is retransmitted: a report lost on the way (a full
socket buffer, which the kernel counts and the summary shows) is a failure of the run.
"""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from apps.hicn import processes
from apps.highway import onepass, wire
from apps.highway.monitor import udp_drops
from apps.highway.regions import MAX_REGIONS, Region, place, rules_text
from apps.highway.traffic import Report, TrafficConfig, drive
from compiler.compile import Compiled, compile_rules, write_outputs
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import load_spec
from switch.dataplane import load
from switch.native_dataplane import pack

SPEC = Path(__file__).resolve().parents[2] / "p4" / "highway" / "highway.p4"
INGRESS_PORT = 0
READY_SECONDS = 60.0  # the processes import the compiler and the switch before they answer
FIELDS = ("position_report.x", "position_report.y", "position_report.spd")


@dataclass(frozen=True)
class Settings:
    traffic: TrafficConfig = TrafficConfig()
    regions: int = 300
    speed: float = 1.0  # 1: the motes' own pace; k: k times faster; 0: as fast as possible
    impl: str = "native"
    p4c: bool = True  # compile the static program with p4c-bm2-ss where it is on PATH

    def check(self) -> None:
        self.traffic.check()
        if not 1 <= self.regions <= MAX_REGIONS:
            raise ValueError(f"--regions must be 1 .. {MAX_REGIONS} (one switch port each)")
        if self.speed < 0:
            raise ValueError("--speed must not be negative")


@dataclass
class Live:
    """What the live run saw: per region the (report index, arrival ns) it got."""

    send_ns: array  # per report, when it was sent (CLOCK_MONOTONIC)
    delivered: dict[int, list[tuple[int, int]]]
    altered: int  # copies whose report differs from the one sent under that car and number
    strangers: int  # copies of reports no car sent (no such car and report number)
    undecodable: int
    ingress: str
    counters: dict  # the switch's, as it printed them when stopped
    kernel_drops: dict[str, int]  # "switch ingress", "monitors"
    seconds: float  # first send to last send


@dataclass
class InProcess:
    seconds: float  # the best of the rounds
    rounds: int
    copies: dict[int, list[int]]  # region -> report indices, from the data plane's records
    altered: int  # copies not byte for byte the frame that came in
    reports: int

    @property
    def rate(self) -> float:
        return self.reports / self.seconds if self.seconds else 0.0


@dataclass
class Result:
    settings: Settings
    reports: list[Report]
    speeders: int  # cars whose drivers want well over the limit
    regions: list[Region]
    compiled: Compiled
    static_stats: dict
    expected: list[frozenset[int]]  # per report: the evaluator's ports
    evaluations: int  # distinct (x, y, spd) the evaluator was asked about
    evaluate_seconds: float
    program: onepass.ProgramCheck
    p4c: onepass.P4cCheck
    inprocess: InProcess
    live: Live | None = None
    counters: onepass.CounterCheck | None = None
    wall_seconds: float = 0.0
    load: float = 0.0  # the 1-minute load average after the run: other work on the machine
    by_region: dict[int, set[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, ports in enumerate(self.expected):
            for p in ports:
                self.by_region.setdefault(p, set()).add(i)

    @property
    def copies_expected(self) -> int:
        return sum(len(p) for p in self.expected)

    def region_rows(self, delivered: dict[int, list[int]]) -> list[tuple[Region, int, int, int, int, int]]:
        """Per region: (region, expected, delivered, missing, extra, duplicates)."""
        rows = []
        for r in self.regions:
            want = self.by_region.get(r.port, set())
            got = delivered.get(r.port, [])
            seen = set(got)
            rows.append((r, len(want), len(got), len(want - seen), len(seen - want), len(got) - len(seen)))
        return rows

    def exact(self, delivered: dict[int, list[int]]) -> bool:
        return (set(delivered) <= {r.port for r in self.regions}
                and all(m == x == d == 0 for _, _, _, m, x, d in self.region_rows(delivered)))

    @property
    def live_indices(self) -> dict[int, list[int]]:
        return {p: [i for i, _ in got] for p, got in self.live.delivered.items()} if self.live else {}

    @property
    def inprocess_ok(self) -> bool:
        return self.exact(self.inprocess.copies) and not self.inprocess.altered

    @property
    def live_ok(self) -> bool:
        lv = self.live
        return (lv is not None and self.exact(self.live_indices)
                and not (lv.altered or lv.strangers or lv.undecodable))

    @property
    def one_pass_ok(self) -> bool:
        return self.program.ok and self.p4c.ok and (self.counters is None or self.counters.ok)

    @property
    def ok(self) -> bool:
        return self.inprocess_ok and self.live_ok and self.one_pass_ok


def expected_ports(rules, reports: list[Report]) -> tuple[list[frozenset[int]], int]:
    """Per report, `evaluate(rules, its fields)`. The evaluator is a function of the three
    query fields alone (the rules read nothing else), so reports with the same (x, y, spd)
    share one call: a car's mote repeats them while it crosses a 10 m cell at the same
    speed. Returns the port sets and the number of calls made."""
    memo: dict[tuple[int, int, int], frozenset[int]] = {}
    out = []
    for r in reports:
        key = (r.x, r.y, r.spd)
        ports = memo.get(key)
        if ports is None:
            ports = memo[key] = frozenset(evaluate(rules, dict(zip(FIELDS, key))))
        out.append(ports)
    return out, len(memo)


def run(settings: Settings, out: Path) -> Result:
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    traffic = drive(settings.traffic)
    regions = place(settings.regions, traffic.highways, settings.traffic, settings.traffic.seed)
    spec = load_spec(SPEC)
    text = rules_text(regions)
    (out / "highway.rules").write_text(text)
    rules = parse_rules(text, spec, source=str(out / "highway.rules"))
    compiled = compile_rules(spec, rules)
    write_outputs(compiled, out / "switch")
    static_stats = compile_rules(spec, rules, static=True).stats
    program, program_path = onepass.program_check(spec, out / "p4")
    p4c = onepass.p4c_check(program_path, out / "p4") if settings.p4c else \
        onepass.P4cCheck(False, "--no-p4c")

    t = time.perf_counter()
    expected, evaluations = expected_ports(rules, traffic.reports)
    evaluate_seconds = time.perf_counter() - t
    frames = [wire.frame(r) for r in traffic.reports]
    inproc = in_process(compiled, frames, settings.impl)
    result = Result(settings, traffic.reports, traffic.speeders, regions, compiled, static_stats, expected,
                    evaluations, evaluate_seconds, program, p4c, inproc)
    result.live = live(result, frames, out)
    result.counters = onepass.counter_check(
        compiled.application, _received(result.live.counters),
        {name: (tc["hits"], tc["misses"]) for name, tc in result.live.counters.get("tables", {}).items()})
    result.wall_seconds = time.perf_counter() - started
    result.load = os.getloadavg()[0]
    return result


def in_process(compiled: Compiled, frames: list[bytes], impl: str, rounds: int = 3) -> InProcess:
    """The frames through a fresh data plane per round, all at once (no sockets): the best
    round's time, and the first round's copies by region."""
    buf, lengths = pack(frames)
    best, copies, altered = None, {}, 0
    for k in range(rounds):
        dp = load(compiled.pipeline, compiled.entries, impl=impl)
        t = time.perf_counter()
        out, records = dp.process_packed(buf, lengths, INGRESS_PORT)
        took = time.perf_counter() - t
        best = took if best is None else min(best, took)
        if k == 0:
            view = memoryview(out)
            for i, port, off, n in struct.iter_unpack("<4I", records):
                copies.setdefault(port, []).append(i)
                altered += bytes(view[off:off + n]) != frames[i]
    return InProcess(best, rounds, copies, altered, len(frames))


def live(result: Result, frames: list[bytes], out: Path) -> Live:
    settings = result.settings
    deliveries = out / "deliveries.jsonl"
    monitor = processes.start("apps.highway.monitor",
                              ["--regions", str(len(result.regions)), "--out", str(deliveries)], stdin=True)
    switch = None
    try:
        base = int(processes.field(processes.read_until_ready(monitor, READY_SECONDS, "the monitors"), "base"))
        cmd = ["camus.cli", "switch", "serve", "--impl", settings.impl, "--pipeline", str(out / "switch"),
               "--p4runtime", "none", "--ingress", f"{INGRESS_PORT}=udp:127.0.0.1:0",
               "--egress-range", f"udp:127.0.0.1:{base}"]
        switch = processes.start(cmd[0], cmd[1:])
        lines = processes.read_until_ready(switch, READY_SECONDS, "camus switch serve")
        match = next((m for m in map(re.compile(rf"port {INGRESS_PORT}: udp (\S+):(\d+)").match, lines) if m),
                     None)
        if match is None:
            raise RuntimeError(f"camus switch serve did not say its ingress: {lines}")
        ingress = (match.group(1), int(match.group(2)))
        send_ns, seconds = send(frames, [r.time_ms for r in result.reports], ingress, settings.speed)
        monitor.stdin.write(f"stop {result.copies_expected}\n")
        monitor.stdin.flush()
        done = processes.read_line(monitor, 3600, "the monitors")
        kernel = {"switch ingress": sum(udp_drops([ingress[1]]).values())}
        said = processes.stop(switch)
        counters = parse_counters(list(processes.iter_lines(switch)))
        switch.stdout.close()
        switch = None
        if said != 0:
            raise RuntimeError(f"camus switch serve exited with {said}")
    finally:
        for proc in (switch, monitor):
            if proc is not None:
                processes.stop(proc)
                for _ in processes.iter_lines(proc):  # to the end of its output, then close the pipe
                    pass
                proc.stdout.close()
    words = done.split()
    kernel["monitors"] = int(words[words.index("drops") + 1]) if "drops" in words else 0
    index = {(r.car, r.seq): i for i, r in enumerate(result.reports)}
    delivered: dict[int, list[tuple[int, int]]] = {}
    altered = strangers = 0
    with open(deliveries) as fh:
        for line in fh:
            region, *fields, arrival = json.loads(line)
            got = Report(*fields)
            i = index.get((got.car, got.seq))
            if i is None:
                strangers += 1
                continue
            altered += got != result.reports[i]
            delivered.setdefault(region, []).append((i, arrival))
    undecodable = int(words[words.index("undecodable") + 1]) if "undecodable" in words else 0
    return Live(send_ns, delivered, altered, strangers, undecodable, f"{ingress[0]}:{ingress[1]}",
                counters, kernel, seconds)


def send(frames: list[bytes], times_ms: list[int], to: tuple[str, int], speed: float) -> tuple[array, float]:
    """Every frame to `to` as one UDP datagram, frame i at `times_ms[i] / speed` after the
    start (at once, in order, with `speed` 0); per frame when it went (CLOCK_MONOTONIC ns),
    and the seconds from the first to the last."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(to)
    sent = array("q", bytes(8 * len(frames)))
    start = time.monotonic_ns() + 50_000_000
    scale = 0 if speed == 0 else 1_000_000 / speed  # ns per ms of the traffic's time
    clock, pause = time.monotonic_ns, time.sleep
    try:
        for i, frame in enumerate(frames):
            now = clock()
            due = start + int(times_ms[i] * scale)
            if now < due:
                pause((due - now) / 1e9)
                now = clock()
            sock.send(frame)  # blocking: a full send buffer waits here, it loses nothing
            sent[i] = now
    finally:
        sock.close()
    return sent, (sent[-1] - sent[0]) / 1e9 if frames else 0.0


COUNTER_PORT = re.compile(r"\s+(\d+)\s+rx\s+(\d+)\s+tx\s+(\d+)")
COUNTER_TABLE = re.compile(r"\s+(\S+)\s+hits\s+(\d+)\s+misses\s+(\d+)")


def parse_counters(lines: list[str]) -> dict:
    """What `camus switch serve` prints when it stops (switch.cli.format_counters, then the
    unbound copies) as {"ports": {n: (rx, tx)}, "drops": {...}, "tables": {...}, "unbound": n}."""
    out: dict = {"ports": {}, "drops": {}, "tables": {}, "unbound": None}
    section = None
    for line in lines:
        if line in ("ports:", "tables:"):
            section = line[:-1]
        elif line.startswith("drops:"):
            words = line.split()[1:]
            out["drops"] = {k: int(v) for k, v in zip(words[::2], words[1::2])}
        elif line.startswith("unbound egress copies:"):
            out["unbound"] = int(line.rsplit(" ", 1)[1])
        elif section == "ports" and (m := COUNTER_PORT.match(line)):
            out["ports"][int(m.group(1))] = {"rx": int(m.group(2)), "tx": int(m.group(3))}
        elif section == "tables" and (m := COUNTER_TABLE.match(line)):
            out["tables"][m.group(1)] = {"hits": int(m.group(2)), "misses": int(m.group(3))}
    return out


def _received(counters: dict) -> int:
    return counters.get("ports", {}).get(INGRESS_PORT, {}).get("rx", 0)
