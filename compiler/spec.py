"""The annotated header spec: an application's message format and which fields rules may test.

A spec is a small P4_16 file (grammar in spec.lark): header declarations in wire order plus
annotations. The annotations (each also accepted as `@pragma name(...)` and `#pragma name(...)`):

  query_field(h.f)          f may appear in rules with any comparison (range match)
  query_field_exact(h.f)    f may appear only with == / != (exact match, SRAM)
  query_field_lpm(h.f)      f may appear with == / != on prefixes (a.b.c.d/len)
  ascii(h.f)                f holds left-justified, space-padded ASCII (as ITCH pads)
  udp_port(N)               UDP destination port that carries the application (default 1234)
  framing(single)           one message right after the UDP header (the default)
  framing(moldudp64, h)     header h is a MoldUDP64 packet header; the other headers form each
                            message block
  message_type(h.f, v, ...) only messages whose h.f is one of the values are subscription
                            messages (others are never selected)
  query_counter(NAME, WINDOW_US, SLOTS[, KEY, BUCKETS])          state rules may read and
  query_average(h.f, WINDOW_US, SLOTS[, KEY, BUCKETS])           update: a counter, an
  query_meter(NAME, packets|bytes, WINDOW_US, SLOTS[, KEY, BUCKETS])   averageable field, a
                            rate meter (`StateVar`; meaning in docs/stateful.md)
  query_timestamp(h.f, ns|us|ms)   a message's time is its field h.f in that unit (else
                            its packet's time)
  query_banks(N)            register arrays per declared state (1..16, default 4)

Field widths come from the header declarations, never from annotations.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import lark

from compiler.errors import SpecError

DEFAULT_UDP_PORT = 1234
MAX_QUERY_WIDTH = 64
MOLDUDP64_HEADER_BITS = 160
KINDS = {"query_field": "range", "query_field_exact": "exact", "query_field_lpm": "lpm"}
STATE_KINDS = {"query_counter": "counter", "query_average": "average", "query_meter": "meter"}
TIMESTAMP_BITS = 48  # packet timestamps are microseconds in 48 bits (v1model's ingress timestamp)
MAX_SLOTS = 1 << 24
COUNT_BITS = 32  # the width of every state's count `n` (docs/stateful.md)
SUM_BITS = 64  # the width of an average's sum `s`
MAX_AVERAGED_WIDTH = 32  # so that `s` never overflows before `n` does
TIME_UNITS = ("ns", "us", "ms")
DEFAULT_BANKS = 4  # register arrays per state (pipeline.model.DEFAULT_BANKS)
MAX_BANKS = 16
# Words a rule gives a meaning of their own; no counter or meter may be named so.
RESERVED = frozenset({"and", "or", "not", "in", "true", "false", "fwd", "count", "meter", "avg",
                      "rate"})


@dataclass(frozen=True)
class Field:
    header: str
    name: str
    width: int
    bit_offset: int  # from the start of its header

    @property
    def qname(self) -> str:
        return f"{self.header}.{self.name}"


@dataclass(frozen=True)
class Header:
    name: str
    fields: tuple[Field, ...]

    @property
    def bits(self) -> int:
        return sum(f.width for f in self.fields)


@dataclass(frozen=True, eq=False)
class QueryField:
    """A field rules may test, located relative to the first byte of a message.

    Compared by identity: a spec creates each query field once, and the compiler hashes
    them millions of times.
    """

    qname: str
    width: int
    bit_offset: int  # from the start of the message
    kind: str  # declared match kind: "range" | "exact" | "lpm"
    ascii: bool = False

    @property
    def max_value(self) -> int:
        return (1 << self.width) - 1

    @property
    def name(self) -> str:
        return self.qname.split(".", 1)[1]

    @property
    def default(self) -> int:
        """The value of a field a message does not give: 0, or all spaces for ascii fields."""
        if self.ascii and self.width % 8 == 0:
            return int.from_bytes(b" " * (self.width // 8), "big")
        return 0

    def encode(self, value: int | str | bytes) -> int:
        """A field value from an integer or (space-padded, as ITCH pads) ASCII text."""
        if isinstance(value, bool):
            raise ValueError(f"{self.qname}: expected an integer or a string, not {value!r}")
        if isinstance(value, str):
            value = value.encode("ascii")
        if isinstance(value, bytes):
            size = self.width // 8
            if self.width % 8 or len(value) > size:
                raise ValueError(f"{self.qname}: {value!r} does not fit {self.width} bits")
            return int.from_bytes(value.ljust(size, b" "), "big")
        if not isinstance(value, int) or not 0 <= value <= self.max_value:
            raise ValueError(f"{self.qname}: {value!r} is not a {self.width}-bit unsigned value")
        return value

    def decode(self, value: int) -> int | str:
        """The inverse of encode for display: text for ascii fields, else the integer."""
        if self.ascii and self.width % 8 == 0:
            return value.to_bytes(self.width // 8, "big").decode("ascii", "replace").rstrip(" ")
        return value


@dataclass(frozen=True, eq=False)
class StateVar:
    """A declared state: what its instances accumulate, over which window, and how many
    register cells (slots) all rules together may use. Compared by identity, like QueryField.

    `name` is how rules and errors call it: the counter's or meter's name, or for an
    average `avg(h.f)`. `field` is an average's field; `key` a keyed state's key field, whose
    value mod `buckets` picks the instance (`buckets` is 1 without a key)."""

    kind: str  # "counter" | "average" | "meter"
    name: str
    window_us: int
    slots: int
    field: str | None = None
    field_width: int = 0
    unit: str | None = None  # a meter's: "packets" | "bytes"
    key: str | None = None
    buckets: int = 1
    message_bytes: int = 0  # a packet's length when it does not say (bytes meters)
    line: int | None = None
    # The spec's `query_timestamp(field, unit)`: a message's time is that field (None: the
    # packet's time). Every state of a spec has the same.
    time_field: str | None = None
    time_unit: str | None = None

    def ts_us(self, values, ts_us: int) -> int:
        """A message's time in µs: its time field's, converted and kept to 48 bits, when
        the spec declares one; else `ts_us`, the packet's."""
        if self.time_field is None:
            return ts_us
        v = values.get(self.time_field, 0)
        v = v // 1000 if self.time_unit == "ns" else v * 1000 if self.time_unit == "ms" else v
        return v & ((1 << TIMESTAMP_BITS) - 1)

    @property
    def max_constant(self) -> int:
        """The largest constant a rule may compare this state with."""
        if self.kind == "average":
            return (1 << self.field_width) - 1
        if self.kind == "meter":
            return (1 << 64) - 1
        return (1 << COUNT_BITS) - 1

    @property
    def read_as(self) -> str:
        """How a rule reads it: `my_counter`, `avg(h.f)`, `rate(m)`."""
        return f"rate({self.name})" if self.kind == "meter" else self.name

    @property
    def action(self) -> str:
        """The update action naming it: `count(c)`, `avg(h.f)`, `meter(m)`."""
        return {"counter": f"count({self.name})", "average": self.name,
                "meter": f"meter({self.name})"}[self.kind]


