"""`camus demo hicn`: hICN requests routed by a stateful packet subscription, end to end.

The paper's §V experiment (Fig. 10 and 11) on this machine. Per run, in order:

1. compile the mode's rules against the hICN spec (p4/hicn/hicn.p4, whose keyed meter `hot`
   counts requests per content identifier) into `RUN/switch/` (what `camus compile` writes);
2. start the clients (`apps.hicn.clients`), the producer (`apps.hicn.producer`) and the
   forwarder (`apps.hicn.forwarder`), each a process of its own;
3. start the switch (`apps.hicn.switches`: in process, `camus switch serve`, or bmv2) with
   port 1 to the forwarder and port 2 upstream to the producer, and let the clients go;
4. when the clients have every answer (or give up), stop the forwarder and producer and
   read what each saw.

The modes differ only in the rules the switch runs:

* `camus`: `rate(hot) >= T : fwd(1)` and `rate(hot) < T : fwd(2)`: a request goes to the
  forwarder only when its content was requested at least T times a second in the current
  window (the meter's window, W in the spec, so at least T·W/10^6 requests so far), else
  upstream, straight to the producer;
* `baseline`: `true : fwd(1)`: every request to the forwarder, as hICN deploys it.

What is checked, per run: every request the clients sent was answered exactly once; every
request reached exactly one of forwarder and producer, and the one that the reference
evaluator (`compiler.semantics.Evaluator`, the definition of the rules' meaning) names for
the same timed sequence (the requests in the order the clients sent them, with the time
each carries in its `query_timestamp` field). The meter is the switch's: nothing here
counts requests to decide where one goes.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from apps.hicn import processes, workload
from apps.hicn.settings import Settings
from apps.hicn.switches import FORWARDER_PORT, UPSTREAM_PORT, Front, FrontError, open_front
from apps.hicn.wire import CONTENT
from compiler.compile import Compiled, compile_rules, write_outputs
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Packet
from compiler.spec import Spec, load_spec
from pipeline.model import Timestamp

SPEC = Path(__file__).resolve().parents[2] / "p4" / "hicn" / "hicn.p4"
METER = "hot"
MODES = ("camus", "baseline")
START_SECONDS = 60.0  # the processes import the spec parser before they answer


def rules_text(mode: str, threshold: int) -> str:
    if mode == "camus":
        return (f"rate({METER}) >= {threshold} : fwd({FORWARDER_PORT})\n"
                f"rate({METER}) < {threshold} : fwd({UPSTREAM_PORT})\n")
    return f"true : fwd({FORWARDER_PORT})\n"


@dataclass
class Run:
    mode: str
    round: int
    t0: int
    end: int
    sent: list  # (number, kind, content, time field value, send ns), in send order
    answers: list  # (number, arrival ns, source)
    forwarder: dict
    producer: dict
    expected: dict[int, frozenset[int]]  # request number -> the evaluator's ports
    switch_counters: dict
    wall_seconds: float
    load: float  # the 1-minute load average after the run: other work on the machine shows here
    delivered: dict[int, list[int]] = field(default_factory=dict)  # number -> ports it reached

    def __post_init__(self) -> None:
        for number, *_ in self.forwarder["requests"]:
            self.delivered.setdefault(number, []).append(FORWARDER_PORT)
        for number, *_ in self.producer["requests"]:
            self.delivered.setdefault(number, []).append(UPSTREAM_PORT)

    @property
    def duration_ns(self) -> int:
        return self.end - self.t0

    def answer_counts(self) -> Counter:
        return Counter(number for number, _, _ in self.answers)

    def unanswered(self) -> list[int]:
        counts = self.answer_counts()
        return [s[0] for s in self.sent if counts[s[0]] == 0]

    def answered_twice(self) -> list[int]:
        return sorted(n for n, c in self.answer_counts().items() if c > 1)

    def strangers(self) -> list[int]:
        """Answers to numbers the clients never sent."""
        return sorted(n for n, c in self.answer_counts().items() if not 0 <= n < len(self.sent))

    def misrouted(self) -> list[int]:
        """Requests that did not reach exactly the one port the evaluator names."""
        return [s[0] for s in self.sent
                if sorted(self.delivered.get(s[0], [])) != sorted(self.expected[s[0]])
                or len(self.expected[s[0]]) != 1]

    @property
    def ok(self) -> bool:
        return not (self.unanswered() or self.answered_twice() or self.strangers() or self.misrouted()
                    or set(self.delivered) - {s[0] for s in self.sent})

    def modelled_ms(self) -> dict[int, float]:
        """Request number -> its latency as the model makes it: from its arrival at the
        forwarder or producer to when its answer was due there (queue, service, fetch,
        producer delay), leaving out what the machine added on the way."""
        arrival = {n: a for n, a, _, _ in self.forwarder["requests"]}
        out = {n: (due - arrival[n]) / 1e6 for n, due in self.forwarder["answered"] if n in arrival}
        out.update({n: (due - a) / 1e6 for n, a, due in self.producer["requests"]})
        return out

    def overheads_ms(self) -> list[float]:
        """Per request answered from the forwarder's cache or by the producer directly: its
        latency less the time the model itself put in (the forwarder's queue and service,
        the producer's delay): what the switch, the sockets and the scheduling of the
        processes on this machine added."""
        lat = self.latencies_ms()
        modelled = {n: (done - arrival) / 1e6 for n, arrival, done, hit in self.forwarder["requests"] if hit}
        modelled.update({n: (due - arrival) / 1e6 for n, arrival, due in self.producer["requests"]})
        return [lat[n] - m for n, m in modelled.items() if n in lat]

    def latencies_ms(self) -> dict[int, float]:
        """Request number -> latency (first answer), ms."""
        first: dict[int, int] = {}
        for number, t, _ in self.answers:
            if number not in first or t < first[number]:
                first[number] = t
        return {s[0]: (first[s[0]] - s[4]) / 1e6 for s in self.sent if s[0] in first}


@dataclass
class Demo:
    settings: Settings
    spec: Spec
    catalogue: workload.Catalogue
    schedule: list[tuple[int, int]]
    hot_ranks: int  # how many contents the browsing client asks for at least T times a second
    stamp: Timestamp  # where requests carry their time
    meter_window_us: int
    out: Path
    runs: list[Run] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(r.ok for r in self.runs)

    def cold_contents(self) -> set[int]:
        return set(self.catalogue.ids[self.hot_ranks:])


def time_field(compiled: Compiled) -> Timestamp:
    """The spec's `query_timestamp` field and unit, as the compiled pipeline holds them: the
    demo's requests carry their send time there, so the switch's windows and the
    evaluator's run on the same clock."""
    (app,) = compiled.pipeline.applications
    if app.state is None or app.state.timestamp is None:
        raise ValueError("the hICN spec must declare its meter and a query_timestamp(h.f, UNIT) field")
    return app.state.timestamp


def expected_ports(spec: Spec, rules_src: str, sent: list, stamp: Timestamp) -> dict[int, frozenset[int]]:
    """The evaluator's port set for every request, replayed in send order."""
    ev = Evaluator(parse_rules(rules_src, spec))
    out = {}
    for number, _kind, content, value, _ in sorted(sent):
        packet = Packet(stamp.ts_us(value), {CONTENT: content, stamp.field.name: value, "hicn.version": 1})
        out[number] = frozenset(ev.packet(packet))
    return out


def prepare(settings: Settings, out: Path, spec_path: Path = SPEC) -> Demo:
    """Check the settings, draw the workload, compile both modes' rules into OUT/MODE/."""
    settings.check()
    spec = load_spec(spec_path)
    cat = workload.catalogue(settings.workload)
    compiled = {}
    for mode in MODES:
        src = rules_text(mode, settings.threshold)
        (out / mode).mkdir(parents=True, exist_ok=True)
        (out / mode / "hicn.rules").write_text(src)
        compiled[mode] = compile_rules(spec, parse_rules(src, spec, source=str(out / mode / "hicn.rules")))
        write_outputs(compiled[mode], out / mode / "switch")
    schedule = workload.browsing(settings.workload, cat)
    (out / "schedule.json").write_text(json.dumps(schedule))
    (app,) = compiled["camus"].pipeline.applications
    window = next(v.window_us for v in app.state.vars if v.name == METER)
    return Demo(settings, spec, cat, schedule, workload.hot_ranks(settings.workload, cat, settings.threshold),
                time_field(compiled["camus"]), window, out)


def run_once(demo: Demo, mode: str, round_: int, front: Front, spec_path: Path = SPEC) -> Run:
    s, w = demo.settings, demo.settings.workload
    run_dir = demo.out / f"{round_}-{mode}"
    run_dir.mkdir(parents=True, exist_ok=True)
    schedule = demo.out / "schedule.json"
    spec_arg = ["--spec", str(spec_path)]
    procs = []
    started = time.perf_counter()
    try:
        clients = processes.start("apps.hicn.clients", [
            *spec_arg, "--schedule", str(schedule), "--streams", str(w.streams), "--window", str(w.window),
            "--stream-content", str(demo.catalogue.stream_id), "--duration", str(w.duration),
            "--grace", str(s.grace), "--time-field", demo.stamp.field.name, "--time-unit", demo.stamp.unit,
            "--result", str(run_dir / "clients.json")], stdin=True)
        procs.append(clients)
        reply = processes.read_line(clients, START_SECONDS, "clients").removeprefix("reply ")
        producer = processes.start("apps.hicn.producer", [
            *spec_arg, "--ingress", front.listen(UPSTREAM_PORT), "--client", reply,
            "--delay-ms", str(s.producer_ms), "--jitter-ms", str(s.jitter_ms),
            "--data-bytes", str(s.data_bytes), "--seed", str(w.seed), "--result", str(run_dir / "producer.json")])
        procs.append(producer)
        lines = processes.read_until_ready(producer, START_SECONDS, "producer")
        fetch, producer_in = processes.field(lines, "fetch"), processes.field(lines, "ingress")
        forwarder = processes.start("apps.hicn.forwarder", [
            *spec_arg, "--ingress", front.listen(FORWARDER_PORT), "--client", reply, "--producer", fetch,
            "--service-us", str(s.service_us), "--capacity", str(s.capacity),
            "--data-bytes", str(s.data_bytes), "--result", str(run_dir / "forwarder.json")])
        procs.append(forwarder)
        forwarder_in = processes.field(processes.read_until_ready(forwarder, START_SECONDS, "forwarder"), "ingress")
        try:
            binding = front.start(demo.out / mode / "switch", {FORWARDER_PORT: forwarder_in, UPSTREAM_PORT: producer_in})
        except Exception as exc:  # said in one line by the command: which switch, which program
            raise FrontError(f"the {front.name} switch cannot run {demo.out / mode / 'switch'}: "
                             f"{type(exc).__name__}: {exc}") from exc
        clients.stdin.write(f"go {binding}\n")
        clients.stdin.flush()
        code = clients.wait(w.duration + s.grace + START_SECONDS)
        if code != 0:
            raise RuntimeError(f"the clients exited with {code}")
        for p in (forwarder, producer):
            if processes.stop(p) != 0:
                raise RuntimeError(f"{p.args[2]} exited with {p.returncode}")
    finally:
        for p in procs:
            processes.stop(p)
        front.stop()
    c = json.loads((run_dir / "clients.json").read_text())
    return Run(mode, round_, c["t0"], c["end"], c["sent"], c["answers"],
               json.loads((run_dir / "forwarder.json").read_text()),
               json.loads((run_dir / "producer.json").read_text()),
               expected_ports(demo.spec, rules_text(mode, s.threshold), c["sent"], demo.stamp), front.counters(),
               time.perf_counter() - started, os.getloadavg()[0])


def run_demo(settings: Settings, out: str | Path, spec_path: Path = SPEC) -> Demo:
    """Every round runs both modes, alternating which goes first, so that other work on the
    machine falls on both alike."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    demo = prepare(settings, out, spec_path)
    front = open_front(settings.switch, settings.impl, out)
    try:
        for i in range(settings.rounds):
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                demo.runs.append(run_once(demo, mode, i, front, spec_path))
    finally:
        front.close()
    return demo

