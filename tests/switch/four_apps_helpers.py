"""ITCH, INT, DNS and plain IPv4 on one switch: a mixed stream and what each frame must give.

`board(...)` compiles the four applications' rules and the routes into one static pipeline
(`compiler.multi.Switchboard`). `mixed_stream(seed, n)` draws frames of every kind
interleaved: MoldUDP64 packets of 1-4 ITCH messages (Add Orders, and system events no rule
can select), INT reports, DNS queries (for cached names, other names, names too long for the
name field, ANY queries), and plain UDP datagrams on ports no application uses, to
destinations that exercise the routes.

`expected(board, kind, frame)` is what the references say the switch must output for one
frame, per application: `compiler.semantics.evaluate` on each ITCH message and each INT
report, `compiler.semantics.outcome` with the spec's default on each DNS query, and the
longest-prefix reference `compiler.routes.lookup` for everything no application took.
`observed(board, kind, frame, out)` puts the switch's output in the same form, reading the
frames with independent parsers (MoldUDP64 blocks, dnspython for answers).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import dns.message
import dns.name
import dns.rdatatype

from compiler.multi import Switchboard
from compiler.routes import lookup, parse_routes
from compiler.rules import parse_rules
from compiler.semantics import evaluate, outcome
from compiler.spec import parse_spec
from switch.packet import mold_payload, read_mold, read_udp, udp_frame

ROOT = Path(__file__).resolve().parents[2]
SPECS = {name: ROOT / "p4" / name / f"{name}.p4" for name in ("itch", "int", "dns")}
ITCH_PORT, INT_PORT, DNS_PORT = 1234, 1337, 53
IN_PORT = 20  # where every frame enters: no rule or route names it
SESSION = b"FOURAPPS01"
STOCKS = ("GOOGL", "AAPL", "MSFT", "IBM")
NAMES = ("h105", "web", "h7", "db", "H105", "mail", "h1.lan", "toolongname", "a.example.org")
QTYPES = ("A", "AAAA", "MX", "ANY")
DESTS = tuple(int.from_bytes(bytes(a), "big") for a in (
    (10, 1, 2, 3), (10, 1, 9, 9), (10, 9, 9, 9), (192, 168, 1, 1), (8, 8, 8, 8), (232, 0, 0, 1)))

ITCH_RULES = """\
stock == "GOOGL" and price > 1000000 : fwd(2)
stock == "AAPL" : fwd(3)
shares > 5000 : fwd(4)
"""
INT_RULES = """\
hop_latency > 5000 : fwd(5)
queue_occupancy > 1000 and switch_id == 7 : fwd(6)
"""
DNS_RULES = """\
name == "h105" : answerDNS(10.0.0.105)
name == "web" : answerDNS(10.0.0.80), fwd(3)
qtype == 255 : drop
"""
ROUTES = """\
10.0.0.0/8 7
10.1.0.0/16 8
10.1.2.0/24 9
192.168.0.0/16 drop
"""


def board(itch: str = ITCH_RULES, int_: str = INT_RULES, dns_: str | None = DNS_RULES,
          routes: str = ROUTES) -> Switchboard:
    """The applications (dns_ None: without DNS, which the native switch does not run)."""
    texts = {"itch": itch, "int": int_, "dns": dns_}
    apps = {}
    for name, text in texts.items():
        if text is None:
            continue
        spec = parse_spec(SPECS[name].read_text(), name=name)
        apps[name] = (spec, parse_rules(text, spec))
    return Switchboard(apps, parse_routes(routes))


# ---- frames --------------------------------------------------------------------------

def add_order(stock: str, price: int, shares: int, side: bytes = b"B", ref: int = 1) -> bytes:
    """An ITCH 5.0 Add Order ('A', 36 bytes)."""
    return (b"A" + struct.pack("!HH", 1, 0) + (1000).to_bytes(6, "big") + struct.pack("!Q", ref)
            + side + struct.pack("!I", shares) + stock.encode().ljust(8) + struct.pack("!I", price))


def system_event(code: bytes = b"O") -> bytes:
    """An ITCH System Event ('S', 12 bytes): not an Add Order, never selected."""
    return b"S" + struct.pack("!HH", 0, 0) + (1000).to_bytes(6, "big") + code


ITCH_FIELDS = (("buy_sell_indicator", 19, 1), ("shares", 20, 4), ("stock", 24, 8),
               ("price", 32, 4))


def itch_values(msg: bytes) -> dict[str, int]:
    return {f"itch_order.{n}": int.from_bytes(msg[o:o + w], "big") for n, o, w in ITCH_FIELDS}


def int_report(switch_id: int, latency: int, occupancy: int, in_port: int = 1,
               out_port: int = 2) -> bytes:
    """INT-MD over UDP as int.p4 lays it out: shim, metadata header, one hop record."""
    shim = struct.pack("!BBH", 0x10, 7, 0)  # INT-MD; 7 words after the shim
    md = struct.pack("!HBBHHHH", 0x2000, 4, 0, 0xF000, 0, 0, 0)  # version 2, hop ML 4
    hop = struct.pack("!IHHI", switch_id, in_port, out_port, latency) + \
        struct.pack("!I", occupancy & 0xFFFFFF)  # queue id 0, 24-bit occupancy
    return shim + md + hop


def int_values(payload: bytes) -> dict[str, int]:
    hop = payload[16:32]
    sid, ip, op, lat, qo = struct.unpack("!IHHII", hop)
    return {"int_hop.switch_id": sid, "int_hop.ingress_port": ip, "int_hop.egress_port": op,
            "int_hop.hop_latency": lat, "int_hop.queue_occupancy": qo & 0xFFFFFF}


def dns_value(name: str) -> int | None:
    """The name field's value (dnspython's wire form, zero-padded to 8 bytes); None: too long."""
    wire = dns.name.from_text(name).to_wire()
    return int.from_bytes(wire.ljust(8, b"\0"), "big") if len(wire) <= 8 else None


def mixed_stream(seed: int, n: int) -> list[tuple[str, bytes]]:
    """`n` frames of the four kinds interleaved: (kind, frame)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.choice(("itch", "int", "dns", "ip"))
        dst = rng.choice(DESTS)
        if kind == "itch":
            msgs = [system_event() if rng.random() < 0.15 else
                    add_order(rng.choice(STOCKS), rng.choice((500, 999999, 1000001, 2500000)),
                              rng.choice((10, 5000, 5001, 90000)), rng.choice((b"B", b"S")), i)
                    for _ in range(rng.randint(1, 4))]
            frame = udp_frame(mold_payload(SESSION, 1000 + 10 * i, msgs), dst_port=ITCH_PORT,
                              dst_ip=dst)
        elif kind == "int":
            frame = udp_frame(int_report(rng.choice((1, 7, 9)), rng.choice((10, 5000, 5001, 90000)),
                                         rng.choice((0, 1000, 1001, 70000))),
                              dst_port=INT_PORT, dst_ip=dst)
        elif kind == "dns":
            q = dns.message.make_query(rng.choice(NAMES), rng.choice(QTYPES),
                                       use_edns=rng.random() < 0.5)
            q.id = i & 0xFFFF
            frame = udp_frame(q.to_wire(), dst_port=DNS_PORT, src_port=33000 + i % 1000,
                              src_ip=0x0A000002, dst_ip=dst)
        else:
            frame = udp_frame(rng.randbytes(rng.randint(0, 40)), dst_port=rng.choice((8080, 443)),
                              dst_ip=dst)
        out.append((kind, frame))
    return out