@dataclass
class Spec:
    name: str
    headers: list[Header]
    udp_port: int = DEFAULT_UDP_PORT
    framing: str = "single"
    packet_header: Header | None = None
    message_type_field: str | None = None
    message_types: tuple[int, ...] = ()
    query_fields: dict[str, QueryField] = field(default_factory=dict)
    # Declared state by how rules name it: a counter's or meter's name, `avg(h.f)`.
    state_vars: dict[str, StateVar] = field(default_factory=dict)
    # `query_timestamp(h.f, unit)`: (field, unit), or None; `query_banks(N)`.
    timestamp: tuple[str, str] | None = None
    banks: int = DEFAULT_BANKS

    @property
    def message_headers(self) -> list[Header]:
        return [h for h in self.headers if h is not self.packet_header]

    @property
    def message_bytes(self) -> int:
        return sum(h.bits for h in self.message_headers) // 8

    def message_offset(self, qname: str) -> int:
        """Bit offset of any declared message field from the start of the message."""
        offset = 0
        for h in self.message_headers:
            for f in h.fields:
                if f.qname == qname:
                    return offset + f.bit_offset
            offset += h.bits
        raise KeyError(qname)

    def resolve(self, name: str, line: int | None = None, column: int | None = None,
                source: str | None = None) -> QueryField:
        """The query field a rule means by `name` (`header.field`, or a unique bare `field`)."""
        if "." in name:
            if name in self.query_fields:
                return self.query_fields[name]
            if any(f.qname == name for h in self.headers for f in h.fields):
                raise SpecError(f"field '{name}' is not a query field (annotate it with "
                                f"@query_field to filter on it)", line, column, source)
            raise SpecError(f"unknown field '{name}'", line, column, source)
        matches = [q for q in self.query_fields.values() if q.name == name]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            options = ", ".join(q.qname for q in matches)
            raise SpecError(f"field '{name}' is ambiguous: write one of {options}", line, column,
                            source)
        if any(f.name == name for h in self.headers for f in h.fields):
            raise SpecError(f"field '{name}' is not a query field (annotate it with "
                            f"@query_field to filter on it)", line, column, source)
        known = ", ".join(q.qname for q in self.query_fields.values()) or "none"
        raise SpecError(f"unknown field '{name}' (query fields: {known})", line, column, source)


