"""An outside judge for camus: its own rule generator, evaluator and frame model.

Nothing here imports the compiler or the switch. It generates rule *texts* from an AST of its
own, evaluates that AST directly (the action set of a message is the union of the ports of
every rule whose filter holds), and asks only the product's public interfaces for an answer:
`camus compile SPEC RULES --out DIR`, `camus eval --pipeline DIR` (JSON lines in, port lists
out) and `camus switch run` (pcap in, one pcap per port out) with both implementations.
The frames the switch should emit are built here from docs/pipeline-ir.md, byte for byte.

The field layouts of the product's specs (p4/itch, p4/int, p4/kafka) are written out below by
hand rather than parsed, so a bug in the spec reader cannot hide here either.

Run a larger campaign by hand:  python3 -m tests.compiler.outside --runs 300 [--seed N] [--subprocess]
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import random
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = {"and", "or", "not", "in", "true", "false", "fwd"}
MAX_PORT = 511
MAX_FRAME = 9216


# ---------------------------------------------------------------- specs (written out by hand)


@dataclass(frozen=True)
class F:
    qname: str
    width: int
    kind: str  # range | exact | lpm
    ascii: bool
    offset: int  # bit offset from the first byte of a message

    @property
    def bare(self) -> str:
        return self.qname.split(".", 1)[1]

    @property
    def top(self) -> int:
        return (1 << self.width) - 1

    @property
    def default(self) -> int:
        if self.ascii and self.width % 8 == 0:
            return int.from_bytes(b" " * (self.width // 8), "big")
        return 0


@dataclass
class App:
    name: str
    text: str
    fields: list[F]  # query fields
    message_bytes: int
    udp_port: int
    framing: str  # single | moldudp64
    type_field: tuple[int, int] | None = None  # (bit offset, width)
    types: tuple[int, ...] = ()
    type_qname: str | None = None
    unique: set[str] = field(default_factory=set)  # bare names usable alone

    def __post_init__(self):
        counts: dict[str, int] = {}
        for f in self.fields:
            counts[f.bare] = counts.get(f.bare, 0) + 1
        self.unique = {b for b, n in counts.items() if n == 1 and b not in KEYWORDS}


def _itch() -> App:
    fs = [F("itch_order.stock", 64, "exact", True, 192), F("itch_order.price", 32, "range", False, 256),
          F("itch_order.shares", 32, "range", False, 160),
          F("itch_order.buy_sell_indicator", 8, "exact", True, 152)]
    return App("itch", (ROOT / "p4/itch/itch.p4").read_text(), fs, 36, 1234, "moldudp64", (0, 8),
               (0x41, 0x46), "itch_order.message_type")


def _int() -> App:
    fs = [F("int_hop.switch_id", 32, "exact", False, 128), F("int_hop.hop_latency", 32, "range", False, 192),
          F("int_hop.queue_occupancy", 24, "range", False, 232),
          F("int_hop.ingress_port", 16, "range", False, 160), F("int_hop.egress_port", 16, "range", False, 176)]
    return App("int", (ROOT / "p4/int/int.p4").read_text(), fs, 32, 1337, "single")


def _kafka() -> App:
    fs = [F("kafka.topic_id", 32, "exact", False, 0), F("kafka.partition", 32, "range", False, 32)]
    fs += [F(f"kafka.slot{i}", 64, "range", False, 192 + 64 * i) for i in range(8)]
    return App("kafka", (ROOT / "p4/kafka/kafka.p4").read_text(), fs, 104, 9094, "single")


PRODUCT_APPS = {"itch": _itch, "int": _int, "kafka": _kafka}

_NAMES = ["a", "b", "price", "qty", "dst", "src", "tag", "sym", "x1", "Val", "flags", "not", "in", "fwd"]


def custom_app(rng: random.Random) -> App:
    """A small random spec: 1-4 query fields of 8/16/32/64 bits (now and then odd widths),
    every match kind, ascii fields, filler fields, a field name shared by two headers, single
    or MoldUDP64 framing, and now and then a message type field (itself maybe a query field)."""
    headers: list[tuple[str, list[tuple[str, int]]]] = []
    qfields: list[F] = []
    annotations: list[str] = []
    offset = 0
    n_headers = rng.choice((1, 1, 2))
    used_names: set[str] = set()
    type_field = type_q = None
    types: tuple[int, ...] = ()
    for h in range(n_headers):
        hname = ("m", "n")[h]
        hf: list[tuple[str, int]] = []
        if h == 0 and rng.random() < 0.3:
            tw = rng.choice((8, 8, 16, 4))
            if tw == 4 or rng.random() < 0.3:  # not the first field, or not byte-aligned
                lead = 4 if tw == 4 else 8
                hf.append(("lead", lead))
                offset += lead
            hf.append(("kind", tw))
            type_field = (offset, tw)
            types = tuple(sorted(rng.sample(range(1 << tw), rng.randint(1, 3))))
            annotations.append(f"@pragma message_type(m.kind, {', '.join(hex(t) for t in types)})")
            if rng.random() < 0.5:
                qfields.append(F("m.kind", tw, rng.choice(("range", "exact")), False, offset))
                annotations.append(("@pragma query_field(m.kind)" if qfields[-1].kind == "range"
                                    else "@query_field_exact(m.kind)"))
            type_q = "m.kind"
            offset += tw
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.15:  # odd widths that still add up to whole bytes
                widths = rng.choice(((4, 4), (1, 7), (3, 5), (12, 4), (4, 64, 4), (3, 32, 5),
                                     (7, 16, 1), (1, 1, 6), (2, 62), (5, 59), (63, 1)))
            else:
                widths = (rng.choice((8, 16, 32, 64, 32, 64)),)
            for w in widths:
                if h == 1 and used_names and rng.random() < 0.5:
                    name = rng.choice(sorted(used_names))
                else:
                    name = rng.choice([n for n in _NAMES if n not in {x for x, _ in hf}] or ["z"])
                if name in {x for x, _ in hf}:
                    name = name + str(len(hf))
                hf.append((name, w))
                used_names.add(name)
                q = f"{hname}.{name}"
                if rng.random() < 0.8:
                    kind = rng.choice(("range", "range", "exact", "lpm"))
                    asc = w % 8 == 0 and kind != "lpm" and rng.random() < 0.3
                    qfields.append(F(q, w, kind, asc, offset))
                    spelling = rng.choice(("@pragma ", "@", "#pragma "))
                    ann = {"range": "query_field", "exact": "query_field_exact", "lpm": "query_field_lpm"}[kind]
                    annotations.append(f"{spelling}{ann}({q})")
                    if asc:
                        annotations.append(f"@pragma ascii({q})")
                offset += w
            if rng.random() < 0.3:
                pw = rng.choice((8, 8, 24, 80, 128))  # filler, maybe wider than any query field
                hf.append((f"pad{len(hf)}", pw))
                offset += pw
        headers.append((hname, hf))
    if not qfields:  # at least one query field: one more, at the end
        hname, hf = headers[-1]
        hf.append(("last", 16))
        qfields.append(F(f"{hname}.last", 16, "range", False, offset))
        annotations.append(f"@pragma query_field({hname}.last)")
        offset += 16
    framing = rng.choice(("single", "single", "moldudp64"))
    udp_port = rng.choice((1234, 4000, 65535, 1))
    lines = []
    if framing == "moldudp64":
        lines.append("header mold { bit<80> session; bit<64> sequence_number; bit<16> message_count; }")
        annotations.append("@pragma framing(moldudp64, mold)")
    for hname, hf in headers:
        lines.append(f"header {hname} {{\n" + "".join(f"    bit<{w}> {n};\n" for n, w in hf) + "}")
    annotations.append(f"@pragma udp_port({udp_port})")
    rng.shuffle(annotations)
    text = "// a custom spec\n" + "\n".join(lines) + "\n" + "\n".join(annotations) + "\n"
    return App("custom", text, qfields, offset // 8, udp_port, framing, type_field, types, type_q)


# ---------------------------------------------------------------- the rule AST and its evaluator
#
# ("atom", F, op, value, plen)  value an int; plen None or a prefix length (op == or !=)
# ("in", F, [values], negated)
# ("and", [items]) ("or", [items]) ("not", item) ("const", bool)


def holds(node, msg: dict[str, int]) -> bool:
    kind = node[0]
    if kind == "atom":
        _, f, op, c, plen = node
        v = msg[f.qname]
        if plen is not None:
            s = f.width - plen
            same = (v >> s) == (c >> s)
            return same if op == "==" else not same
        return {"==": v == c, "!=": v != c, "<": v < c, "<=": v <= c, ">": v > c, ">=": v >= c}[op]
    if kind == "in":
        _, f, values, negated = node
        return (msg[node[1].qname] in values) != negated
    if kind == "and":
        return all(holds(i, msg) for i in node[1])
    if kind == "or":
        return any(holds(i, msg) for i in node[1])
    if kind == "not":
        return not holds(node[1], msg)
    if kind == "const":
        return node[1]
    raise ValueError(node)


def ports_of(rules, msg: dict[str, int]) -> list[int]:
    out: set[int] = set()
    for filt, ports in rules:
        if holds(filt, msg):
            out |= set(ports)
    return sorted(out)


# ---------------------------------------------------------------- generating rules


STRING_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 #;.,:()!{}'-_+=*/<>"


def _ascii_int(f: F, s: str) -> int:
    n = f.width // 8
    return int.from_bytes(s.encode().ljust(n, b" "), "big")


@dataclass
class FieldPool:
    f: F
    ints: list[int]
    strings: list[str]  # for whole-byte fields: text constants (as written in rules)


def pools(app: App, rng: random.Random) -> dict[str, FieldPool]:
    out = {}
    for f in app.fields:
        top = f.top
        ints = {0, min(1, top), max(top - 1, 0), top, rng.randint(0, top), rng.randint(0, top)}
        if f.width == 64:
            ints |= {1 << 63, (1 << 63) - 1, (1 << 63) + 1}
        if f.width >= 16:
            ints |= {rng.randint(0, 1000), 255, 256}
        strings: list[str] = []
        if f.width % 8 == 0:
            n = f.width // 8
            cand = ["", "A" * n, "a", "A", "B", " A", "A B"[:n], "ab"[:n], "AB"[:n], "Ab"[:n],
                    "".join(rng.choice(STRING_CHARS) for _ in range(rng.randint(1, n))),
                    "GOOGL"[:n], "goog"[:n], "Z" * n]
            if n >= 3:
                cand += ["A  ", "X Y"]
            strings = sorted({s for s in cand if len(s) <= n})
        out[f.qname] = FieldPool(f, sorted(i for i in ints if 0 <= i <= top), strings)
    return out


class RuleGen:
    """Random filters over an App, rendered to text in many equivalent spellings."""

    def __init__(self, app: App, rng: random.Random, empty_sets: bool = True):
        self.app, self.rng = app, rng
        self.pools = pools(app, rng)
        self.empty_sets = empty_sets

    # ---- AST

    def constant(self, f: F) -> tuple[int, str]:
        """(value, how to write it)"""
        rng, pool = self.rng, self.pools[f.qname]
        if pool.strings and (f.ascii or rng.random() < 0.15) and rng.random() < 0.8:
            s = rng.choice(pool.strings)
            return _ascii_int(f, s), self.write_string(s)
        v = rng.choice(pool.ints)
        return v, self.write_int(f, v)

    def write_string(self, s: str) -> str:
        rng = self.rng
        ident = s and (s[0].isalpha() or s[0] == "_") and all(c.isalnum() or c == "_" for c in s) \
            and s not in KEYWORDS
        if ident and rng.random() < 0.4 and s not in self.app.unique:
            return s
        if '"' not in s and (rng.random() < 0.7 or "'" in s):
            return f'"{s}"'
        return f"'{s}'"

    def write_int(self, f: F, v: int) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.2:
            return hex(v) if rng.random() < 0.5 else "0X" + format(v, "X")
        if r < 0.25:
            return "0" * rng.randint(1, 3) + str(v)
        if r < 0.35 and f.width == 32:
            return ".".join(str((v >> s) & 255) for s in (24, 16, 8, 0))
        return str(v)

    def atom(self):
        rng = self.rng
        f = rng.choice(self.app.fields)
        if rng.random() < 0.15:
            values = []
            texts = []
            for _ in range(rng.randint(0 if self.empty_sets else 1, 4)):
                v, t = self.constant(f)
                values.append(v)
                texts.append(t)
            neg = rng.random() < 0.4
            return ("in", f, values, neg), (f, texts, neg)
        ops = ["==", "!="] if f.kind in ("exact", "lpm") else ["==", "!=", "<", "<=", ">", ">="]
        op = rng.choice(ops)
        if op in ("==", "!=") and f.kind != "exact" and rng.random() < (0.6 if f.kind == "lpm" else 0.15):
            plen = rng.choice([0, 1, f.width // 2, f.width - 1, f.width, rng.randint(0, f.width)])
            v = rng.choice(self.pools[f.qname].ints)
            text = (".".join(str((v >> s) & 255) for s in (24, 16, 8, 0)) if f.width == 32 and rng.random() < 0.6
                    else (hex(v) if rng.random() < 0.3 else str(v))) + f"/{plen}"
            return ("atom", f, op, v, plen), (f, op, text)
        if f.kind == "exact" and op in ("==", "!=") and rng.random() < 0.05:
            v = rng.choice(self.pools[f.qname].ints)
            return ("atom", f, op, v, f.width), (f, op, f"{v}/{f.width}")
        v, text = self.constant(f)
        return ("atom", f, op, v, None), (f, op, text)

    def filter(self, depth: int = 0):
        rng = self.rng
        r = rng.random()
        if depth > 3 or r < 0.35:
            if rng.random() < 0.05:
                b = rng.random() < 0.5
                return ("const", b), ("const", b)
            node, how = self.atom()
            return node, ("leaf", how)
        if r < 0.6:
            kids = [self.filter(depth + 1) for _ in range(rng.randint(2, 3))]
            return ("and", [k[0] for k in kids]), ("and", [k[1] for k in kids])
        if r < 0.85:
            kids = [self.filter(depth + 1) for _ in range(rng.randint(2, 3))]
            return ("or", [k[0] for k in kids]), ("or", [k[1] for k in kids])
        k = self.filter(depth + 1)
        return ("not", k[0]), ("not", k[1])

    # ---- text

    def name(self, f: F) -> str:
        if f.bare in self.app.unique and self.rng.random() < 0.5:
            return f.bare
        return f.qname

    def render(self, how) -> str:
        rng = self.rng
        kind = how[0]
        if kind == "const":
            return "true" if how[1] else "false"
        if kind == "leaf":
            inner = how[1]
            if len(inner) == 3 and isinstance(inner[1], str):  # comparison
                f, op, text = inner
                op_text = "=" if op == "==" and rng.random() < 0.15 else op
                bare_word = text[0].isalpha() and "." not in text and text[:2].lower() != "0x"
                if rng.random() < 0.2 and not bare_word:
                    flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
                    flip = "=" if flip == "==" and op_text == "=" else flip
                    return f"{text} {flip} {self.name(f)}"
                sp = rng.choice((" ", "", "\t", "  "))
                return f"{self.name(f)}{sp}{op_text}{sp}{text}"
            f, texts, neg = inner
            body = "{" + rng.choice((", ", ",")).join(texts) + "}"
            if neg and rng.random() < 0.3:
                return f"not {self.name(f)} in {body}"
            return f"{self.name(f)} {'not in' if neg else 'in'} {body}"
        if kind == "not":
            inner = self.render(how[1])
            if how[1][0] in ("and", "or") or rng.random() < 0.3:
                inner = f"({inner})"
            return f"not {inner}"
        parts = []
        for k in how[1]:
            t = self.render(k)
            if (kind == "and" and k[0] == "or") or rng.random() < 0.15:
                t = f"({t})"
            parts.append(t)
        sep = rng.choice((" and ", "  and\t")) if kind == "and" else rng.choice((" or ", "\tor  "))
        text = sep.join(parts)
        if rng.random() < 0.05:
            d = rng.randint(1, 6)
            text = "(" * d + text + ")" * d
        return text

    def ports(self) -> list[int]:
        rng = self.rng
        r = rng.random()
        if r < 0.02:
            return list(range(1, MAX_PORT + 1))
        if r < 0.05:
            return sorted(rng.sample(range(1, MAX_PORT + 1), rng.randint(20, 200)))
        return sorted(rng.sample([1, 2, 3, 4, 5, 6, 7, 8, 255, 256, 510, 511], rng.randint(1, 3)))

    def rules(self, n: int) -> tuple[list, str]:
        """(rules as (AST, ports), the rules file text)"""
        rng = self.rng
        rules, texts = [], []
        for _ in range(n):
            r = rng.random()
            if rules and r < 0.1:  # the same rule again, or its filter with other ports
                filt, how, ports = rng.choice(rules)
                if rng.random() < 0.5:
                    ports = self.ports()
            else:
                filt, how = self.filter()
                ports = self.ports()
            rules.append((filt, how, ports))
        for filt, how, ports in rules:
            pt = rng.choice((", ", ",", " , ")).join(hex(p) if rng.random() < 0.05 else str(p) for p in ports)
            texts.append(f"{self.render(how)}{rng.choice((' : ', ':', ' :'))}fwd({pt})")
        return [(f, p) for f, _, p in rules], self.join(texts)

    def join(self, texts: list[str]) -> str:
        rng = self.rng
        eol = rng.choice(("\n", "\r\n", "\n"))
        out = []
        if rng.random() < 0.3:
            out.append("# rules — ünïcødé comment ☃")
        i = 0
        while i < len(texts):
            if rng.random() < 0.2 and i + 1 < len(texts):
                out.append(texts[i] + rng.choice(("; ", ";", " ;\t")) + texts[i + 1])
                i += 2
                continue
            line = texts[i]
            if rng.random() < 0.15:
                line = "\t" + line
            if rng.random() < 0.15:
                line += "  # trailing comment ; with \"quotes\" é"
            if rng.random() < 0.1:
                line += ";"
            out.append(line)
            if rng.random() < 0.1:
                out.append(rng.choice(("", "   ", "# comment", "\t")))
            i += 1
        return eol.join(out) + (eol if rng.random() < 0.7 else "")

    # ---- messages

    def message(self) -> dict[str, int]:
        rng = self.rng
        msg = {}
        for f in self.app.fields:
            pool = self.pools[f.qname]
            r = rng.random()
            if pool.strings and r < (0.5 if f.ascii else 0.1):
                s = rng.choice(pool.strings)
                if rng.random() < 0.3:
                    s = s.swapcase()
                msg[f.qname] = _ascii_int(f, s)
            elif r < 0.85:
                v = rng.choice(pool.ints) + rng.choice((-1, 0, 0, 1))
                msg[f.qname] = min(max(v, 0), f.top)
            else:
                msg[f.qname] = rng.randint(0, f.top)
        return msg


# ---------------------------------------------------------------- JSON messages for camus eval


def json_message(app: App, msg: dict[str, int], rng: random.Random) -> dict:
    """A JSON object for `camus eval` meaning `msg` (a field equal to its default may be left out)."""
    out = {}
    for f in app.fields:
        v = msg[f.qname]
        if v == f.default and rng.random() < 0.3:
            continue  # left out: the default
        key = f.bare if f.bare in app.unique and rng.random() < 0.5 else f.qname
        if f.ascii and rng.random() < 0.7:
            raw = v.to_bytes(f.width // 8, "big")
            text = raw.rstrip(b" ")
            if all(32 <= c < 127 for c in text):
                out[key] = text.decode() + (" " * rng.randint(0, len(raw) - len(text)))
                continue
        out[key] = v
    return out


# ---------------------------------------------------------------- frames (docs/pipeline-ir.md)


def _csum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ip_udp_frame(payload: bytes, dport: int, options: bytes = b"", sport: int = 5000,
                 dst_ip: int = 0xE0000101, extra_after_udp: bytes = b"", pad: bytes = b"") -> bytes:
    ihl = 5 + len(options) // 4
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0xBEEF) + payload + extra_after_udp
    ip = bytearray(struct.pack("!BBHHHBBHII", 0x40 | ihl, 0, ihl * 4 + len(udp), 7, 0x4000, 64, 17, 0,
                               0x0A000002, dst_ip) + options)
    struct.pack_into("!H", ip, 10, _csum(bytes(ip)))
    return b"\x01\x00\x5e\x00\x01\x01\x02\x00\x00\x00\x00\x02\x08\x00" + bytes(ip) + udp + pad


def expected_copy(frame: bytes, payload: bytes) -> bytes:
    """The frame rebuilt around a new UDP payload: lengths and IPv4 checksum fixed, UDP
    checksum 0, Ethernet padding dropped, destination port unchanged (no egress entries)."""
    ihl = (frame[14] & 15) * 4
    ip = bytearray(frame[14:14 + ihl])
    struct.pack_into("!H", ip, 2, ihl + 8 + len(payload))
    struct.pack_into("!H", ip, 10, 0)
    struct.pack_into("!H", ip, 10, _csum(bytes(ip)))
    l4 = 14 + ihl
    udp = frame[l4:l4 + 4] + struct.pack("!HH", 8 + len(payload), 0)
    return frame[:14] + bytes(ip) + udp + payload


def put(buf: bytearray, bit_offset: int, width: int, value: int) -> None:
    first, end = bit_offset // 8, (bit_offset + width + 7) // 8
    shift = end * 8 - bit_offset - width
    raw = int.from_bytes(buf[first:end], "big")
    mask = ((1 << width) - 1) << shift
    raw = (raw & ~mask) | (value << shift)
    buf[first:end] = raw.to_bytes(end - first, "big")


def self_width(app: App) -> int:
    return app.type_field[1] if app.type_field else 8


def get(buf: bytes, bit_offset: int, width: int) -> int:
    first, end = bit_offset // 8, (bit_offset + width + 7) // 8
    raw = int.from_bytes(buf[first:end], "big")
    return (raw >> (end * 8 - bit_offset - width)) & ((1 << width) - 1)


def message_bytes(app: App, msg: dict[str, int], rng: random.Random, mtype: int | None = None,
                  extra: int = 0) -> bytes:
    buf = bytearray(rng.randbytes(app.message_bytes + extra))
    if app.type_field is not None:
        put(buf, *app.type_field, rng.choice(app.types) if mtype is None else mtype)
    for f in app.fields:
        put(buf, f.offset, f.width, msg[f.qname])
    return bytes(buf)


@dataclass
class Case:
    """One input frame and what each port must receive for it (or the drop it must count)."""

    frame: bytes
    copies: dict[int, bytes]  # port -> frame
    drop: str | None = None


def mold_case(app: App, session: bytes, seq: int, blocks: list[bytes], sets: list[list[int]],
              count: int | None = None, **frame_kw) -> Case:
    """A MoldUDP64 frame; `sets` holds each block's port set (empty: not selected)."""
    n = len(blocks) if count is None else count
    payload = session + struct.pack("!QH", seq, n) + b"".join(struct.pack("!H", len(b)) + b for b in blocks)
    frame = ip_udp_frame(payload, app.udp_port, **frame_kw)
    copies = {}
    for p in sorted({p for s in sets for p in s}):
        kept = [i for i, s in enumerate(sets) if p in s]
        first, last = kept[0], kept[-1]
        body = session + struct.pack("!QH", (seq + first) % (1 << 64), last - first + 1)
        for i in range(first, last + 1):
            body += (struct.pack("!H", len(blocks[i])) + blocks[i]) if i in kept else b"\0\0"
        copies[p] = expected_copy(frame, body)
    return Case(frame, copies, None if copies else "no_route")