# ---- the references ------------------------------------------------------------------

def _routed(b: Switchboard, frame: bytes) -> list:
    port = lookup(b.routes, read_udp(frame).dst_ip)
    return [] if port is None else [("route", port, frame)]


def expected(b: Switchboard, kind: str, frame: bytes) -> list:
    """What the references say `frame` gives, as a sorted list of
    ("route", port, frame) | ("copy", port, content) | ("answer", port, (id, address))."""
    if kind not in b.apps:
        return _routed(b, frame)
    rules = b.rules(kind)
    payload = read_udp(frame).payload
    out = []
    if kind == "itch":
        _, seq, blocks = read_mold(payload)
        per_port: dict[int, list] = {}
        for i, m in enumerate(blocks):
            if len(m) >= 36 and m[:1] in (b"A", b"F"):
                for p in evaluate(rules, itch_values(m)):
                    per_port.setdefault(p, []).append((seq + i, m))
        out = [("copy", p, tuple(ms)) for p, ms in per_port.items()]
    elif kind == "int":
        out = [("copy", p, payload) for p in evaluate(rules, int_values(payload))]
    else:
        q = dns.message.from_wire(payload)
        value = dns_value(q.question[0].name.to_text())
        spec = b.spec("dns")
        if value is None:  # no rule can match it: the default action
            got = outcome([], {}, spec.default)
        else:
            got = outcome(rules, {"question.name": value,
                                  "question.qtype": q.question[0].rdtype}, spec.default)
        if got.verdict is not None and got.verdict.name == "drop":
            return []
        out = [("copy", p, payload) for p in got.ports]
        if got.verdict is not None:  # answerDNS(ip)
            a = got.verdict.args[0] if q.question[0].rdtype in (1, 255) else None
            out.append(("answer", IN_PORT, (q.id, a)))
    if not out:  # no message got anything: the frame goes by IPv4 routing
        return _routed(b, frame)
    return sorted(out)


def observed(b: Switchboard, kind: str, frame: bytes, got: list[tuple[int, bytes]]) -> list:
    """The switch's output for `frame`, in `expected`'s form, read as copies and answers
    (a routed frame is compared whole instead: `check`). Rule ports (1..6) and route ports
    (7 and up) are apart, so a frame routed where copies were due cannot pass, nor the
    reverse."""
    out = []
    for port, f in got:
        v = read_udp(f)
        assert v.ip_checksum_ok, (kind, port)
        if kind == "itch":
            _, seq, blocks = read_mold(v.payload)
            out.append(("copy", port, tuple((seq + i, m) for i, m in enumerate(blocks) if m)))
        elif kind == "dns" and port == IN_PORT:
            q = dns.message.from_wire(read_udp(frame).payload)
            r = dns.message.from_wire(v.payload)
            assert q.is_response(r) and (v.src_ip, v.dst_ip) == (read_udp(frame).dst_ip,
                                                                  read_udp(frame).src_ip)
            addrs = [x.address for rr in r.answer for x in rr]
            assert len(addrs) <= 1
            a = int.from_bytes(bytes(int(x) for x in addrs[0].split(".")), "big") \
                if addrs else None
            out.append(("answer", port, (r.id, a)))
        else:
            out.append(("copy", port, v.payload))
    return sorted(out)


def check(b: Switchboard, dp, stream: list[tuple[str, bytes]]) -> dict[str, int]:
    """Run `stream` through data plane `dp` frame by frame, each output against the
    references; the frames of each kind that produced something, by kind."""
    counts: dict[str, int] = {}
    for i, (kind, frame) in enumerate(stream):
        got = dp.process(frame, IN_PORT)
        want = expected(b, kind, frame)
        if want and want[0][0] == "route":
            assert sorted(("route", p, f) for p, f in got) == want, (i, kind)
        else:
            assert observed(b, kind, frame, got) == want, (i, kind)
        counts[kind] = counts.get(kind, 0) + bool(want)
    return counts
