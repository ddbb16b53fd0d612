"""An interpreter for the subset of P4_16 v1model that compiler/p4 emits, for tests only.

Without p4c and bmv2 nothing here can run the generated programs, so this runs their text:
it parses `program.p4` (headers, structs, the parser's states, actions, tables, controls),
loads entries.json into the tables by their `@name`d keys, and pushes frames through the
v1model pipeline the way bmv2's simple_switch does (read from its simple_switch.cpp):
parser (a failed extract stops parsing and sets `parser_error`), ingress, then resubmission
(which wins over everything else and re-parses the original frame keeping the
`@field_list(1)` metadata and nothing else of the metadata: `ingress_port` reads 0 after it), multicast replication through the groups, or unicast, or drop;
egress per copy, checksum update, deparser (valid headers, then the unparsed rest), and
`truncate`.

It is our reading of P4 and bmv2, not theirs: a program can pass here and still be refused
by p4c. What it does show is that the emitted logic (the walk, the passes, the pruning,
lengths and checksums) computes what switch/reference.py computes. Anything outside the
subset raises `Unsupported` rather than guessing.
"""

from __future__ import annotations

import copy
import operator
import zlib
from dataclasses import dataclass, field

from tests.p4.p4_syntax import Program, Table, Unsupported, parse_program

DROP_PORT = 511
STD_WIDTHS = {"ingress_port": 9, "egress_spec": 9, "egress_port": 9, "egress_rid": 16,
              "mcast_grp": 16, "packet_length": 32, "instance_type": 32, "ingress_global_timestamp": 48}


_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "|": operator.or_,
          "&": operator.and_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}


class ParserError(Exception):
    def __init__(self, name: str):
        self.name = name


# ---- running ---------------------------------------------------------------------------------


@dataclass
class Header:
    type: str
    valid: bool = False
    fields: dict = field(default_factory=dict)
    data: bytes = b""  # a varbit field's bytes


class Packet:
    """One packet's state through a pipeline pass."""

    def __init__(self, prog: Program, frame: bytes):
        self.frame = frame
        self.hdr = {n: Header(t) for n, t in prog.instances.items()}
        self.meta = {f: 0 for f in prog.meta}
        self.std = {f: 0 for f in STD_WIDTHS}
        self.std["parser_error"] = "NoError"
        self.locals: dict = {}
        self.payload = b""
        self.resubmit = False
        self.truncate: int | None = None