def single_case(app: App, message: bytes, ports: list[int], **frame_kw) -> Case:
    frame = ip_udp_frame(message, app.udp_port, **frame_kw)
    return Case(frame, {p: expected_copy(frame, message) for p in ports}, None if ports else "no_route")


def selected(app: App, block: bytes, rules, msg) -> list[int]:
    if len(block) < app.message_bytes:
        return []
    if app.type_field is not None and get(block, *app.type_field) not in app.types:
        return []
    return ports_of(rules, msg)


def cases_for(app: App, rules, gen: RuleGen, rng: random.Random, n: int) -> list[Case]:
    """Well-formed frames carrying random messages, plus adversarial ones."""
    cases: list[Case] = []
    opts = [b"", b"\x01\x01\x01\x00", b"\x94\x04\x00\x00" * 2, b"\x01" * 40]  # up to IHL 15
    for _ in range(n):
        kw = {"options": rng.choice(opts)}
        if rng.random() < 0.2:
            kw["pad"] = b"\0" * rng.randint(1, 30)  # Ethernet padding: never carried into copies
        if app.framing == "single":
            msg = gen.message()
            extra = rng.choice((0, 0, 0, 1, 9))
            mtype = None
            if app.type_field is not None and rng.random() < 0.2:
                mtype = rng.randrange(1 << app.type_field[1])
            if app.type_qname:  # the type field's value is what the message bytes say
                msg[app.type_qname] = rng.choice(app.types) if mtype is None else mtype
                mtype = msg[app.type_qname]
            block = message_bytes(app, msg, rng, mtype, extra)
            if rng.random() < 0.05:
                block = block[:rng.randrange(app.message_bytes)]  # too short: never selected
            cases.append(single_case(app, block, selected(app, block, rules, msg), **kw))
        else:
            blocks, sets = [], []
            for _ in range(rng.choice((0, 1, 1, 2, 3, 5, 8))):
                r = rng.random()
                msg = gen.message()
                mtype = None
                if app.type_field is not None and r < 0.15:
                    mtype = rng.choice([t for t in (0x41, 0x46, 0x45, 0x53, 0, 255, 1, 15)
                                        if t not in app.types and t < 1 << app.type_field[1]] or [None])
                if app.type_qname:
                    msg[app.type_qname] = rng.choice(app.types) if mtype is None else mtype
                    mtype = msg[app.type_qname]
                block = message_bytes(app, msg, rng, mtype, rng.choice((0, 0, 0, 4)))
                if r > 0.95:
                    block = block[:rng.randrange(app.message_bytes)]
                blocks.append(block)
                sets.append(selected(app, block, rules, msg))
            seq = rng.choice((0, 1, 12345, (1 << 64) - 1, (1 << 64) - 2))
            cases.append(mold_case(app, rng.randbytes(10), seq, blocks, sets, **kw))
    return cases


