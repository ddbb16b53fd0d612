"""Actions beyond fwd in the Python reference switch (docs/actions.md): real DNS queries
built by dnspython go through p4/dns/dns.p4's compiled tables; what comes out is what the
reference evaluator's outcome says, and the switch's answers are valid DNS responses as
dnspython and scapy read them (checksums included). The native switch refuses IR 5."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

dns_message = pytest.importorskip("dns.message", reason="dnspython is a test extra")
import dns.flags  # noqa: E402
import dns.name  # noqa: E402
import dns.rdatatype  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402

from compiler.compile import compile_rules  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.semantics import outcome  # noqa: E402
from compiler.spec import parse_spec  # noqa: E402
from pipeline.model import PipelineError  # noqa: E402
from switch.actions import DNS_TTL  # noqa: E402
from switch.dataplane import new  # noqa: E402
from switch.packet import udp_frame  # noqa: E402
from switch.reference import ReferenceDataPlane  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DNS_SPEC = (ROOT / "p4" / "dns" / "dns.p4").read_text()
WITH_DROP = DNS_SPEC  # dns.p4 declares answerDNS and drop
NO_DEFAULT = DNS_SPEC.replace('@pragma default_action("fwd(1)")', "")
assert NO_DEFAULT != DNS_SPEC
IN_PORT, ROUTE_PORT = 20, 30
NAMES = ["h1", "h105", "H105", "h7", "ab.cd", "a.b.c", "h1.lan", "toolong", "h1.example"]
QTYPES = ["A", "AAAA", "MX", "ANY"]


def name_value(name: str) -> int | None:
    """The name field's value for a query of `name`, worked out with dnspython's wire form
    (not camus's encoder); None when it does not fit the 8-byte field."""
    wire = dns.name.from_text(name).to_wire()
    return int.from_bytes(wire.ljust(8, b"\0"), "big") if len(wire) <= 8 else None


def switch_for(spec_text: str, rules_text: str):
    spec = parse_spec(spec_text, name="dns")
    rules = parse_rules(rules_text, spec)
    c = compile_rules(spec, rules)
    sw = ReferenceDataPlane(c.pipeline)
    sw.load_entries(c.entries)
    sw.insert({"table": "ipv4_lpm", "match": {"ipv4.dst_addr": {"lpm": [0, 0]}},
               "action": "fwd", "params": {"port": ROUTE_PORT}})
    return spec, rules, sw


def check_query(spec, rules, sw, name: str, qtype: str, edns: bool) -> None:
    q = dns_message.make_query(name, qtype, use_edns=edns)
    frame = udp_frame(q.to_wire(), dst_port=53, src_port=33333, src_ip=0x0A000002,
                      dst_ip=0x0A000035)
    out = sw.process(frame, IN_PORT)
    value = name_value(name)
    if value is None:  # no rule can match it: the default (or nothing)
        want = outcome([], {}, spec.default)
    else:
        want = outcome(rules, {"question.name": value,
                               "question.qtype": dns.rdatatype.from_text(qtype)}, spec.default)
    if want.verdict is None and not want.ports:
        assert out == [(ROUTE_PORT, frame)], (name, qtype)  # nothing: IPv4 routing
        return
    copies = [(p, f) for p, f in out if p != IN_PORT]
    answers = [f for p, f in out if p == IN_PORT]
    assert copies == [(p, frame) for p in sorted(want.ports)], (name, qtype)
    if want.verdict is None or want.verdict.name == "drop":
        assert answers == [], (name, qtype)
        return
    assert want.verdict.name == "answerDNS"
    (reply,) = answers
    check_answer(q, frame, reply, want.verdict.args[0], qtype)


def check_answer(q, frame: bytes, reply: bytes, ip: int, qtype: str) -> None:
    sent, got = Ether(frame), Ether(reply)
    assert (got.src, got.dst) == (sent.dst, sent.src)
    assert (got[IP].src, got[IP].dst) == (sent[IP].dst, sent[IP].src)
    assert (got[UDP].sport, got[UDP].dport) == (sent[UDP].dport, sent[UDP].sport)
    # lengths and checksums as scapy computes them from scratch
    fresh = got.copy()
    del fresh[IP].len, fresh[IP].chksum, fresh[UDP].len, fresh[UDP].chksum
    fresh = Ether(bytes(fresh))
    assert (got[IP].len, got[IP].chksum) == (fresh[IP].len, fresh[IP].chksum)
    assert (got[UDP].len, got[UDP].chksum) == (fresh[UDP].len, fresh[UDP].chksum)
    assert len(reply) == 14 + got[IP].len
    r = dns_message.from_wire(bytes(got[UDP].payload))
    assert q.is_response(r)
    assert r.flags & dns.flags.QR and r.flags & dns.flags.AA and r.flags & dns.flags.RD
    assert r.rcode() == 0 and r.question == q.question
    if qtype in ("A", "ANY"):
        (rrset,) = r.answer
        assert rrset.rdtype == dns.rdatatype.A and rrset.ttl == DNS_TTL
        assert [x.address for x in rrset] == [".".join(str(b) for b in ip.to_bytes(4, "big"))]
        assert rrset.name == q.question[0].name
    else:  # the name exists, with no record of that type
        assert r.answer == []


def test_the_papers_rule_answers_and_the_rest_goes_to_the_server():
    spec, rules, sw = switch_for(DNS_SPEC, 'name == "h105" : answerDNS(10.0.0.105)')
    for name in ("h105", "h106", "h105.example", "H105"):
        for qtype in ("A", "AAAA"):
            check_query(spec, rules, sw, name, qtype, edns=True)
    q = dns_message.make_query("h105", "A")
    out = sw.process(udp_frame(q.to_wire(), dst_port=53), IN_PORT)
    assert [p for p, _ in out] == [IN_PORT]
    out = sw.process(udp_frame(dns_message.make_query("h106", "A").to_wire(), dst_port=53),
                     IN_PORT)
    assert [p for p, _ in out] == [1]  # the default action: the server's port


def test_what_is_no_query_gets_the_default():
    spec, rules, sw = switch_for(DNS_SPEC, 'name == "h105" : answerDNS(10.0.0.105)')
    q = dns_message.make_query("h105", "A")
    response = dns_message.make_response(q).to_wire()  # QR set: not a query
    for payload in (response, q.to_wire()[:14], b"\x00" * 5):
        assert [p for p, _ in sw.process(udp_frame(payload, dst_port=53), IN_PORT)] == [1]


_RULE = st.one_of(
    st.builds(lambda n, i: f'name == "{n}" : answerDNS(10.0.0.{i})',
              st.sampled_from(NAMES[:7]), st.integers(1, 9)),
    st.builds(lambda n, i, p: f'name == "{n}" : answerDNS(10.0.0.{i}), fwd({p}), '
                              f'priority({i % 3})',
              st.sampled_from(NAMES[:7]), st.integers(1, 9), st.integers(2, 5)),
    st.builds(lambda n: f'name == "{n}" : drop', st.sampled_from(NAMES[:7])),
    st.builds(lambda t, p: f"qtype == {t} : fwd({p})", st.sampled_from([1, 28, 15]),
              st.integers(2, 5)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=st.lists(_RULE, min_size=1, max_size=8), default=st.booleans(),
       edns=st.booleans())
def test_switch_outputs_match_the_evaluator(rules, default, edns):
    spec, parsed, sw = switch_for(WITH_DROP if default else NO_DEFAULT, "\n".join(rules))
    for name in NAMES:
        for qtype in QTYPES:
            check_query(spec, parsed, sw, name, qtype, edns)


def test_answer_dns_needs_dns_framing():
    spec_text = "header m { bit<8> a; }\n@query_field(m.a)\n@action(answerDNS)\n"
    spec = parse_spec(spec_text)
    c = compile_rules(spec, parse_rules("a == 1 : answerDNS(1.1.1.1)", spec))
    with pytest.raises(PipelineError, match="needs framing 'dns'"):
        ReferenceDataPlane(c.pipeline)


def test_the_native_switch_refuses_ir_5():
    spec, rules, _ = switch_for(DNS_SPEC, 'name == "h105" : answerDNS(10.0.0.105)')
    c = compile_rules(spec, rules)
    with pytest.raises(PipelineError, match="camus_ir 5.*impl='python'"):
        new(c.pipeline, impl="native")


def test_camus_compile_p4_refuses_ir_5(tmp_path):
    rules = tmp_path / "dns.rules"
    rules.write_text('name == "h105" : answerDNS(10.0.0.105)\n')
    run = subprocess.run([sys.executable, "-m", "camus", "compile", str(ROOT / "p4/dns/dns.p4"),
                          str(rules), "--out", str(tmp_path / "out"), "--p4"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode != 0
    assert "--p4: the P4 program does not run actions beyond fwd" in run.stderr


def test_camus_eval_prints_ports_and_verdict(tmp_path):
    rules = tmp_path / "dns.rules"
    rules.write_text('name == "h105" : answerDNS(10.0.0.105)\nqtype == 28 : drop\n')
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "camus", "compile", str(ROOT / "p4/dns/dns.p4"),
                    str(rules), "--out", str(out)], check=True, capture_output=True, cwd=ROOT,
                   timeout=120)
    run = subprocess.run([sys.executable, "-m", "camus", "eval", "--pipeline", str(out)],
                         input='{"name": "h105", "qtype": 1}\n{"name": "h106", "qtype": 1}\n'
                               '{"name": "h105", "qtype": 28}\n',
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert [json.loads(line) for line in run.stdout.splitlines()] == [
        {"ports": [], "verdict": {"action": "answerDNS", "args": [0x0A000069]}},
        {"ports": [1], "verdict": None},  # the default action: the server's port
        {"ports": [], "verdict": {"action": "drop", "args": []}},  # drop ranks first
    ]