@functools.cache
def _parser() -> lark.Lark:
    grammar = (Path(__file__).with_name("spec.lark")).read_text()
    return lark.Lark(grammar, parser="lalr", propagate_positions=True)


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    return parse_spec(path.read_text(), name=path.stem, source=str(path))


def parse_spec(text: str, name: str = "app", source: str | None = None) -> Spec:
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
    try:
        tree = _parser().parse(text)
    except lark.UnexpectedCharacters as exc:
        raise SpecError(f"unexpected character {text[exc.pos_in_stream]!r}", exc.line, exc.column,
                        source) from None
    except lark.UnexpectedToken as exc:
        if exc.token.type == "$END":
            raise SpecError("unexpected end of spec (an unclosed header or annotation?)",
                            exc.line if exc.line != -1 else None, exc.column, source) from None
        expected = ", ".join(sorted(_describe(t) for t in exc.expected))
        raise SpecError(f"unexpected {exc.token.value!r}; expected {expected}", exc.line,
                        exc.column, source) from None
    return _SpecBuilder(name, source).build(tree)


def _describe(terminal: str) -> str:
    return {"NAME": "a name", "INT": "a number", "HEX": "a number", "SEMICOLON": "';'",
            "RBRACE": "'}'", "LBRACE": "'{'", "RPAR": "')'", "LPAR": "'('", "COMMA": "','",
            "DOTTED": "header.field", "LESSTHAN": "'<'", "MORETHAN": "'>'",
            "ANNOTATION": "an annotation", "HEADER": "'header'", "BIT": "'bit'"}.get(terminal,
                                                                                     terminal)