class Interpreter:
    def __init__(self, program_text: str, entries: dict):
        self.p = parse_program(program_text)
        self.groups = {g["id"]: [(r["port"], r["rid"]) for r in g["replicas"]]
                       for g in entries.get("multicast_groups", [])}
        for e in entries["table_entries"]:
            self.p.tables[e["table"]].entries.append(e)
        # Register cells (IR 4 state) live across packets, as a device's do; absent cells are 0
        # (a fresh program), as bmv2 starts them.
        self.registers: dict[str, dict[int, int]] = {name: {} for name in self.p.registers}

    def reset_cells(self, register: str, first: int, count: int) -> None:
        for i in range(first, first + count):
            self.registers[register].pop(i, None)

    # widths

    def field_width(self, pkt: Packet, e) -> int | None:
        if e[0] == "member" and e[1][0] == "member" and e[1][1] == ("name", "hdr"):
            t = self.p.types[self.p.instances[e[1][2]]]
            return dict(t)[e[2]][1]
        if e[0] == "member" and e[1] == ("name", "meta"):
            return self.p.meta[e[2]][0]
        if e[0] == "member" and e[1] == ("name", "standard_metadata"):
            return STD_WIDTHS.get(e[2])
        if e[0] == "name" and e[1] in pkt.locals:
            return pkt.locals[e[1]][1]
        return None

    # expressions: (value, width or None); booleans are Python bools

    def ev(self, pkt: Packet, e):
        kind = e[0]
        if kind == "num":
            return e[1], e[2]
        if kind == "bool":
            return e[1], None
        if kind == "name":
            if e[1] in pkt.locals:
                return pkt.locals[e[1]]
            raise Unsupported(f"name {e[1]}")
        if kind == "member":
            base = e[1]
            if base == ("name", "meta"):
                return pkt.meta[e[2]], self.p.meta[e[2]][0]
            if base == ("name", "standard_metadata"):
                return pkt.std[e[2]], STD_WIDTHS.get(e[2])
            if base == ("name", "error"):
                return e[2], None
            if e[2] == "hit" and base[0] == "call":
                return bool(self.ev(pkt, base)[0]), None
            if base[0] == "member" and base[1] == ("name", "hdr"):
                h = pkt.hdr[base[2]]
                if dict(self.p.types[h.type])[e[2]][0] == "varbit":
                    return int.from_bytes(h.data, "big"), 8 * len(h.data)
                return h.fields.get(e[2], 0), self.field_width(pkt, e)
            raise Unsupported(f"member {e}")
        if kind == "not":
            return not self.ev(pkt, e[1])[0], None
        if kind == "cast":
            v, _ = self.ev(pkt, e[2])
            if e[1][0] == "bit":
                return int(v) & ((1 << e[1][1]) - 1), e[1][1]
            return bool(v), None
        if kind == "slice":
            v, _ = self.ev(pkt, e[1])
            return (v >> e[3]) & ((1 << (e[2] - e[3] + 1)) - 1), e[2] - e[3] + 1
        if kind == "bin":
            return self.binary(pkt, e)
        if kind == "call":
            return self.call(pkt, e[1], e[2]), None
        raise Unsupported(f"expression {e}")

    def binary(self, pkt: Packet, e):
        op = e[1]
        if op == "&&":
            return bool(self.ev(pkt, e[2])[0]) and bool(self.ev(pkt, e[3])[0]), None
        if op == "||":
            return bool(self.ev(pkt, e[2])[0]) or bool(self.ev(pkt, e[3])[0]), None
        (a, wa), (b, wb) = self.ev(pkt, e[2]), self.ev(pkt, e[3])
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return {"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op], None
        width = wa if op in ("<<", ">>") else (wa or wb)
        # Only the operator's own result: a wide operand shifted by another (the one-hot port
        # bitmaps) would not fit in memory.
        v = _ARITH[op](a, b)
        return (v & ((1 << width) - 1) if width else v), width

    def assign(self, pkt: Packet, target, value: int) -> None:
        if target[0] == "slice":  # x[hi:lo] = value: the other bits of x stay
            whole, hi, lo = self.ev(pkt, target[1])[0], target[2], target[3]
            mask = ((1 << (hi - lo + 1)) - 1) << lo
            self.assign(pkt, target[1], whole & ~mask | (value << lo) & mask)
        elif target[0] == "name":
            _, w = pkt.locals[target[1]]
            pkt.locals[target[1]] = (value & ((1 << w) - 1) if w else value, w)
        elif target[1] == ("name", "meta"):
            pkt.meta[target[2]] = value & ((1 << self.p.meta[target[2]][0]) - 1)
        elif target[1] == ("name", "standard_metadata"):
            pkt.std[target[2]] = value & ((1 << STD_WIDTHS[target[2]]) - 1)
        elif target[1][0] == "member" and target[1][1] == ("name", "hdr"):
            w = self.field_width(pkt, target)
            pkt.hdr[target[1][2]].fields[target[2]] = value & ((1 << w) - 1)
        else:
            raise Unsupported(f"assignment to {target}")

    # statements

    def run(self, pkt: Packet, stmts: list) -> None:
        for s in stmts:
            kind = s[0]
            if kind == "block":
                self.run(pkt, s[1])
            elif kind == "if":
                if self.ev(pkt, s[1])[0]:
                    self.run(pkt, [s[2]])
                elif s[3] is not None:
                    self.run(pkt, [s[3]])
            elif kind == "var":
                width = s[1][1] if s[1][0] == "bit" else None
                value = self.ev(pkt, s[3])[0] if s[3] is not None else 0
                pkt.locals[s[2]] = (value & ((1 << width) - 1) if width else value, width)
            elif kind == "assign":
                self.assign(pkt, s[1], self.ev(pkt, s[2])[0])
            elif kind == "expr":
                self.ev(pkt, s[1])
            else:
                raise Unsupported(kind)

    def call(self, pkt: Packet, fn, args: list):
        if fn[0] == "name":
            name = fn[1]
            if name == "mark_to_drop":
                pkt.std["egress_spec"], pkt.std["mcast_grp"] = DROP_PORT, 0
            elif name == "resubmit_preserving_field_list":
                pkt.resubmit = True
            elif name == "truncate":
                pkt.truncate = self.ev(pkt, args[0])[0]
            elif name == "update_checksum":
                if self.ev(pkt, args[0])[0]:
                    bits = value = 0
                    for item in args[1][1]:
                        v, w = self.ev(pkt, item)
                        value, bits = (value << w) | v, bits + w
                    self.assign(pkt, args[2], _csum16(value.to_bytes(bits // 8, "big")))
            elif name == "hash":
                self.hash(pkt, args)
            elif name in self.p.actions:
                self.action(pkt, name, [self.ev(pkt, a)[0] for a in args])
            else:
                raise Unsupported(f"call {name}")
            return None
        obj, method = fn[1], fn[2]
        if obj[0] == "name" and obj[1] in self.p.registers:
            width, size = self.p.registers[obj[1]]
            cells = self.registers[obj[1]]
            if method == "read":  # bmv2: an index past the array is an error, not a wrap
                index = self.ev(pkt, args[1])[0]
                assert index < size, f"{obj[1]}.read at {index} of {size}"
                self.assign(pkt, args[0], cells.get(index, 0))
            elif method == "write":
                index = self.ev(pkt, args[0])[0]
                assert index < size, f"{obj[1]}.write at {index} of {size}"
                cells[index] = self.ev(pkt, args[1])[0] & ((1 << width) - 1)
            else:
                raise Unsupported(f"register method {method}")
            return None
        if method == "apply":
            return self.apply(pkt, self.p.tables[obj[1]])
        if method in ("isValid", "setInvalid", "setValid"):
            h = pkt.hdr[obj[2]]
            if method == "isValid":
                return h.valid
            h.valid = method == "setValid"
            return None
        raise Unsupported(f"method {method}")

    def hash(self, pkt: Packet, args: list) -> None:
        """v1model's hash as bmv2 computes it: base + H(fields) % max, the fields of valid
        headers only, concatenated big-endian (bm_sim's BufBuilder); crc32 is zlib's."""
        if args[1] != ("member", ("name", "HashAlgorithm"), "crc32"):
            raise Unsupported(f"hash algorithm {args[1]}")
        value = bits = 0
        for item in args[3][1]:
            if item[0] == "member" and item[1][0] == "member" and item[1][1] == ("name", "hdr") \
                    and not pkt.hdr[item[1][2]].valid:
                continue
            v, w = self.ev(pkt, item)
            value, bits = (value << w) | v, bits + w
        if bits % 8:
            raise Unsupported("a hashed field list that is not whole bytes")
        base, size = self.ev(pkt, args[2])[0], self.ev(pkt, args[4])[0]
        self.assign(pkt, args[0], base + zlib.crc32(value.to_bytes(bits // 8, "big")) % size)

    def action(self, pkt: Packet, name: str, args: list) -> None:
        params, body = self.p.actions[name]
        saved = dict(pkt.locals)
        for (pname, width), v in zip(params, args):
            pkt.locals[pname] = (v, width)
        self.run(pkt, body)
        pkt.locals = saved

    def apply(self, pkt: Packet, table: Table) -> bool:
        keys = {n: (self.ev(pkt, e)[0], kind, self.field_width(pkt, e)) for e, kind, n in table.keys}
        best = None
        for entry in table.entries:
            rank = 0
            for n, (v, kind, width) in keys.items():
                m = entry["match"].get(n)
                if m is None:
                    if kind == "exact":
                        break
                    continue
                (mk, mv), = m.items()
                if mk == "exact" and v != mv:
                    break
                if mk == "range" and not mv[0] <= v <= mv[1]:
                    break
                if mk == "lpm":
                    shift = width - mv[1]
                    if v >> shift != mv[0] >> shift:
                        break
                    rank = mv[1]
                if mk == "ternary" and v & mv[1] != mv[0] & mv[1]:
                    break
            else:
                rank = max(rank, entry.get("priority", 0))
                if best is None or rank > best[0]:
                    best = (rank, entry)
        if best is None:
            return False
        e = best[1]
        params = self.p.actions[e["action"]][0]
        self.action(pkt, e["action"], [e["params"][n] for n, _ in params])
        return True

    # the parser

    def parse(self, pkt: Packet) -> None:
        data, pos, state = pkt.frame, 0, "start"
        try:
            while state not in ("accept", "reject"):
                body, trans = self.p.states[state]
                for s in body:
                    if s[0] == "expr" and s[1][0] == "call" and s[1][1][2] == "extract":
                        pos = self.extract(pkt, data, pos, s[1][2])
                    else:
                        self.run(pkt, [s])
                if trans[0] == "goto":
                    state = trans[1]
                    continue
                keys = [self.key(pkt, data, pos, k) for k in trans[1]]
                state = next(target for ks, target in trans[2] if _matches(self, pkt, ks, keys))
        except ParserError as err:
            pkt.std["parser_error"] = err.name
        pkt.payload = data[pos:]

    def key(self, pkt: Packet, data: bytes, pos: int, e):
        if e[0] == "call" and e[1][0] == "generic":
            width = e[1][2][1]
            if pos + width // 8 > len(data):
                raise ParserError("PacketTooShort")
            return int.from_bytes(data[pos: pos + width // 8], "big")
        return self.ev(pkt, e)[0]

    def extract(self, pkt: Packet, data: bytes, pos: int, args: list) -> int:
        name = args[0][2]
        h = pkt.hdr[name]
        fields = self.p.types[h.type]
        fixed = [(f, t[1]) for f, t in fields if t[0] == "bit"]
        nbytes = sum(w for _, w in fixed) // 8
        var = self.ev(pkt, args[1])[0] // 8 if len(args) > 1 else 0
        if any(t[0] == "varbit" and var * 8 > t[1] for _, t in fields):
            raise ParserError("HeaderTooShort")
        if pos + nbytes + var > len(data):
            raise ParserError("PacketTooShort")
        value, bits = int.from_bytes(data[pos: pos + nbytes], "big"), nbytes * 8
        for f, w in fixed:
            bits -= w
            h.fields[f] = (value >> bits) & ((1 << w) - 1)
        h.data = data[pos + nbytes: pos + nbytes + var]
        h.valid = True
        return pos + nbytes + var

    def deparse(self, pkt: Packet) -> bytes:
        out = []
        for name in self.p.deparser:
            h = pkt.hdr[name]
            if not h.valid:
                continue
            fixed = [(f, t[1]) for f, t in self.p.types[h.type] if t[0] == "bit"]
            value, bits = 0, 0
            for f, w in fixed:
                value, bits = (value << w) | h.fields.get(f, 0), bits + w
            out.append(value.to_bytes(bits // 8, "big") + h.data)
        return b"".join(out) + pkt.payload

    # the v1model pipeline

    def process(self, frame: bytes, in_port: int, max_passes: int = 64,
                ts_us: int = 0) -> list[tuple[int, bytes]]:
        """The copies of one frame; `ts_us` is every pass's ingress_global_timestamp."""
        preserved: dict = {}
        for n in range(max_passes):
            pkt = Packet(self.p, frame)
            pkt.meta.update(preserved)
            # simple_switch's resubmission (copy_field_list_and_set_type) resets all metadata
            # but the field list, standard metadata included, then restores packet_length
            # only: a resubmitted pass reads ingress_port 0 and instance_type 6 (RESUBMIT).
            pkt.std["ingress_port"] = in_port if n == 0 else 0
            pkt.std["instance_type"] = 0 if n == 0 else 6
            pkt.std["packet_length"] = len(frame)
            pkt.std["ingress_global_timestamp"] = ts_us & ((1 << 48) - 1)
            self.parse(pkt)
            self.run(pkt, self.p.controls["CamusVerifyChecksum"])
            self.run(pkt, self.p.controls["CamusIngress"])
            if pkt.resubmit:
                preserved = {f: pkt.meta[f] for f, (_, keep) in self.p.meta.items() if keep}
                continue
            if pkt.std["mcast_grp"]:
                replicas = self.groups.get(pkt.std["mcast_grp"], [])
            elif pkt.std["egress_spec"] == DROP_PORT:
                replicas = []
            else:
                replicas = [(pkt.std["egress_spec"], 0)]
            return [out for port, rid in replicas if (out := self.egress(pkt, port, rid)) is not None]
        raise AssertionError(f"more than {max_passes} passes")

    def egress(self, ingress: Packet, port: int, rid: int) -> tuple[int, bytes] | None:
        pkt = copy.deepcopy(ingress)
        pkt.locals = {}
        pkt.std["egress_port"], pkt.std["egress_rid"], pkt.std["egress_spec"] = port, rid, DROP_PORT + 1
        self.run(pkt, self.p.controls["CamusEgress"])
        if pkt.std["egress_spec"] == DROP_PORT:
            return None
        self.run(pkt, self.p.controls["CamusComputeChecksum"])
        out = self.deparse(pkt)
        return port, out[:pkt.truncate] if pkt.truncate is not None else out


def _matches(interp: Interpreter, pkt: Packet, keyset, keys: list) -> bool:
    if keyset[0] == "default":
        return True
    if keyset[0] == "tuple":
        return all(_matches(interp, pkt, k, [v]) for k, v in zip(keyset[1], keys))
    if keyset[0] == "value":
        return keys[0] == interp.ev(pkt, keyset[1])[0]
    value, mask = interp.ev(pkt, keyset[1])[0], interp.ev(pkt, keyset[2])[0]
    return keys[0] & mask == value & mask


def _csum16(data: bytes) -> int:
    total = sum(int.from_bytes(data[i: i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF
