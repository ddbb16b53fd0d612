"""ITCH, INT, DNS and plain IPv4 on one switch (issue 26 item 6; seed 000 §V-D).

One static program holds the three applications' tables and the IPv4 table; each frame of
a stream mixing all four kinds must give what its application's reference says
(`compiler.semantics` on every ITCH message, INT report and DNS query; the longest-prefix
reference `compiler.routes.lookup` for what no application took). A change to one
application's rules must write that application's tables only, and leave the switch doing
what a fresh compile of the new rules would. The DNS application's `answerDNS` runs on the
Python reference switch only: the native switch runs ITCH, INT and IPv4 together and refuses
a program with DNS (docs/actions.md, "Targets").
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.errors import CamusError
from compiler.multi import AppSource, Switchboard
from compiler.routes import lookup, parse_routes
from compiler.rules import parse_rules
from controller.diff import apply_steps, diff, patch
from p4rt.entry_key import entry_key
from pipeline.model import PipelineError
from switch.dataplane import new
from tests.p4runtime.p4runtime_helpers import read_until_ready

from four_apps_helpers import (DNS_RULES, INT_RULES, ITCH_RULES, NAMES, ROOT, ROUTES, SPECS,
                               STOCKS, board, check, expected, mixed_stream, observed)

APPS = ("itch", "int", "dns")


def running(b: Switchboard, impl: str):
    dp = new(b.pipeline, impl)
    dp.load_entries(b.entries())
    return dp


def test_four_kinds_interleaved_on_the_reference_switch():
    b = board()
    counts = check(b, running(b, "python"), mixed_stream(1, 800))
    # every kind got something somewhere: the stream exercised each application and IPv4
    assert set(counts) == {"itch", "int", "dns", "ip"} and all(counts.values()), counts


def test_itch_int_and_ip_on_the_native_switch():
    b = board(dns_=None)
    stream = [x for x in mixed_stream(2, 800) if x[0] != "dns"]
    counts = check(b, running(b, "native"), stream)
    assert set(counts) == {"itch", "int", "ip"} and all(counts.values()), counts
    # a DNS query is plain IP traffic to this switch: routed by longest prefix
    check(b, running(b, "native"), [("ip", f) for k, f in mixed_stream(3, 200) if k == "dns"])


def test_the_native_switch_refuses_the_program_with_dns():
    with pytest.raises(PipelineError, match="--impl python"):
        new(board().pipeline, "native")


def test_the_program_is_the_same_whatever_the_rules():
    a = board()
    b = board("price < 5 : fwd(1)", "switch_id == 3 : fwd(2)", 'name == "db" : drop',
              "0.0.0.0/0 7")
    assert a.pipeline == b.pipeline


# ---- random rule sets per application --------------------------------------------------

PORTS = st.integers(1, 6)  # rule ports; routes use 7.. so the two cannot be confused
ITCH_RULE = st.builds(
    lambda s, op, p, n, port: f'stock == "{s}" and price {op} {p} : fwd({port})'
    if n is None else f"shares >= {n} : fwd({port})",
    st.sampled_from(STOCKS), st.sampled_from(("<", ">", "==")),
    st.sampled_from((500, 999999, 1000001, 2500000)),
    st.none() | st.sampled_from((10, 5000, 5001, 90000)), PORTS)
INT_RULE = st.builds(
    lambda f, op, v, sid, port: f"{f} {op} {v}" + (f" and switch_id == {sid}" if sid else "")
    + f" : fwd({port})",
    st.sampled_from(("hop_latency", "queue_occupancy")), st.sampled_from(("<", ">", ">=")),
    st.sampled_from((10, 1000, 5000, 70000)), st.sampled_from((0, 1, 7)), PORTS)
DNS_RULE = st.one_of(
    st.builds(lambda n, i: f'name == "{n}" : answerDNS(10.0.0.{i})',
              st.sampled_from(NAMES[:7]), st.integers(1, 9)),
    st.builds(lambda n, i, p: f'name == "{n}" : answerDNS(10.0.0.{i}), fwd({p}), '
                              f'priority({i % 3})', st.sampled_from(NAMES[:7]),
              st.integers(1, 9), PORTS),
    st.builds(lambda n: f'name == "{n}" : drop', st.sampled_from(NAMES[:7])),
    st.builds(lambda t, p: f"qtype == {t} : fwd({p})", st.sampled_from((1, 28, 255)), PORTS))
ROUTE = st.tuples(st.sampled_from(("10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32",
                                   "192.168.0.0/16", "8.0.0.0/7", "0.0.0.0/0")),
                  st.none() | st.integers(7, 12))


def _routes(picked) -> str:
    seen = {}
    for prefix, port in picked:
        seen[prefix] = "drop" if port is None else str(port)
    return "".join(f"{p} {a}\n" for p, a in seen.items())


def _text(rules) -> str:
    return "".join(r + "\n" for r in rules)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(itch=st.lists(ITCH_RULE, max_size=5), int_=st.lists(INT_RULE, max_size=4),
       dns_=st.lists(DNS_RULE, max_size=5), routes=st.lists(ROUTE, max_size=5),
       seed=st.integers(0, 1 << 16))
def test_random_rule_sets_on_the_reference_switch(itch, int_, dns_, routes, seed):
    b = board(_text(itch), _text(int_), _text(dns_), _routes(routes))
    check(b, running(b, "python"), mixed_stream(seed, 120))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(itch=st.lists(ITCH_RULE, max_size=5), int_=st.lists(INT_RULE, max_size=4),
       routes=st.lists(ROUTE, max_size=5), seed=st.integers(0, 1 << 16))
def test_random_rule_sets_on_the_native_switch(itch, int_, routes, seed):
    b = board(_text(itch), _text(int_), None, _routes(routes))
    check(b, running(b, "native"), [x for x in mixed_stream(seed, 160) if x[0] != "dns"])


# ---- changes to one application ------------------------------------------------------

def _tables_of(entries: dict, app: str) -> list:
    return sorted((entry_key(e), json.dumps(e, sort_keys=True)) for e in entries["table_entries"]
                  if e["table"].startswith(app + "_"))


CHANGE = st.tuples(st.sampled_from(APPS + ("routes",)), st.booleans(), st.integers(0, 1 << 30))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(CHANGE, min_size=1, max_size=6), data=st.data())
def test_a_change_to_one_application_writes_only_its_tables(changes, data):
    b = board()
    dp = running(b, "python")
    for app, add, _ in changes:
        before = b.entries()
        if app == "routes":
            step = b.set_routes(parse_routes(_routes(data.draw(st.lists(ROUTE, max_size=5)))))
            owned, group = {b.pipeline.ipv4_table}, None
        else:
            spec = b.spec(app)
            current = b.rules(app)
            if add or not current:
                rule = data.draw({"itch": ITCH_RULE, "int": INT_RULE, "dns": DNS_RULE}[app])
                step = b.change(app, parse_rules(rule, spec), [])
            else:
                step = b.change(app, [], [data.draw(st.sampled_from(current))])
            owned, group = b.owned(app)
        after = b.entries()
        # The whole switch's difference names only the changed application's tables and
        # group; every other application's entries are untouched, byte for byte.
        whole = diff(before, after)
        touched = {e["table"] for e in (*whole.insert, *whole.modify, *whole.delete)}
        assert touched <= owned, (app, touched)
        assert set(whole.set_groups) | set(whole.delete_groups) <= {group}
        for other in APPS:
            if other != app:
                assert _tables_of(before, other) == _tables_of(after, other)
        # The writes the change returned are that difference: applied to the switch they
        # give the new entries, as a fresh compile of the new rules would.
        assert _same(patch(before, step), after)
        fresh = board(*(_text(r.text for r in b.rules(a)) for a in APPS),
                      "".join(f"{_net(r)} {'drop' if r.port is None else r.port}\n"
                              for r in b.routes))
        assert _same(fresh.entries(), after)
        apply_steps(dp, step)
    check(b, dp, mixed_stream(changes[0][2], 150))


def _net(r) -> str:
    return ".".join(str(x) for x in r.prefix.to_bytes(4, "big")) + f"/{r.length}"


def _same(a: dict, b: dict) -> bool:
    def norm(d):
        return (sorted(json.dumps(e, sort_keys=True) for e in d["table_entries"]),
                sorted(json.dumps(g, sort_keys=True) for g in d["multicast_groups"]))
    return norm(a) == norm(b)


def test_removing_a_rule_that_is_not_there_is_refused():
    b = board()
    with pytest.raises(CamusError, match="no such rule"):
        b.change("int", [], parse_rules("switch_id == 99 : fwd(1)", b.spec("int")))
    with pytest.raises(CamusError, match="no application named 'kafka'"):
        b.change("kafka", [], [])


def test_two_applications_on_one_udp_port_are_refused():
    from compiler.spec import parse_spec

    a = parse_spec(SPECS["int"].read_text(), name="int")
    c = parse_spec(SPECS["int"].read_text(), name="int2")
    with pytest.raises(PipelineError, match="share a UDP port"):
        Switchboard({"int": (a, []), "int2": (c, [])})


# ---- the command line, and camus switch serve running the combined program ------------

def camus(*args: str) -> list[str]:
    return [sys.executable, "-m", "camus", *args]


def compile_dir(tmp: Path, out: Path, rules: dict[str, str], routes: str = ROUTES) -> None:
    tmp.mkdir(parents=True, exist_ok=True)
    args = ["compile", "--out", str(out)]
    for app in rules:
        (tmp / f"{app}.rules").write_text(rules[app])
        args += ["--app", f"{app}={SPECS[app]}:{tmp / f'{app}.rules'}"]
    (tmp / "routes.txt").write_text(routes)
    args += ["--ipv4", str(tmp / "routes.txt")]
    r = subprocess.run(camus(*args), capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_camus_compile_with_several_applications(tmp_path):
    rules = {"itch": ITCH_RULES, "int": INT_RULES, "dns": DNS_RULES}
    compile_dir(tmp_path / "in", tmp_path / "out", rules)
    pipeline = json.loads((tmp_path / "out" / "pipeline.json").read_text())
    assert [a["name"] for a in pipeline["applications"]] == list(APPS)
    entries = json.loads((tmp_path / "out" / "entries.json").read_text())
    assert _same(entries, board().entries())
    changes = tmp_path / "in" / "dns.changes"
    changes.write_text('+ name == "db" : answerDNS(10.0.0.9)\n- qtype == 255 : drop\n')
    r = subprocess.run(camus("compile", "--out", str(tmp_path / "o2"),
                             *[a for app in APPS for a in
                               ("--app", f"{app}={SPECS[app]}:{tmp_path / 'in' / f'{app}.rules'}")],
                             "--changes", f"dns={changes}"),
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    touched = re.findall(r"to (\w+): .*; tables (.*)", r.stderr)
    assert len(touched) == 2 and all(app == "dns" for app, _ in touched), r.stderr
    assert all(t.startswith("dns_") for _, tables in touched for t in tables.split(", "))


@pytest.mark.parametrize("args, message", [
    (["--app", "itch"], "expected NAME=SPEC[:RULES]"),
    (["--app", "1x=p4/int/int.p4"], "must be an identifier"),
    (["--app", "a=p4/int/int.p4", "--app", "b=p4/int/int.p4"], "share a UDP port"),
    (["--app", "a=p4/int/int.p4", "--ipv4", "ROUTES"], "ROUTES:2:10: prefix length '33'"),
    (["--app", "a=p4/int/int.p4", "--changes", "b=x"], "no application named 'b'"),
    (["--app", "a=p4/int/int.p4:BAD"], "BAD:2:15: unexpected"),
    (["--app", "a=p4/int/int.p4:BAD", "--app", "b=p4/dns/dns.p4"], "BAD:2:15: unexpected"),
    (["--ipv4", "ROUTES"], "--ipv4 goes with --app"),
    (["--app", "a=p4/int/int.p4", "--lanes", "2"], "--lanes compiles one application"),
    (["p4/int/int.p4", "--app", "a=p4/int/int.p4"], "--app replaces SPEC RULES"),
])
def test_camus_compile_refuses_with_a_reason(tmp_path, args, message):
    routes = tmp_path / "routes"
    routes.write_text("10.0.0.0/8 1\n10.0.0.0/33 2\n")
    bad = tmp_path / "bad.rules"
    bad.write_text("hop_latency > 5 : fwd(1)\nhop_latency > : fwd(2)\n")
    args = [a.replace("ROUTES", str(routes)).replace("BAD", str(bad)) for a in args]
    message = message.replace("ROUTES", str(routes)).replace("BAD", str(bad))
    r = subprocess.run(camus("compile", "--out", str(tmp_path / "o"), *args),
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def _exchange(b: Switchboard, ingress, socks: dict, stream) -> None:
    """Each frame in turn through the serving switch, its copies against the references."""
    by_fd = {s.fileno(): (p, s) for p, s in socks.items()}
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for i, (kind, frame) in enumerate(stream):
            want = expected(b, kind, frame)
            sender.sendto(frame, ingress)
            got, deadline = [], time.monotonic() + 10
            while time.monotonic() < deadline:
                quiet = 0.05 if len(got) >= len(want) else 1.0
                ready, _, _ = select.select(list(by_fd), [], [], quiet)
                if not ready:
                    if len(got) >= len(want):
                        break
                    continue
                for fd in ready:
                    port, s = by_fd[fd]
                    got.append((port, s.recv(65535)))
            if want and want[0][0] == "route":
                assert sorted(("route", p, f) for p, f in got) == want, (i, kind)
            else:
                assert observed(b, kind, frame, got) == want, (i, kind)
    finally:
        sender.close()


@contextlib.contextmanager
def serving(directory: Path, *options: str):
    """`camus switch serve` on `directory` with ports 1..9 bound to sockets here and port 20
    (IN_PORT) both the ingress and a socket here (answerDNS answers out of it): yields its
    ready lines, the sockets by port and the ingress address; stopped by SIGTERM after."""
    socks = {}
    for p in (*range(1, 10), 20):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks[p] = s
    args = ["switch", "serve", "--pipeline", str(directory), *options,
            "--ingress", "20=udp:127.0.0.1:0"]
    for p, s in socks.items():
        args += ["--port", f"{p}=udp:127.0.0.1:{s.getsockname()[1]}"]
    proc = subprocess.Popen(camus(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        lines = "\n".join(read_until_ready(proc))
        host, port = re.search(r"^port 20: udp (\S+):(\d+)$", lines, re.M).groups()
        yield lines, socks, (host, int(port))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        print(out, err)  # shown by pytest if the test failed
        for s in socks.values():
            s.close()
    assert proc.returncode == 0, err


def test_switch_serve_runs_the_combined_program_and_a_push_changes_one_application(tmp_path):
    from controller.p4runtime_client import P4RuntimeClient
    from controller.push import read_state
    from p4rt.index import P4InfoIndex

    rules = {"itch": ITCH_RULES, "int": INT_RULES, "dns": DNS_RULES}
    compile_dir(tmp_path / "in", tmp_path / "old", rules)
    changed = dict(rules, dns=DNS_RULES.replace('"web" : answerDNS(10.0.0.80), fwd(3)',
                                                '"web" : answerDNS(10.0.0.81)')
                   + 'name == "db" : answerDNS(10.0.0.9)\n')
    compile_dir(tmp_path / "in2", tmp_path / "new", changed)
    with serving(tmp_path / "old", "--impl", "python", "--p4runtime", "127.0.0.1:0") as (
            lines, socks, ingress):
        target = re.search(r"^p4runtime (\S+)", lines, re.M).group(1)
        _exchange(board(), ingress, socks, mixed_stream(5, 60))

        client = P4RuntimeClient.primary(target, election_id=2)
        try:
            index = P4InfoIndex(client.get_pipeline("P4INFO_AND_COOKIE").p4info)
            before, _ = read_state(client, index)
        finally:
            client.close()
        push = subprocess.run(camus("controller", "push", "--target", target, "--pipeline",
                                    str(tmp_path / "new"), "--election-id", "3"),
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert push.returncode == 0, push.stderr
        assert "pipeline set" not in push.stdout  # same static program: entries only
        client = P4RuntimeClient.primary(target, election_id=4)
        try:
            after, _ = read_state(client, index)
        finally:
            client.close()
        changed_keys = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        # Only the DNS application's tables changed on the switch (dns.p4 declares actions,
        # so its rules are recompiled whole: its state ids may move, within its tables).
        assert changed_keys and all(k[0].startswith("dns_") for k in changed_keys), changed_keys
        assert {k for k in before if not k[0].startswith("dns_")} == \
            {k for k in after if not k[0].startswith("dns_")}
        _exchange(board(dns_=changed["dns"]), ingress, socks, mixed_stream(6, 60))


def test_switch_serve_native_runs_itch_int_and_ip(tmp_path):
    compile_dir(tmp_path / "in", tmp_path / "out", {"itch": ITCH_RULES, "int": INT_RULES})
    with serving(tmp_path / "out", "--p4runtime", "none") as (_, socks, ingress):
        stream = [x for x in mixed_stream(7, 80) if x[0] != "dns"]
        _exchange(board(dns_=None), ingress, socks, stream)


def test_the_routes_reference_by_hand():
    routes = parse_routes(ROUTES + "0.0.0.0/0 12\n")
    ip = lambda *a: int.from_bytes(bytes(a), "big")  # noqa: E731
    assert lookup(routes, ip(10, 1, 2, 3)) == 9
    assert lookup(routes, ip(10, 1, 3, 3)) == 8
    assert lookup(routes, ip(10, 2, 0, 0)) == 7
    assert lookup(routes, ip(192, 168, 0, 1)) is None
    assert lookup(routes, ip(1, 1, 1, 1)) == 12
    assert lookup(parse_routes(ROUTES), ip(1, 1, 1, 1)) is None


@pytest.mark.parametrize("text, where", [
    ("10.0.0.0/8", "1:1: a route is"),
    ("  10.0.0.1/8 3", "1:3: 10.0.0.1/8 has bits set past its length (the network is 10.0.0.0/8)"),
    ("10.0.0.0/8 3\n10.0.0.0/8 4", "2:1: 10.0.0.0/8 is already routed on line 1"),
    ("10.0.0.0/8 512", "1:12: '512' is neither a port"),
    ("10.0.0.300/8 1", "1:1: '10.0.0.300' is not a dotted IPv4 address"),
])
def test_bad_routes_are_refused_at_their_line_and_column(text, where):
    with pytest.raises(CamusError) as info:
        parse_routes(text, "r.txt")
    assert str(info.value).startswith("r.txt:" + where.split(":")[0] + ":") and \
        where.split(": ", 1)[1] in str(info.value), str(info.value)
    assert str(info.value).startswith("r.txt:" + where.split(": ", 1)[0])


def test_app_option():
    assert AppSource.parse("dns=p4/dns/dns.p4:r.txt") == AppSource("dns", "p4/dns/dns.p4", "r.txt")
    assert AppSource.parse("dns=p4/dns/dns.p4") == AppSource("dns", "p4/dns/dns.p4", None)


def test_camus_compile_p4_for_itch_int_and_ip_and_its_refusal_with_dns(tmp_path):
    """The program without DNS is P4 that p4c compiles (where p4c is installed); with DNS,
    --p4 is refused as for one IR 5 application."""
    import shutil

    base = ["compile", "--ipv4", str(ROOT / "examples/four_apps/routes.txt"), "--p4"]
    apps = [a for app in ("itch", "int") for a in
            ("--app", f"{app}={SPECS[app]}:{ROOT / 'examples/four_apps' / f'{app}.rules'}")]
    r = subprocess.run(camus(*base, *apps, "--out", str(tmp_path / "p4")), capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(camus(*base, *apps, "--app", f"dns={SPECS['dns']}", "--out",
                             str(tmp_path / "dns")), capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 2 and "--p4: the P4 program does not run actions" in r.stderr
    if shutil.which("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss is not on PATH: the program was written, not compiled")
    p4c = subprocess.run(["p4c-bm2-ss", "program.p4", "-o", "program.json"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path / "p4")
    assert p4c.returncode == 0 and "warning" not in p4c.stderr.lower(), p4c.stderr
