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

from compiler.compile import Compiled, compile_rules
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import Spec, load_spec
from switch.packet import ipv4_address, ipv4_checksum, mold_payload, udp_frame
from tests.compiler.gen import FieldGen, random_filter, random_message, random_spec
from tests.p4.bmv2_harness import PORT_NUMBERS

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
