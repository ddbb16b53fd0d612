"""`camus demo dns`: a DNS cache answered by the switch (the paper's §V-5) against a real server.

Per mode (`cache`: one `name == "hX" : answerDNS(ip)` rule per cached name; `baseline`: no
rules), the demo

1. compiles the mode's rules against p4/dns/dns.p4 into OUT/MODE/switch/;
2. starts dnsmasq on loopback with its own hosts file holding every name (apps/dns/server.py),
   the relay in front of it, the gateway the client queries (apps/dns/wire.py), and the switch,
   `camus switch serve --impl python` (the reference switch: the one running answerDNS today),
   as a child process whose port 0 is the gateway and port 1 the relay;
3. sends the same queries (Zipf over the names, seeded) one after another with dnspython,
   timing each and noting who answered it (the switch or the server); both modes run side by
   side, each query going to one mode then the other, so that the machine's load at any
   moment is shared by both;
4. stops everything and reads the server's query log.

Checks: dnspython accepted every answer as the response to its query; each holds one A record,
the name's address; the queries the switch answered are exactly those whose outcome under
`compiler.semantics` (the reference evaluator, on the query's name field as dnspython writes
it) is answerDNS with that address, the rest reached the server, once each, by the relay's
count and by dnsmasq's log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rdatatype

from apps.dns.server import Dnsmasq, ServerUnavailable
from apps.dns.wire import Gateway, Relay, question_key
from apps.dns.workload import NAME_FIELD_BYTES, Workload
from apps.hicn.processes import ROOT, follow, iter_lines, python_env, read_until_ready, stop
from compiler.compile import Compiled, compile_rules, write_outputs
from compiler.rules import parse_rules
from compiler.semantics import outcome
from compiler.spec import Spec, load_spec

SPEC = ROOT / "p4" / "dns" / "dns.p4"
MODES = ("cache", "baseline")
CLIENT_PORT, SERVER_PORT = 0, 1
QUERY_TIMEOUT = 5.0  # generous: a loaded shared machine stalls for seconds at times
READY_SECONDS = 60.0

__all__ = ["MODES", "Demo", "Run", "ServerUnavailable", "run_demo"]


@dataclass
class Query:
    name: str
    ms: float | None = None          # None: no answer within QUERY_TIMEOUT
    by: str | None = None            # "switch" or "server", as the gateway saw it
    expected_by: str = ""            # what the reference evaluator says
    problem: str = ""                # what was wrong with the answer, if anything


@dataclass
class Run:
    mode: str
    rules: int
    entries: int
    queries: list[Query] = field(default_factory=list)
    relayed: int = 0                 # query frames the switch sent to the server's port
    delivered: int = 0               # answers the gateway passed to the client, from either side
    server_log: list[tuple[str, str]] = field(default_factory=list)
    switch_counters: str = ""
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0             # the whole run, both modes' queries

    def answered(self, by: str) -> list[Query]:
        return [q for q in self.queries if q.by == by]

    def failures(self) -> list[str]:
        out = list(self.errors)
        for i, q in enumerate(self.queries):
            if q.ms is None:
                out.append(f"query {i} ({q.name}): no answer within {QUERY_TIMEOUT:g} s")
            elif q.problem:
                out.append(f"query {i} ({q.name}): {q.problem}")
            elif q.by != q.expected_by:
                out.append(f"query {i} ({q.name}): answered by the {q.by}, "
                           f"the reference evaluator says {q.expected_by}")
        if self.delivered != len(self.queries):
            out.append(f"the client was sent {self.delivered} answers to {len(self.queries)} queries")
        forwarded = sum(q.expected_by == "server" for q in self.queries)
        if self.relayed != forwarded:
            out.append(f"the relay carried {self.relayed} queries to the server, {forwarded} expected")
        if len(self.server_log) != forwarded:
            out.append(f"dnsmasq logged {len(self.server_log)} queries, {forwarded} expected")
        want = sorted(q.name.lower() for q in self.queries if q.expected_by == "server")
        if len(self.server_log) == forwarded and sorted(n.lower() for _, n in self.server_log) != want:
            out.append("dnsmasq logged other names than the forwarded queries'")
        return out


@dataclass
class Demo:
    workload: Workload
    runs: dict[str, Run]

    @property
    def ok(self) -> bool:
        return not any(r.failures() for r in self.runs.values())


def name_value(name: str) -> int | None:
    """The name field's value for a query of `name`, from dnspython's wire form of the name
    (not camus's encoder); None when it does not fit dns.p4's field (no rule can match)."""
    wire = dns.name.from_text(name).to_wire()
    return int.from_bytes(wire.ljust(NAME_FIELD_BYTES, b"\0"), "big") if len(wire) <= NAME_FIELD_BYTES else None


def expected(spec: Spec, rules, name: str, address: str) -> tuple[str, str]:
    """Who the reference evaluator says answers a type-A query for `name` ("switch" or
    "server"), and a problem if the outcome is neither answerDNS with the name's address
    nor the default's forward to the server."""
    value = name_value(name)
    values = {} if value is None else {"question.name": value, "question.qtype": dns.rdatatype.A}
    got = outcome(rules if value is not None else [], values, spec.default)
    if got.verdict is not None and got.verdict.name == "answerDNS":
        ip = ".".join(str(b) for b in got.verdict.args[0].to_bytes(4, "big"))
        return "switch", "" if ip == address else f"rules answer {ip}, the name's address is {address}"
    if got.verdict is None and got.ports == frozenset({SERVER_PORT}):
        return "server", ""
    return "?", f"the reference evaluator's outcome is {got}, neither answerDNS nor fwd({SERVER_PORT})"


def check_answer(reply: dns.message.Message, name: str, address: str) -> str:
    """What is wrong with `reply` to an A query for `name` (dnspython has already matched it
    to the query: id and question), or ''."""
    if reply.rcode() != 0:
        return f"rcode {reply.rcode()}"
    rrsets = [r for r in reply.answer if r.rdtype == dns.rdatatype.A]
    if len(rrsets) != 1 or len(rrsets[0]) != 1:
        return f"expected one A record, got {reply.answer}"
    (rrset,) = rrsets
    if rrset.name != dns.name.from_text(name):
        return f"A record for {rrset.name}"
    got = next(iter(rrset)).address
    return "" if got == address else f"address {got}, expected {address}"


class Switch:
    """`camus switch serve --impl python` on loopback: port 0 the gateway, port 1 the relay."""

    def __init__(self, directory: Path, gateway: tuple[str, int], relay: tuple[str, int]) -> None:
        cmd = [sys.executable, "-m", "camus.cli", "switch", "serve", "--impl", "python",
               "--pipeline", str(directory), "--p4runtime", "none",
               "--port", f"{CLIENT_PORT}=udp:{gateway[0]}:{gateway[1]}@127.0.0.1:0",
               "--port", f"{SERVER_PORT}=udp:{relay[0]}:{relay[1]}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, cwd=ROOT, env=python_env())
        follow(self.proc)
        lines = read_until_ready(self.proc, READY_SECONDS, "camus switch serve")
        port0 = next((ln for ln in lines if ln.startswith(f"port {CLIENT_PORT}: udp ")), None)
        if port0 is None:
            stop(self.proc)
            raise RuntimeError(f"camus switch serve did not say its port {CLIENT_PORT}: {lines}")
        host, _, port = port0.split()[3].rpartition(":")
        self.address = (host, int(port))
        self.printed = ""

    def close(self) -> None:
        stop(self.proc)
        self.printed = "\n".join(iter_lines(self.proc))


def compile_mode(spec: Spec, workload: Workload, mode: str, out: Path) -> tuple[list, Compiled]:
    out.mkdir(parents=True, exist_ok=True)
    text = workload.rules(mode == "cache")
    (out / "dns.rules").write_text(text)
    rules = parse_rules(text, spec, source=str(out / "dns.rules"))
    compiled = compile_rules(spec, rules)
    write_outputs(compiled, out / "switch")
    return rules, compiled


class Setup:
    """One mode's chain, running: dnsmasq, the relay, the switch, the gateway."""

    def __init__(self, spec: Spec, workload: Workload, mode: str, out: Path) -> None:
        self.spec, self.out = spec, out
        self.addresses = workload.addresses()
        self.rules, compiled = compile_mode(spec, workload, mode, out)
        self.run = Run(mode, len(self.rules), compiled.stats["entries"]["total"])
        self.server = Dnsmasq(out / "server", workload.hosts_file())
        self.relay, self.gateway, self.switch = Relay(self.server.address), Gateway(), None
        try:
            self.switch = Switch(out / "switch", self.gateway.frame_address, self.relay.frame_address)
        except BaseException:
            self.close()
            raise
        self.relay.start(self.gateway.frame_address)
        self.gateway.start(self.switch.address, self.relay.frame_address)

    def query(self, name: str) -> None:
        """One A query for `name` from dnspython, timed, checked, and noted in the run."""
        q = Query(name)
        q.expected_by, q.problem = expected(self.spec, self.rules, name, self.addresses[name])
        self.run.queries.append(q)
        query = dns.message.make_query(name, "A")
        start = time.perf_counter()
        try:
            reply = dns.query.udp(query, self.gateway.address[0], port=self.gateway.address[1],
                                  timeout=QUERY_TIMEOUT)
        except dns.exception.Timeout:
            return
        except dns.exception.DNSException as exc:  # dnspython refused what came back
            q.ms, q.problem = (time.perf_counter() - start) * 1e3, f"dnspython: {type(exc).__name__}: {exc}"
            return
        q.ms = (time.perf_counter() - start) * 1e3
        q.by = _who(self.gateway, query)
        q.problem = q.problem or check_answer(reply, name, self.addresses[name])

    def close(self) -> Run:
        """Stop everything; the run with the counts and the server's log."""
        run = self.run
        if self.switch is not None:
            self.switch.close()
            run.switch_counters = self.switch.printed
        self.gateway.close()
        self.relay.close()
        self.server.stop()
        run.relayed, run.delivered = self.relay.queries, self.gateway.delivered
        run.server_log = self.server.queries_logged()
        (self.out / "queries.json").write_text(json.dumps(
            [{"name": q.name, "ms": q.ms, "by": q.by, "problem": q.problem} for q in run.queries], indent=0))
        run.errors += [f"gateway: {e}" for e in self.gateway.errors] + [f"relay: {e}" for e in self.relay.errors]
        if self.gateway.unknown:
            run.errors.append(f"gateway: {self.gateway.unknown} frames from neither the switch nor the relay")
        if self.relay.unmatched:
            run.errors.append(f"relay: {self.relay.unmatched} server answers to no query it sent")
        return run


def _who(gateway: Gateway, query: dns.message.Message) -> str | None:
    """Who answered `query`, as the gateway recorded it. dnspython sent it from a fresh port
    that it does not tell; the queries go one at a time, so id and question find it."""
    tail = question_key(query.to_wire())
    for key in list(gateway.answered_by):
        if key[1:] == tail:
            return gateway.answered_by.pop(key)
    return None


def run_demo(workload: Workload, out: Path) -> Demo:
    workload.check()
    spec = load_spec(SPEC)
    out.mkdir(parents=True, exist_ok=True)
    names = workload.query_names()
    (out / "workload.json").write_text(json.dumps({
        "settings": workload.__dict__, "cached": workload.cached(), "queries": names}, indent=1))
    # Both modes run at once, each query sent to one then the other (the order alternating),
    # so the shared machine's load falls on both alike.
    setups: dict[str, Setup] = {}
    try:
        for mode in MODES:
            setups[mode] = Setup(spec, workload, mode, out / mode)
        t0 = time.perf_counter()
        for i, name in enumerate(names):
            for mode in MODES if i % 2 == 0 else reversed(MODES):
                setups[mode].query(name)
        seconds = time.perf_counter() - t0
    finally:
        runs = {mode: setup.close() for mode, setup in setups.items()}
    for run in runs.values():
        run.seconds = seconds
    return Demo(workload, runs)
