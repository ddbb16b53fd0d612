"""Random rule sets and frames for the bmv2 differential test, each frame with what
`compiler.semantics` says about it.

Kinds: `itch` (MoldUDP64 packets of 1..`slots` blocks: Add Orders `A`/`F` decided by the
rules, other message types, short and empty blocks; some with IPv4 options, Ethernet
padding, or malformed within the slots), `int` (one INT hop report per packet), `kafka`
(records framed by the broker's own `shim.reframe.packets`, camus fragments of large
records included, and records split into IPv4 fragments, which are plain IP traffic to
both targets), `random` (tests/compiler/gen.py's specs and messages), and in every kind
plain IP traffic (TCP, other UDP ports, payloads too short to be a message) routed by
`ipv4_lpm`. Everything stays inside docs/p4.md's limits (at most `slots` MoldUDP64 blocks,
none longer than 64 bytes). Constants come from a small pool per field and message values
from the same pools and their neighbours (tests/compiler/gen.py), so rules overlap and
messages sit on their boundaries.

Each rule set also gets random `ipv4_lpm` routes (a default route and `drop` included)
and `egress_udp_rewrite` entries, which the compiler does not write but a target holds.
`Probe.want` is the port set the frame must reach: the union of `compiler.semantics.evaluate`
over its subscription messages or, if that is empty, the longest-prefix route, computed
here from the routes (None where the frame is malformed and only the targets' agreement is
checked).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

from compiler.compile import Compiled, compile_rules
from compiler.errors import StateError
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Packet, evaluate
from compiler.spec import Spec, load_spec, parse_spec
from switch.packet import ipv4_address, ipv4_checksum, mold_payload, udp_frame
from tests.compiler.gen import FieldGen, random_filter, random_message, random_spec
# (the stateful language's rule generator, over SINGLE_STATE_SPEC's names; imported here, at
# the top, because importing that test module inside a Hypothesis test nests its @given)
from tests.compiler.test_stateful_properties import random_rule as random_state_rule
from tests.p4.bmv2_harness import PORT_NUMBERS

ROOT = Path(__file__).resolve().parents[2]
SPECS = {"itch": "p4/itch/itch.p4", "int": "p4/int/int.p4", "kafka": "p4/kafka/kafka.p4"}
RULE_PORTS = PORT_NUMBERS[1:]  # every port of the device but the input
DESTINATIONS = [ipv4_address(a) for a in ("10.0.0.2", "10.1.2.3", "10.200.0.9", "232.0.0.1",
                                          "232.1.1.1", "192.168.7.7", "8.8.8.8")]
PREFIXES = [(ipv4_address("10.0.0.0"), 8), (ipv4_address("10.1.0.0"), 16), (ipv4_address("10.1.2.3"), 32),
            (ipv4_address("232.0.0.0"), 8), (ipv4_address("192.168.0.0"), 16), (0, 0)]
STOCKS = [b"GOOGL", b"MSFT", b"AAPL", b"IBM"]


@dataclass(frozen=True)
class Probe:
    frame: bytes
    want: frozenset[int] | None  # None: not checked against the semantics
    what: str  # selected | routed | ip | fragment | edge


@dataclass
class RuleSet:
    kind: str
    spec: Spec
    text: str
    compiled: Compiled
    routes: list[tuple[int, int, int | None]]  # (prefix, length, port or None for drop)
    entries: dict
    gens: list[FieldGen] = field(default_factory=list)

    @property
    def app(self):
        return self.compiled.application

    def route(self, dst: int) -> frozenset[int]:
        best = None
        for prefix, plen, port in self.routes:
            mask = ((1 << plen) - 1) << (32 - plen)
            if dst & mask == prefix & mask and (best is None or plen > best[0]):
                best = (plen, port)
        return frozenset() if best is None or best[1] is None else frozenset({best[1]})


def spec_gens(spec: Spec, rng: random.Random) -> list[FieldGen]:
    """A pool of constants per query field of `spec`: boundaries and random values (ITCH's
    stock and side: the usual symbols)."""
    c = compile_rules(spec, [], static=True)
    gens = []
    for q, f in c.application.fields.items():
        top = (1 << f.width) - 1
        if q == "itch_order.stock":
            pool = {int.from_bytes(s.ljust(8), "big") for s in STOCKS}
        elif q == "itch_order.buy_sell_indicator":
            pool = {ord("B"), ord("S")}
        else:
            pool = {0, 1, top, top - 1}
            while len(pool) < 7:
                pool.add(rng.randint(0, min(top, rng.choice([10, 1000, top]))))
        gens.append(FieldGen(q, f.width, {"exact": "exact", "lpm": "lpm"}.get(f.declared, "range"), sorted(pool)))
    return gens


def extras(rng: random.Random, pipeline) -> tuple[list, list[dict]]:
    """Random routes and UDP port rewrites, as entries.json entries."""
    routes = []
    for prefix, plen in rng.sample(PREFIXES, rng.randint(1, len(PREFIXES))):
        routes.append((prefix, plen, None if rng.random() < 0.1 else rng.choice(RULE_PORTS)))
    entries = []
    for prefix, plen, port in routes:
        e = {"table": pipeline.ipv4_table, "match": {"ipv4.dst_addr": {"lpm": [prefix, plen]}}}
        e.update({"action": "drop", "params": {}} if port is None else {"action": "fwd", "params": {"port": port}})
        entries.append(e)
    for port in rng.sample(RULE_PORTS, rng.randint(0, 3)):
        entries.append({"table": pipeline.egress_table,
                        "match": {"egress_port": {"exact": port}, "egress_rid": {"exact": 0}},
                        "action": "set_udp_port", "params": {"port": rng.choice([7777, 9, 65535, 1234])}})
    return routes, entries


def rule_set(kind: str, rng: random.Random, spec: Spec | None = None, gens: list[FieldGen] | None = None,
             static: bool = True, n_rules: int | None = None) -> RuleSet:
    """Random rules over `kind`'s spec (`random`: `spec` and `gens` from gen.random_spec),
    compiled (static: the pipeline of the spec alone), with routes and rewrites."""
    if spec is None:
        spec = load_spec(SPECS[kind])
    gens = gens or spec_gens(spec, rng)
    n = n_rules if n_rules is not None else rng.choice([1, 2, 3, 5, 8, 12])
    text = random_rules(rng, gens, n)
    c = compile_rules(spec, parse_rules(text, spec), static=static)
    routes, more = extras(rng, c.pipeline)
    entries = dict(c.entries)
    entries["table_entries"] = list(c.entries["table_entries"]) + more
    entries["multicast_groups"] = list(c.entries.get("multicast_groups", []))
    return RuleSet(kind, spec, text, c, routes, entries, gens)


def random_rules(rng: random.Random, gens: list[FieldGen], n: int) -> str:
    """tests/compiler/gen.py's rules, each to 1 to 3 of the device's ports (mostly low ones,
    so that rules share ports)."""
    lines = []
    for _ in range(n):
        pool = RULE_PORTS if rng.random() < 0.3 else RULE_PORTS[:6]
        ports = sorted(rng.sample(pool, rng.randint(1, 3)))
        lines.append(f"{random_filter(rng, gens)} : fwd({', '.join(map(str, ports))})")
    return "\n".join(lines)


def _message(rs: RuleSet, rng: random.Random) -> tuple[bytes, dict[str, int]]:
    """Random message bytes with its query fields set from the pools; and those values."""
    app = rs.app
    nbytes = app.message_bytes
    values = random_message(rng, rs.gens)
    whole = int.from_bytes(rng.randbytes(nbytes), "big")
    for q, f in app.fields.items():
        shift = nbytes * 8 - f.bit_offset - f.width
        whole = whole & ~(((1 << f.width) - 1) << shift) | (values[q] << shift)
    return whole.to_bytes(nbytes, "big"), values


def _selected(rs: RuleSet, ports: set[int], dst: int, what: str = "selected") -> tuple[frozenset[int], str]:
    return (frozenset(ports), what) if ports else (rs.route(dst), "routed")


def _frame(payload: bytes, dport: int, dst: int, rng: random.Random, options: bool = False) -> bytes:
    return udp_frame(payload, dst_port=dport, dst_ip=dst, src_port=rng.randrange(1, 65536),
                     ip_options=rng.choice([b"", b"", b"\x01\x01\x01\x00", b"\x07\x07\x04" + bytes(5)])
                     if options else b"")


def _pad(frame: bytes, rng: random.Random) -> bytes:
    """Sometimes Ethernet padding after the datagram, as a NIC pads short frames to 60 bytes."""
    if rng.random() < 0.1:
        return frame + bytes(max(0, 60 - len(frame)) or rng.randint(1, 8))
    return frame


def single_probe(rs: RuleSet, rng: random.Random) -> Probe:
    """One message (INT, random specs), sometimes with trailing bytes or too short."""
    dst = rng.choice(DESTINATIONS)
    msg, values = _message(rs, rng)
    if rng.random() < 0.08:
        frame = _frame(msg[:rng.randrange(len(msg))], rs.app.udp_port, dst, rng)  # too short: routed
        return Probe(_pad(frame, rng), rs.route(dst), "routed")
    if rng.random() < 0.2:
        msg += rng.randbytes(rng.randint(1, 12))
    want, what = _selected(rs, evaluate(rs.compiled.rules, values), dst)
    return Probe(_pad(_frame(msg, rs.app.udp_port, dst, rng, options=True), rng), want, what)


def _block(rs: RuleSet, rng: random.Random) -> tuple[bytes, dict | None]:
    roll = rng.random()
    if roll < 0.65:
        msg, values = _message(rs, rng)
        if rng.random() < 0.3:
            return b"F" + msg[1:] + b"MPID", values  # Add Order with MPID, 40 bytes
        return b"A" + msg[1:], values
    return rng.choice([b"S" + bytes(11), b"E" + rng.randbytes(30), b"", b"A" + bytes(19),
                       b"X" * 64, b"F" + rng.randbytes(34)]), None  # never a subscription message


def itch_probe(rs: RuleSet, rng: random.Random, slots: int) -> Probe:
    dst = rng.choice(DESTINATIONS)
    blocks, ports = [], set()
    for _ in range(rng.randint(1, slots)):
        b, values = _block(rs, rng)
        blocks.append(b)
        if values is not None:
            ports |= evaluate(rs.compiled.rules, values)
    payload = mold_payload(b"SESSION001", rng.choice([0, 7, rng.randrange(1 << 64), (1 << 64) - 1]), blocks)
    edge = rng.random()
    if edge < 0.04:  # a block runs past the payload: dropped
        return Probe(_frame(payload[:-rng.randint(1, 3)], 1234, dst, rng), None, "edge")
    if edge < 0.07 and len(blocks) < slots:  # the count names a block that is not there: dropped
        payload = payload[:18] + struct.pack("!H", len(blocks) + 1) + payload[20:]
        return Probe(_frame(payload, 1234, dst, rng), None, "edge")
    if edge < 0.1:  # heartbeat or end of session: nothing to select, routed
        payload = mold_payload(b"SESSION001", 5, [], count=rng.choice([0, 0xFFFF]))
        return Probe(_frame(payload, 1234, dst, rng), rs.route(dst), "routed")
    if edge < 0.13:
        payload += rng.randbytes(rng.randint(1, 30))  # bytes after the blocks
    want, what = _selected(rs, ports, dst)
    return Probe(_pad(_frame(payload, 1234, dst, rng, options=True), rng), want, what)


def kafka_probes(rs: RuleSet, rng: random.Random) -> list[Probe]:
    """One record as the broker frames it (camus fragments when large), or as IPv4 fragments."""
    from shim.reframe import Addressing, Record, packets

    dst = rng.choice(DESTINATIONS)
    _, values = _message(rs, rng)
    slots = [values[f"kafka.slot{i}"] for i in range(8)]
    size = rng.choice([0, 10, 100, 1000, 3000])
    record = Record(rng.randrange(1 << 40), rng.randbytes(rng.randint(0, 8)) or None, rng.randbytes(size))
    addr = Addressing(dst_ip=dst.to_bytes(4, "big"), src_port=rng.randrange(1, 65536))
    frames = packets(values["kafka.topic_id"], values["kafka.partition"], rng.randrange(1 << 63), slots, record,
                     addr, fragment=rng.choice([500, 1400]))
    if rng.random() < 0.25:  # IPv4 fragments of the record's first packet: routed
        return [Probe(f, rs.route(dst), "fragment") for f in ip_fragments(frames[0], rng)]
    want, what = _selected(rs, evaluate(rs.compiled.rules, values), dst)
    return [Probe(f, want, what) for f in frames]


def ip_fragments(frame: bytes, rng: random.Random) -> list[bytes]:
    """`frame`'s IPv4 datagram split into 2 to 4 fragments (8-byte multiples, DF cleared)."""
    ihl = (frame[14] & 0x0F) * 4
    header, data = bytearray(frame[14:14 + ihl]), frame[14 + ihl:]
    pieces = rng.randint(2, 4)
    size = 8 * -(-len(data) // (8 * pieces))
    out = []
    for off in range(0, len(data), size):
        chunk = data[off:off + size]
        h = bytearray(header)
        more = off + size < len(data)
        struct.pack_into("!H", h, 2, ihl + len(chunk))
        struct.pack_into("!H", h, 6, (0x2000 if more else 0) | (off // 8))
        struct.pack_into("!H", h, 10, 0)
        struct.pack_into("!H", h, 10, ipv4_checksum(bytes(h)))
        out.append(frame[:14] + bytes(h) + chunk)
    return out


def ip_probe(rs: RuleSet, rng: random.Random) -> Probe:
    """Plain IP traffic: TCP, or UDP to a port no application owns."""
    dst = rng.choice(DESTINATIONS)
    payload = rng.randbytes(rng.choice([0, 1, 20, 200]))
    frame = _frame(payload, rng.choice([53, 4444, 1235]), dst, rng, options=True)
    if rng.random() < 0.5:  # TCP: protocol 6, same bytes after the IPv4 header
        ip = bytearray(frame[14:14 + (frame[14] & 0x0F) * 4])
        ip[9] = 6
        struct.pack_into("!H", ip, 10, 0)
        struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
        frame = frame[:14] + bytes(ip) + frame[14 + len(ip):]
    return Probe(_pad(frame, rng), rs.route(dst), "ip")


def probes(rs: RuleSet, rng: random.Random, n: int, slots: int = 8) -> list[Probe]:
    """About `n` frames for `rs` (a Kafka record may take several), 15 % plain IP."""
    out: list[Probe] = []
    while len(out) < n:
        if rng.random() < 0.15:
            out.append(ip_probe(rs, rng))
        elif rs.kind == "itch":
            out.append(itch_probe(rs, rng, slots))
        elif rs.kind == "kafka":
            out.extend(kafka_probes(rs, rng))
        else:
            out.append(single_probe(rs, rng))
    return out


def random_spec_case(rng: random.Random):
    """A random spec (tests/compiler/gen.py) and its generators."""
    return random_spec(rng)


# ---- state (IR 4): random stateful specs, rules and timed frames -------------------------
#
# The time of a message is a field of it (`query_timestamp`), so bmv2's real-time clock does
# not matter and every target sees the same times; `untimed` cases use the device clock
# instead, with windows so long (2^40 µs, about 12 days) that every message falls in window
# 0, which is what the references compute at time 0. Frames go through every target in the
# order they are generated, one Evaluator following them message by message.

ITCH_STATE_RULE_PORTS = RULE_PORTS[:6]
STATE_PRICES = [10, 30, 50, 51, 70, 200]
LONG_WINDOW = 1 << 40


@dataclass
class StateCase:
    """A stateful rule set: its spec text (for the failure message), the compiled rules, the
    Evaluator that gives every frame's port set in order, and what the frames are made of."""

    kind: str  # "itch" | "single"
    rs: RuleSet
    spec_text: str
    timed: bool
    evaluator: object
    ts_us: int = 0  # the current time the next frame starts from


def _itch_state_spec(rng: random.Random, timed: bool) -> tuple[str, str]:
    """The ITCH spec with a counter, an average (maybe keyed) and a meter; the time field's
    unit ("" untimed)."""
    base = (ROOT / SPECS["itch"]).read_text()
    w = (lambda *choices: LONG_WINDOW) if not timed else (lambda *choices: rng.choice(choices))
    keyed = rng.random() < 0.5
    unit = rng.choice(["ns", "us"]) if timed else ""
    lines = [f"@pragma query_counter(my_counter, {w(50, 100, 1000)}, 64)",
             f"@pragma query_average(itch_order.price, {w(100, 1000)}, 64"
             + (", itch_order.stock_locate, 4)" if keyed else ")")]
    if timed:  # a meter's threshold over a 12-day window is never reached by a few frames
        lines.append(f"@pragma query_meter(orders, {rng.choice(['packets', 'bytes'])}, {w(200, 500)}, 64)")
    lines.append(f"@pragma query_banks({rng.randint(1, 4)})")
    if timed:
        lines.append(f"@pragma query_timestamp(itch_order.timestamp, {unit})")
    return base + "\n" + "\n".join(lines) + "\n", unit


def _itch_state_filter(rng: random.Random, spec_text: str, depth: int = 0) -> str:
    r = rng.random()
    if depth < 2 and r < 0.25:
        parts = [_itch_state_filter(rng, spec_text, depth + 1) for _ in range(2)]
        return "(" + f" {rng.choice(['and', 'or'])} ".join(parts) + ")"
    if depth < 2 and r < 0.32:
        return "not " + _itch_state_filter(rng, spec_text, depth + 1)
    op = rng.choice(["==", "!=", "<", "<=", ">", ">="])
    atoms = [f'stock {rng.choice(["==", "!="])} "{rng.choice(STOCKS).decode()}"',
             f"price {op} {rng.choice(STATE_PRICES)}", f"shares {op} {rng.choice([100, 600])}",
             f"my_counter {op} {rng.randint(0, 5)}", f"avg(price) {op} {rng.choice(STATE_PRICES)}"]
    if "query_meter(orders, packets" in spec_text:
        window = int(spec_text.split("query_meter(orders, packets, ")[1].split(",")[0])
        atoms.append(f"rate(orders) {op} {rng.randint(0, 5) * 1_000_000 // window}")
    elif "query_meter(orders, bytes" in spec_text:
        window = int(spec_text.split("query_meter(orders, bytes, ")[1].split(",")[0])
        atoms.append(f"rate(orders) {op} {rng.choice([0, 36, 40, 76, 120, 200]) * 1_000_000 // window}")
    return rng.choice(atoms)


def _itch_state_rules(rng: random.Random, spec_text: str, n: int) -> str:
    updates = ["count(my_counter)", "avg(price)"] + (["meter(orders)"] if "query_meter" in spec_text else [])
    lines = []
    for _ in range(n):
        actions = [f"fwd({', '.join(map(str, sorted(rng.sample(ITCH_STATE_RULE_PORTS, rng.randint(1, 2)))))})"]
        if rng.random() < 0.3:
            actions += rng.sample(updates, rng.randint(1, 2))
        rng.shuffle(actions)
        lines.append(f"{_itch_state_filter(rng, spec_text)} : {', '.join(actions)}")
    return "\n".join(lines)


SINGLE_STATE_SPEC = """\
header m { bit<8> k; bit<8> a; bit<16> b; bit<32> t; }
@pragma udp_port(4321)
@pragma query_field_exact(m.k)
@pragma query_field(m.a)
@pragma query_field(m.b)
@pragma query_counter(c, 10, 64)
@pragma query_counter(ck, 7, 64, m.k, 4)
@pragma query_average(m.a, 20, 64)
@pragma query_meter(mp, packets, 50, 64, m.k, 2)
@pragma query_meter(mb, bytes, 30, 64)
"""


def state_case(kind: str, rng: random.Random, timed: bool = True, n_rules: int | None = None) -> StateCase:
    """A random stateful rule set the compiler accepts (redrawn while the machine model
    refuses it: banks, combinations), with routes and rewrites as `rule_set`'s."""
    while True:
        if kind == "itch":
            spec_text, _ = _itch_state_spec(rng, timed)
            spec = parse_spec(spec_text, name="itch")
            text = _itch_state_rules(rng, spec_text, n_rules or rng.choice([1, 2, 3, 5]))
        else:
            unit = rng.choice(["us", "ms", "ns"])
            spec_text = SINGLE_STATE_SPEC + f"@pragma query_banks({rng.randint(1, 3)})\n" \
                + f"@pragma query_timestamp(m.t, {unit})\n"
            spec = parse_spec(spec_text, name="st")
            text = "\n".join(random_state_rule(rng) for _ in range(n_rules or rng.choice([1, 2, 3, 5])))
        rules = parse_rules(text, spec)
        try:
            c = compile_rules(spec, rules, static=rng.random() < 0.5)
        except StateError:
            continue
        routes, more = extras(rng, c.pipeline)
        entries = {**c.entries, "table_entries": list(c.entries["table_entries"]) + more,
                   "multicast_groups": list(c.entries.get("multicast_groups", []))}
        rs = RuleSet(kind, spec, text, c, routes, entries)
        return StateCase(kind, rs, spec_text, timed, Evaluator(rules), rng.randint(0, 2000))


def _itch_state_message(case: StateCase, rng: random.Random, ts_us: int) -> bytes:
    unit = "ns" if "timestamp, ns" in case.spec_text else "us"
    stamp = max(0, ts_us * 1000 + rng.randint(-300_000, 300_000)) if unit == "ns" else ts_us
    return (rng.choice([b"A", b"F"]) + struct.pack("!HH", rng.randint(0, 7), rng.randrange(1 << 16))
            + (stamp & ((1 << 48) - 1)).to_bytes(6, "big") + struct.pack("!Q", rng.randrange(1 << 64))
            + rng.choice([b"B", b"S"]) + struct.pack("!I", rng.choice([100, 600]))
            + rng.choice(STOCKS).ljust(8) + struct.pack("!I", rng.choice(STATE_PRICES)))


def _itch_values(msg: bytes) -> dict[str, int]:
    fields = [("message_type", 0, 8), ("stock_locate", 8, 16), ("tracking_number", 24, 16),
              ("timestamp", 40, 48), ("order_ref", 88, 64), ("buy_sell_indicator", 152, 8),
              ("shares", 160, 32), ("stock", 192, 64), ("price", 256, 32)]
    whole = int.from_bytes(msg[:36], "big")
    return {f"itch_order.{n}": whole >> (288 - o - w) & ((1 << w) - 1) for n, o, w in fields}


def state_probes(case: StateCase, rng: random.Random, n: int, slots: int = 8) -> list[tuple[Probe, int]]:
    """`n` frames in time order (times step forward, sometimes back), each with the time the
    references give it (the device's clock is not used: timed cases carry their time in the
    messages, untimed ones sit in window 0). `Probe.want` from the case's Evaluator, which
    sees every subscription message of every frame in order."""
    rs, out = case.rs, []
    for _ in range(n):
        case.ts_us = max(0, case.ts_us + rng.choice([0, 0, 1, 3, 7, 10, 25, 40, 60, 99, 100, 250, 1000, -15, -120]))
        dst = rng.choice(DESTINATIONS)
        if rng.random() < 0.1:
            out.append((ip_probe(rs, rng), 0))
            continue
        ports: set[int] = set()
        when = case.ts_us if case.timed else 0
        if case.kind == "itch":
            blocks = []
            for _ in range(rng.randint(1, slots)):
                if rng.random() < 0.8:
                    msg = _itch_state_message(case, rng, case.ts_us)
                    if msg[:1] == b"F":
                        msg += b"MPID"
                    ports |= case.evaluator.packet(Packet(when, _itch_values(msg), len(msg)))
                else:
                    msg = rng.choice([b"S" + bytes(11), b"E" + rng.randbytes(30), b""])
                blocks.append(msg)
            payload = mold_payload(b"SESSION001", rng.randrange(1 << 32), blocks)
            frame = _frame(payload, 1234, dst, rng, options=rng.random() < 0.2)
        else:
            values = {"m.k": rng.choice([0, 1, 2, 4, 5, 6]), "m.a": rng.choice([0, 1, 2, 3, 255]),
                      "m.b": rng.choice([0, 1, 7, 65535])}
            unit = case.spec_text.split("query_timestamp(m.t, ")[1][:2]
            values["m.t"] = {"us": case.ts_us, "ms": case.ts_us // 1000, "ns": case.ts_us * 1000 + rng.randint(0, 999)}[unit] & 0xFFFFFFFF
            msg = bytes([values["m.k"], values["m.a"]]) + struct.pack("!HI", values["m.b"], values["m.t"])
            if rng.random() < 0.2:
                msg += rng.randbytes(rng.randint(1, 12))  # a longer payload: bytes meters count it
            ports |= case.evaluator.packet(Packet(when, values, len(msg)))
            frame = _frame(msg, rs.app.udp_port, dst, rng, options=rng.random() < 0.2)
        want, what = _selected(rs, ports, dst)
        out.append((Probe(_pad(frame, rng), want, what), when))
    return out