def bad_cases(app: App, rules, gen: RuleGen, rng: random.Random) -> list[Case]:
    """Frames the switch must drop and count, or forward as plain IP (no route: dropped)."""
    msg = gen.message()
    if app.type_qname:
        msg[app.type_qname] = app.types[0]
    block = message_bytes(app, msg, rng)
    good = (mold_case(app, b"S" * 10, 1, [block], [[1]]).frame if app.framing == "moldudp64"
            else ip_udp_frame(block, app.udp_port))
    out = [
        Case(good[:10], {}, "truncated"),  # inside Ethernet
        Case(good[:20], {}, "truncated"),  # inside IPv4
        Case(good[:14 + 20 + 4], {}, "truncated"),  # inside UDP
        Case(good[:-1], {}, "truncated"),  # IPv4 total length runs past the frame
        Case(good + b"\0" * (MAX_FRAME + 1 - len(good)), {}, "oversized"),
        Case(good[:12] + b"\x86\xdd" + good[14:], {}, "no_route"),  # IPv6 ethertype
        Case(good[:12] + b"\x81\x00" + good[14:], {}, "no_route"),  # VLAN tag
        Case(good[:14] + bytes([0x65]) + good[15:], {}, "malformed"),  # version 6
        Case(good[:14] + bytes([0x44]) + good[15:], {}, "malformed"),  # IHL 4
        Case(ip_udp_frame(block, app.udp_port ^ 1), {}, "no_route"),  # another UDP port
    ]
    f = bytearray(good)
    struct.pack_into("!H", f, 14 + 20 + 4, 7)  # UDP length < 8
    out.append(Case(bytes(f), {}, "malformed"))
    f = bytearray(good)
    struct.pack_into("!H", f, 14 + 20 + 4, len(good) - 34 + 1)  # UDP length past IPv4 end
    out.append(Case(bytes(f), {}, "truncated"))
    f = bytearray(good)
    struct.pack_into("!H", f, 14 + 2, 19)  # IPv4 total length < header
    out.append(Case(bytes(f), {}, "malformed"))
    f = bytearray(good)
    struct.pack_into("!H", f, 14 + 6, 0x2000)  # a fragment (MF): plain IP, no route
    out.append(Case(bytes(f), {}, "no_route"))
    if app.framing == "moldudp64":
        hdr = b"S" * 10 + struct.pack("!QH", 5, 1)
        out += [
            Case(ip_udp_frame(hdr[:19], app.udp_port), {}, "truncated"),  # short Mold header
            Case(ip_udp_frame(hdr, app.udp_port), {}, "truncated"),  # count 1, no block
            Case(ip_udp_frame(hdr + b"\x00", app.udp_port), {}, "truncated"),  # half a length
            Case(ip_udp_frame(hdr + struct.pack("!H", len(block) + 1) + block, app.udp_port), {},
                 "truncated"),  # block length overruns
            Case(ip_udp_frame(b"S" * 10 + struct.pack("!QH", 5, 0), app.udp_port), {}, "no_route"),
            Case(ip_udp_frame(b"S" * 10 + struct.pack("!QH", 5, 0xFFFF) + struct.pack("!H", len(block)) + block,
                              app.udp_port), {}, "no_route"),  # end of session: no blocks read
            Case(ip_udp_frame(b"S" * 10 + struct.pack("!QH", 5, 0) + struct.pack("!H", len(block)) + block,
                              app.udp_port), {}, "no_route"),  # heartbeat with trailing bytes
        ]
        # A count of 1 with two blocks: the second is trailing bytes, never read nor copied.
        c = mold_case(app, b"C" * 10, 3, [block], [ports_of(rules, msg)])
        tail = struct.pack("!H", len(block)) + block
        f = bytearray(c.frame + tail)
        struct.pack_into("!H", f, 14 + 2, len(f) - 14)
        struct.pack_into("!H", f, 14 + 10, 0)
        struct.pack_into("!H", f, 14 + 10, _csum(bytes(f[14:34])))
        struct.pack_into("!H", f, 14 + 20 + 4, len(f) - 34)
        out.append(Case(bytes(f), {p: expected_copy(bytes(f), fr[14 + 20 + 8:]) for p, fr in c.copies.items()},
                        c.drop))
        # As many messages as fit in a jumbo frame, and a second block that overruns.
        many = (MAX_FRAME - 14 - 20 - 8 - 20) // (2 + len(block))
        sets = [ports_of(rules, msg)] * many
        out.append(mold_case(app, b"M" * 10, 7, [block] * many, sets))
        c = mold_case(app, b"M" * 10, 7, [block, block], sets[:2])
        f = bytearray(c.frame)
        struct.pack_into("!H", f, 14 + 20 + 8 + 20 + 2 + len(block), len(block) + 1)
        out.append(Case(bytes(f), {}, "truncated"))
        # zero-length blocks and unknown message types around a selected message
        other = bytearray(block)
        if app.type_field:
            put(other, *app.type_field, next(t for t in range(16) if t not in app.types))
        blocks = [b"", bytes(other), block, block[:app.message_bytes - 1], bytes(other), block, b""]
        sel = ports_of(rules, msg)
        sets = [[], [] if app.type_field else sel, sel, [], [] if app.type_field else sel, sel, []]
        out.append(mold_case(app, b"Z" * 10, 99, blocks, sets))
    else:
        out.append(single_case(app, b"", []))  # empty payload: too short, not selected
        out.append(single_case(app, block[:-1], []))
        big = block + rng.randbytes(MAX_FRAME - 14 - 20 - 8 - len(block))
        out.append(single_case(app, big, selected(app, big, rules, msg)))
    return out


