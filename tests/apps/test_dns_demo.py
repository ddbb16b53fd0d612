"""`camus demo dns`: the name set against dns.p4's 8-byte name field, and the demo end to end at
a small size (a real dnsmasq, the reference switch as a child process, dnspython's queries):
every query answered once, correctly, and by the switch exactly when the reference evaluator
says answerDNS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import dns.name as dns_name
import dns.rdatatype

from apps.dns import server, workload
from compiler.errors import CamusError
from compiler.rules import parse_rules
from compiler.semantics import outcome
from compiler.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "p4" / "dns" / "dns.p4"
needs_dnsmasq = pytest.mark.skipif(server.find_dnsmasq() is None,
                                   reason="dnsmasq is not installed (Debian: dnsmasq-base)")


def test_short_names_fit_the_switch_and_long_ones_are_refused():
    w = workload.Workload(names=40, long_every=4, cache=10, queries=500, seed=5)
    w.check()
    names = w.name_list()
    spec = load_spec(SPEC)
    for name in names:
        wire = dns_name.from_text(name).to_wire()  # dnspython's count, not the workload's
        assert workload.fits(name) == (len(wire) <= workload.NAME_FIELD_BYTES), name
    long_names = [n for n in names if not workload.fits(n)]
    assert len(long_names) == 10
    with pytest.raises(CamusError, match="bytes on the wire"):
        parse_rules(f'name == "{long_names[0]}" : answerDNS(10.0.0.1)', spec)
    cached = w.cached()
    assert len(cached) == 10 and all(workload.fits(n) for n in cached)
    assert len(parse_rules(w.rules(True), spec)) == 10 and parse_rules(w.rules(False), spec) == []
    # Zipf over the popularity order: the most popular name is drawn most, and the draws are seeded
    drawn = w.query_names()
    assert drawn == w.query_names() and Counter(drawn).most_common(1)[0][0] == w.by_popularity()[0]
    # the cache is the most popular short names: no uncached short name is more popular
    ranks = {n: r for r, n in enumerate(w.by_popularity())}
    worst_cached = max(ranks[n] for n in cached)
    assert all(ranks[n] > worst_cached for n in names if workload.fits(n) and n not in cached)
    with pytest.raises(ValueError, match="--cache"):
        workload.Workload(names=8, long_every=2, cache=5).check()


def _running_with(path: Path) -> list[str]:
    """Command lines of live processes naming `path`: what the demo must not leave behind."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(path) in cmd and int(pid) != os.getpid():
            found.append(cmd)
    return found


@needs_dnsmasq
def test_the_demo_end_to_end(tmp_path):
    out = tmp_path / "dns"
    cmd = [sys.executable, "-m", "camus.cli", "demo", "dns", "--names", "40", "--cache", "8",
           "--queries", "150", "--seed", "3", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checks passed" in done.stdout and (out / "dns.png").stat().st_size > 10_000
    assert _running_with(tmp_path) == []  # dnsmasq and the switch were stopped

    # Check again here, from what the demo wrote, with the reference evaluator.
    spec = load_spec(SPEC)
    w = json.loads((out / "workload.json").read_text())
    names = w["queries"]
    assert len(names) == 150 and any(not workload.fits(n) for n in names)
    addresses = workload.Workload(**w["settings"]).addresses()
    report = json.loads((out / "report.json").read_text())["runs"]
    for mode in ("cache", "baseline"):
        rules = parse_rules((out / mode / "dns.rules").read_text(), spec)
        queries = json.loads((out / mode / "queries.json").read_text())
        assert [q["name"] for q in queries] == names
        for q in queries:
            assert q["ms"] is not None and q["problem"] == "", q
            wire = dns_name.from_text(q["name"]).to_wire()
            values = ({"question.name": int.from_bytes(wire.ljust(8, b"\0"), "big"),
                       "question.qtype": dns.rdatatype.A} if len(wire) <= 8 else None)
            got = outcome(rules if values else [], values or {}, spec.default)
            if q["by"] == "switch":
                assert got.verdict is not None and got.verdict.name == "answerDNS", q
                assert got.verdict.args[0] == int.from_bytes(bytes(map(int, addresses[q["name"]].split("."))), "big")
            else:
                assert q["by"] == "server" and got.verdict is None and got.ports == {1}, q
        by_switch = {q["name"] for q in queries if q["by"] == "switch"}
        forwarded = [q["name"] for q in queries if q["by"] == "server"]
        figures = report[mode]
        assert figures["failures"] == [] and figures["unanswered"] == 0
        assert figures["server_load"] == {"relayed": len(forwarded), "dnsmasq_log": len(forwarded)}
        server_log = (out / mode / "server" / "dnsmasq.log").read_text()
        logged = Counter(line.split("] ", 1)[1].split(" from ")[0]
                         for line in server_log.splitlines() if "query[A]" in line)
        logged.pop(server.PROBE_NAME)
        assert logged == Counter(forwarded)  # each forwarded query reached dnsmasq once
        if mode == "cache":
            cached = set(workload.Workload(**w["settings"]).cached())
            assert by_switch == cached & set(names) and by_switch
            assert all(n not in cached for n in forwarded)
        else:
            assert by_switch == set() and len(forwarded) == 150