class _SpecBuilder:
    def __init__(self, name: str, source: str | None):
        self.name = name
        self.source = source
        self.headers: dict[str, Header] = {}
        self.annotations: list[tuple[str, list, lark.Tree]] = []
        self.header_nodes: dict[str, lark.Token] = {}
        self.fields: dict[str, Field] = {}

    def error(self, message: str, node) -> SpecError:
        meta = getattr(node, "meta", None)
        line = getattr(node, "line", None) if meta is None else getattr(meta, "line", None)
        column = getattr(node, "column", None) if meta is None else getattr(meta, "column", None)
        return SpecError(message, line, column, self.source)

    def build(self, tree: lark.Tree) -> Spec:
        for decl in tree.children:
            if decl.data == "header":
                self._header(decl)
            elif decl.data == "annotation":
                self._annotation(decl)
        if not self.headers:
            raise SpecError("the spec declares no header", 1, 1, self.source)
        spec = Spec(self.name, list(self.headers.values()))
        kinds: dict[str, tuple[str, lark.Tree]] = {}
        ascii_fields: set[str] = set()
        states: list[tuple[str, list, lark.Tree]] = []
        for ann, args, node in self.annotations:
            if ann in KINDS:
                f = self._field_arg(ann, args, node, count=1)
                if f.qname in kinds and kinds[f.qname][0] != KINDS[ann]:
                    raise self.error(f"field '{f.qname}' is annotated twice with different "
                                     f"match kinds", node)
                if f.width > MAX_QUERY_WIDTH:
                    raise self.error(f"query field '{f.qname}' is {f.width} bits wide; at most "
                                     f"{MAX_QUERY_WIDTH} bits are supported", node)
                kinds[f.qname] = (KINDS[ann], node)
            elif ann == "ascii":
                ascii_fields.add(self._field_arg(ann, args, node, count=1).qname)
            elif ann == "udp_port":
                port = self._int_args(ann, args, node, count=1)[0]
                if not 1 <= port <= 65535:
                    raise self.error(f"udp_port {port} is not a UDP port (1..65535)", node)
                spec.udp_port = port
            elif ann == "framing":
                self._framing(spec, args, node)
            elif ann == "message_type":
                if len(args) < 2:
                    raise self.error("message_type takes a field and at least one value", node)
                f = self._field_arg(ann, args[:1], node, count=1)
                values = self._int_args(ann, args[1:], node, count=len(args) - 1)
                for v in values:
                    if v >= 1 << f.width:
                        raise self.error(f"message type {v} does not fit in {f.width}-bit "
                                         f"field '{f.qname}'", node)
                spec.message_type_field = f.qname
                spec.message_types = tuple(sorted(set(values)))
            elif ann in STATE_KINDS or ann in ("query_timestamp", "query_banks"):
                states.append((ann, args, node))  # once framing and ascii fields are known
            else:
                known = sorted([*KINDS, *STATE_KINDS, 'ascii', 'udp_port', 'framing',
                                'message_type', 'query_timestamp', 'query_banks'])
                raise self.error(f"unknown annotation '{ann}' (known: {', '.join(known)})", node)
        for h in spec.headers:
            if h.bits % 8:
                raise self.error(f"header '{h.name}' is {h.bits} bits, not a whole number of "
                                 f"bytes", self.header_nodes[h.name])
        for qname, (kind, node) in kinds.items():
            if spec.packet_header and qname.startswith(spec.packet_header.name + "."):
                raise self.error(f"'{qname}' is in the framing header; only message fields can "
                                 f"be query fields", node)
            f = self.fields[qname]
            spec.query_fields[qname] = QueryField(qname, f.width, spec.message_offset(qname),
                                                  kind, qname in ascii_fields)
        if spec.message_type_field and spec.packet_header and \
                spec.message_type_field.startswith(spec.packet_header.name + "."):
            raise SpecError("message_type must name a message field, not a framing field",
                            None, None, self.source)
        if not spec.message_headers:
            raise SpecError("the spec declares no message header", None, None, self.source)
        for ann, args, node in states:
            if ann == "query_banks":
                n = self._int_args(ann, args, node, count=1)[0]
                if not 1 <= n <= MAX_BANKS:
                    raise self.error(f"query_banks({n}): 1 .. {MAX_BANKS} banks per state",
                                     node)
                spec.banks = n
            elif ann == "query_timestamp":
                self._timestamp(spec, args, node, ascii_fields)
        for ann, args, node in states:
            if ann in ("query_banks", "query_timestamp"):
                continue
            var = self._state(spec, ann, args, node, ascii_fields)
            if var.name in spec.state_vars:
                what = "field" if var.kind == "average" else "name"
                raise self.error(f"state {what} '{var.name.removeprefix('avg(').rstrip(')')}' "
                                 f"is declared twice", node)
            spec.state_vars[var.name] = var
        return spec

    def _state(self, spec: Spec, ann: str, args: list, node, ascii_fields: set[str]) -> StateVar:
        """One state declaration, checked (docs/stateful.md, "Declaring state")."""
        kind = STATE_KINDS[ann]
        usage = {"counter": "query_counter(NAME, WINDOW_US, SLOTS[, KEY, BUCKETS])",
                 "average": "query_average(header.field, WINDOW_US, SLOTS[, KEY, BUCKETS])",
                 "meter": "query_meter(NAME, packets|bytes, WINDOW_US, SLOTS[, KEY, BUCKETS])"
                 }[kind]
        head = 2 if kind == "meter" else 1  # the arguments before WINDOW_US
        if len(args) not in (head + 2, head + 4) or \
                any(a.data != "int_arg" for a in args[head:head + 2]) or \
                any(a.data != "name_arg" for a in args[:head]):
            raise self.error(f"{ann} takes {usage.split('(', 1)[1][:-1]}", node)
        first = args[0].children[0]
        name, field_name, width, unit = str(first), None, 0, None
        if kind == "average":
            f = self._field_arg(ann, args[:1], node, count=1)
            self._message_field(spec, ann, f, first)
            if f.qname in ascii_fields:
                raise self.error(f"{ann}({f.qname}): an ascii field cannot be averaged", first)
            if f.width > MAX_AVERAGED_WIDTH:
                raise self.error(f"{ann}({f.qname}): the field is {f.width} bits; at most "
                                 f"{MAX_AVERAGED_WIDTH} can be averaged (the sum has "
                                 f"{SUM_BITS} bits, the count {COUNT_BITS})", first)
            name, field_name, width = f"avg({f.qname})", f.qname, f.width
        else:
            if "." in name:
                raise self.error(f"{ann}: a state's name is a plain name, not '{name}'", first)
            if name in RESERVED:
                raise self.error(f"'{name}' is a word of the rule language; name the state "
                                 f"otherwise", first)
            clash = [h for h in self.headers if h == name] or \
                [f for f in self.fields.values() if f.name == name]
            if clash:
                raise self.error(f"state name '{name}' is also a header or field name; rules "
                                 f"could not tell them apart", first)
        if kind == "meter":
            unit_tok = args[1].children[0]
            unit = str(unit_tok)
            if unit not in ("packets", "bytes"):
                raise self.error(f"a meter counts 'packets' or 'bytes', not '{unit}'", unit_tok)
        window_tok, slots_tok = (a.children[0] for a in args[head:head + 2])
        window, slots = self._number(window_tok), self._number(slots_tok)
        if not 1 <= window < 1 << TIMESTAMP_BITS:
            raise self.error(f"a window of {window} µs: it must be 1 .. 2^{TIMESTAMP_BITS} - 1 "
                             f"(timestamps are {TIMESTAMP_BITS}-bit microseconds)", window_tok)
        if not 1 <= slots <= MAX_SLOTS:
            raise self.error(f"{slots} slots: a state has 1 .. {MAX_SLOTS} slots", slots_tok)
        key, buckets = None, 1
        if len(args) == head + 4:
            key_arg, buckets_arg = args[head + 2:]
            if key_arg.data != "name_arg" or buckets_arg.data != "int_arg":
                raise self.error(f"{ann} takes {usage.split('(', 1)[1][:-1]}", node)
            key_tok, buckets_tok = key_arg.children[0], buckets_arg.children[0]
            k = self._field_arg(ann, [key_arg], node, count=1)
            self._message_field(spec, ann, k, key_tok)
            if k.qname in ascii_fields:
                raise self.error(f"key '{k.qname}' is an ascii field: its low bits (trailing "
                                 f"spaces) would put most keys in one bucket; key on a numeric "
                                 f"identifier", key_tok)
            buckets = self._number(buckets_tok)
            if buckets < 1 or buckets & (buckets - 1) or buckets > slots:
                raise self.error(f"{buckets} buckets: a power of two, at most the slots "
                                 f"({slots})", buckets_tok)
            key = k.qname
        time_field, time_unit = spec.timestamp or (None, None)
        return StateVar(kind, name, window, slots, field_name, width, unit, key, buckets,
                        spec.message_bytes, getattr(node.meta, "line", None), time_field,
                        time_unit)

    def _timestamp(self, spec: Spec, args: list, node, ascii_fields: set[str]) -> None:
        """`query_timestamp(h.f, ns|us|ms)`: a message field that holds its time."""
        if spec.timestamp is not None:
            raise self.error("query_timestamp is declared twice", node)
        if len(args) != 2 or any(a.data != "name_arg" for a in args):
            raise self.error("query_timestamp takes a field and a unit: "
                             "query_timestamp(header.field, ns|us|ms)", node)
        f = self._field_arg("query_timestamp", args[:1], node, count=1)
        tok = args[0].children[0]
        self._message_field(spec, "query_timestamp", f, tok)
        if f.qname in ascii_fields:
            raise self.error(f"query_timestamp({f.qname}): an ascii field holds no time", tok)
        if f.width > 64:
            raise self.error(f"query_timestamp({f.qname}): the field is {f.width} bits; at "
                             f"most 64", tok)
        unit_tok = args[1].children[0]
        if str(unit_tok) not in TIME_UNITS:
            raise self.error(f"a timestamp's unit is ns, us or ms, not '{unit_tok}'", unit_tok)
        spec.timestamp = (f.qname, str(unit_tok))

    def _message_field(self, spec: Spec, ann: str, f: Field, tok) -> None:
        if spec.packet_header and f.header == spec.packet_header.name:
            raise self.error(f"{ann}: '{f.qname}' is in the framing header; state reads "
                             f"message fields", tok)

    @staticmethod
    def _number(tok) -> int:
        text = str(tok).replace("_", "")
        return int(text, 16 if text[:2] in ("0x", "0X") else 10)

    def _header(self, node: lark.Tree) -> None:
        name_tok = node.children[0]
        if name_tok in self.headers:
            raise self.error(f"header '{name_tok}' is declared twice", name_tok)
        fields, offset, seen = [], 0, set()
        for fnode in node.children[1:]:
            width_tok, fname = fnode.children
            width = int(width_tok)
            if width == 0:
                raise self.error(f"field '{fname}' has width 0", width_tok)
            if fname in seen:
                raise self.error(f"field '{fname}' is declared twice in header '{name_tok}'",
                                 fname)
            seen.add(str(fname))
            fields.append(Field(str(name_tok), str(fname), width, offset))
            offset += width
        self.headers[str(name_tok)] = Header(str(name_tok), tuple(fields))
        self.header_nodes[str(name_tok)] = name_tok
        self.fields.update((f.qname, f) for f in fields)

    def _annotation(self, node: lark.Tree) -> None:
        tok = node.children[0]
        name = str(tok).split()[-1].lstrip("@")
        args = [a for a in node.children[1:] if a is not None]
        self.annotations.append((name, args, node))

    def _field_arg(self, ann: str, args: list, node, count: int) -> Field:
        if len(args) != count or args[0].data != "name_arg":
            raise self.error(f"{ann} takes one field, written header.field", node)
        tok = args[0].children[0]
        qname = str(tok)
        fields = self.fields
        if "." not in qname:
            raise self.error(f"{ann}({qname}): write the field as header.field", tok)
        hname = qname.split(".", 1)[0]
        if hname not in self.headers:
            raise self.error(f"unknown header '{hname}' in {ann}({qname})", tok)
        if qname not in fields:
            raise self.error(f"header '{hname}' has no field '{qname.split('.', 1)[1]}'", tok)
        return fields[qname]

    def _int_args(self, ann: str, args: list, node, count: int) -> list[int]:
        if len(args) != count or any(a.data != "int_arg" for a in args):
            raise self.error(f"{ann} takes {count} number{'s' if count > 1 else ''}", node)
        return [int(str(a.children[0]).replace("_", ""), 0) for a in args]

    def _framing(self, spec: Spec, args: list, node) -> None:
        names = [str(a.children[0]) for a in args if a.data == "name_arg"]
        if len(names) != len(args) or not names:
            raise self.error("framing takes 'single' or 'moldudp64, <header>'", node)
        if names[0] == "single" and len(names) == 1:
            spec.framing, spec.packet_header = "single", None
            return
        if names[0] == "moldudp64" and len(names) == 2:
            header = self.headers.get(names[1])
            if header is None:
                raise self.error(f"unknown header '{names[1]}' in framing", node)
            if header.bits != MOLDUDP64_HEADER_BITS:
                raise self.error(f"a MoldUDP64 header is {MOLDUDP64_HEADER_BITS} bits (session "
                                 f"80, sequence 64, count 16); '{header.name}' is {header.bits}",
                                 node)
            spec.framing = "moldudp64"
            spec.packet_header = [h for h in spec.headers if h.name == header.name][0]
            return
        raise self.error("framing takes 'single' or 'moldudp64, <header>'", node)