# ---------------------------------------------------------------- pcap


def write_pcap(path: Path, frames: list[bytes]) -> None:
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            fh.write(struct.pack("<IIII", 1000 + i, i, len(fr), len(fr)) + fr)


def read_pcap(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert struct.unpack_from("<I", data)[0] in (0xA1B2C3D4, 0xA1B23C4D), path
    pos, out = 24, []
    while pos < len(data):
        _, _, caplen, _ = struct.unpack_from("<IIII", data, pos)
        out.append(data[pos + 16: pos + 16 + caplen])
        pos += 16 + caplen
    return out


# ---------------------------------------------------------------- running the product


def camus(args: list[str], stdin: str = "", subprocess_mode: bool = True) -> tuple[int, str, str]:
    """Run `camus ARGS`: as a subprocess, or in this process through the same entry point."""
    if subprocess_mode:
        p = subprocess.run([sys.executable, "-m", "camus", *args], input=stdin, capture_output=True,
                           text=True, cwd=ROOT, timeout=300)
        return p.returncode, p.stdout, p.stderr
    from camus.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_in = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
            except Exception:  # a traceback from the CLI is itself a finding
                import traceback

                traceback.print_exc(file=err)
                rc = 99
    finally:
        sys.stdin = old_in
    return rc, out.getvalue(), err.getvalue()


class Mismatch(AssertionError):
    pass


def check(app: App, rules, rules_text: str, messages: list[dict[str, int]], cases: list[Case],
          workdir: Path, rng: random.Random, subprocess_mode: bool, field_order: list[str] | None = None,
          impls=("native", "python"), static: bool = False) -> dict:
    """Compile, eval every message, run every frame through both switch implementations."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec, rf, out = workdir / f"{app.name}.p4", workdir / "rules.txt", workdir / "build"
    spec.write_text(app.text)
    rf.write_bytes(rules_text.encode())
    args = ["compile", str(spec), str(rf), "--out", str(out)]
    if static:
        args.append("--static")
    if field_order:
        args += ["--field-order", ",".join(field_order)]
    rc, so, se = camus(args, subprocess_mode=subprocess_mode)
    if rc != 0:
        raise Mismatch(f"compile failed ({rc}): {se}\nrules:\n{rules_text}\nspec:\n{app.text}")
    lines, want = [], []
    for m in messages:
        m = dict(m)
        j = json_message(app, m, rng)
        type_ok = True
        if app.type_qname:  # the type field is checked only when the message gives it
            tq = app.type_qname
            if tq in [f.qname for f in app.fields]:
                given = j.get(tq, j.get(tq.split(".")[1]))
                type_ok = given is None or given in app.types
            elif rng.random() < 0.2:
                t = rng.choice((rng.randrange(1 << self_width(app)), *app.types))
                j[tq if rng.random() < 0.5 else tq.split(".")[1]] = t
                type_ok = t in app.types
        lines.append(json.dumps(j))
        want.append(ports_of(rules, m) if type_ok else [])
    rc, so, se = camus(["eval", "--pipeline", str(out)], "\n".join(lines) + "\n", subprocess_mode)
    got = [json.loads(x) for x in so.splitlines()]
    if rc != 0 or got != want:
        bad = [(lines[i], want[i], got[i] if i < len(got) else None) for i in range(len(want))
               if i >= len(got) or got[i] != want[i]]
        raise Mismatch(f"camus eval disagrees (rc {rc}, {se[-2000:]}) on {len(bad)} of {len(want)}: "
                       f"{bad[:3]}\nrules:\n{rules_text}\nspec:\n{app.text}\norder {field_order}")
    if cases:
        pin = workdir / "in.pcap"
        write_pcap(pin, [c.frame for c in cases])
        expected: dict[int, list[bytes]] = {}
        drops: dict[str, int] = {}
        for c in cases:
            for p, fr in c.copies.items():
                expected.setdefault(p, []).append(fr)
            if c.drop:
                drops[c.drop] = drops.get(c.drop, 0) + 1
        for impl in impls:
            od = workdir / f"out-{impl}"
            cj = workdir / f"counters-{impl}.json"
            rc, so, se = camus(["switch", "run", "--pipeline", str(out), "--pcap-in", str(pin), "--out-dir",
                                str(od), "--impl", impl, "--counters-json", str(cj)],
                               subprocess_mode=subprocess_mode)
            if rc != 0:
                raise Mismatch(f"switch run --impl {impl} failed ({rc}): {se[-3000:]}")
            got_ports = {int(p.stem.split("-")[1]): read_pcap(p) for p in od.glob("port-*.pcap")}
            if got_ports != expected:
                detail = []
                for p in sorted(set(got_ports) | set(expected)):
                    g, e = got_ports.get(p, []), expected.get(p, [])
                    if g != e:
                        detail.append(f"port {p}: got {len(g)} frames, want {len(e)}")
                        for a, b in itertools.zip_longest(g, e):
                            if a != b:
                                detail.append(f"  first difference: got {a and a.hex()}\n  want {b and b.hex()}")
                                break
                raise Mismatch(f"switch --impl {impl} output differs: {detail[:8]}\nrules:\n{rules_text}\n"
                               f"spec:\n{app.text}")
            counters = json.loads(cj.read_text())
            got_drops = {k: v for k, v in counters["drops"].items() if v}
            if got_drops != drops:
                raise Mismatch(f"switch --impl {impl} drops {got_drops}, want {drops}")
    return {"messages": len(messages), "frames": len(cases)}


def campaign(seed: int, subprocess_mode: bool, app_name: str | None = None, n_rules: int | None = None,
             n_messages: int = 60, n_frames: int = 30, impls=("native", "python"), orders: bool = False,
             empty_sets: bool = True) -> dict:
    rng = random.Random(seed)
    name = app_name or rng.choice(["itch", "int", "kafka", "custom", "custom", "custom"])
    app = PRODUCT_APPS[name]() if name in PRODUCT_APPS else custom_app(rng)
    gen = RuleGen(app, rng, empty_sets)
    n = n_rules if n_rules is not None else rng.choice((0, 1, 1, 2, 3, 5, 8, 13, 30))
    rules, text = gen.rules(n)
    msgs = [gen.message() for _ in range(n_messages)]
    cases = cases_for(app, rules, gen, rng, n_frames) + (bad_cases(app, rules, gen, rng) if n_frames else [])
    stats = {"app": name, "rules": n}
    with tempfile.TemporaryDirectory() as tmp:
        check(app, rules, text, msgs, cases, Path(tmp), rng, subprocess_mode, impls=impls,
              static=rng.random() < 0.2)
        if orders and len(app.fields) <= 4:
            for perm in itertools.permutations([f.qname for f in app.fields]):
                check(app, rules, text, msgs, [], Path(tmp) / "o", rng, subprocess_mode, list(perm))
    return stats


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--app")
    ap.add_argument("--rules", type=int)
    ap.add_argument("--subprocess", action="store_true")
    ap.add_argument("--orders", action="store_true")
    ap.add_argument("--no-empty-sets", action="store_true")
    a = ap.parse_args(argv)
    failures = 0
    for i in range(a.runs):
        seed = a.seed + i
        try:
            campaign(seed, a.subprocess, a.app, a.rules, orders=a.orders, empty_sets=not a.no_empty_sets)
        except Mismatch as exc:
            failures += 1
            print(f"seed {seed}: {str(exc)[:3000]}\n", flush=True)
    print(f"{a.runs} runs, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
