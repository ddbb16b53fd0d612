"""The rule language: text -> `Rule`s, type-checked against a spec.

A rules file holds one rule per line, or several separated by ';'; '#' starts a comment
(outside quotes). The grammar of one rule:

    rule       := filter ':' action
    filter     := conj ('or' conj)*
    conj       := neg ('and' neg)*
    neg        := 'not' neg | primary
    primary    := '(' filter ')' | 'true' | 'false' | comparison
    comparison := operand OP operand                   OP: == != < <= > >= (= means ==)
                | operand ['not'] 'in' '{' [operand (',' operand)*] '}'   (`in {}` is false)
    operand    := field | INT['/'LEN] | HEX['/'LEN] | STRING | WORD | IPV4['/'LEN]
    action     := 'fwd' '(' PORT (',' PORT)* ')'                PORT: INT or HEX, 1..511

One side of a comparison is a field (`header.field`, or a bare `field` when unique); the
other is a constant: a number, a quoted string or bare word for character fields, or a dotted
IPv4 address with an optional prefix length. Every error names the line and column of the
offending token and what was expected there.

Speed. A subscription set of 100,000 rules must parse in about a second, and real ones are
written from a few templates (`stock == "X" and price > N : fwd(P)`). So the parser is
hand-written (a regular-expression lexer and recursive descent; a parser generator took
fifteen seconds) and parses each rule *shape* once: constants are cut out of the text, the
shape with numbered slots is parsed and cached, and each rule instantiates its shape with its
own constants (still type-checked one by one, with their own positions). A shape that fails
to parse is parsed again from the original text, so syntax errors point at the real column.
"""

from __future__ import annotations

import contextlib
import re
from itertools import accumulate
import sys
from pathlib import Path
from typing import NamedTuple

from compiler.ast import MAX_PORT, OPS, And, Atom, Const, Filter, Not, Or, Rule
from compiler.errors import RuleError, SpecError
from compiler.spec import QueryField, Spec

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "fwd"})
# Parentheses nest at most this deep. Parsing, instantiating and normalising recurse once or
# a few times per level, so `deep_recursion()` raises Python's limit to fit this many.
MAX_NESTING = 1000

_LEXER = re.compile(r"""
    (?P<SPACE>[ \t\r]+)
  | (?P<SLOT>\x00)
  | (?P<IPV4>[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(?:/[0-9]+)?)
  | (?P<HEX>0[xX][0-9a-fA-F]+(?:/[0-9]+)?)
  | (?P<INT>[0-9]+(?:/[0-9]+)?)
  | (?P<NAME>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)
  | (?P<STRING>"[^"\n]*"|'[^'\n]*')
  | (?P<OP>==|!=|<=|>=|<|>|=)
  | (?P<PUNCT>[(){},:])
""", re.VERBOSE)

# The constants cut out of a rule to find its shape (see "Speed" above).
_CONSTANT = re.compile(r"""
    "[^"]*" | '[^']*'
  | (?<![A-Za-z0-9_.])(?:[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+ | 0[xX][0-9a-fA-F]+ | [0-9]+)(?:/[0-9]+)?
    (?![A-Za-z0-9_./])
""", re.VERBOSE)


# The same, capturing: `_SPLIT(text)` alternates text between constants and the constants.
# The lookahead only says what every branch starts with; it lets the search skip ahead.
_SPLIT = re.compile("((?=[\"'0-9])(?:" + _CONSTANT.pattern + "))", re.VERBOSE).split


class _Fallback(Exception):
    """A rule the shape's fast instantiation does not handle: take the general path."""


class Token(NamedTuple):
    type: str  # NAME INT HEX STRING IPV4 OP PUNCT KEYWORD END, or SLOT in a rule's shape
    value: str
    line: int
    column: int


def load_rules(path: str | Path, spec: Spec) -> list[Rule]:
    path = Path(path)
    return parse_rules(path.read_text(), spec, source=str(path))


def parse_rules(text: str, spec: Spec, source: str | None = None) -> list[Rule]:
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
    builder = _RuleBuilder(spec, source)
    with deep_recursion():
        return [builder.rule(seg, line, col) for seg, line, col in split_rules(text)]


@contextlib.contextmanager
def deep_recursion():
    """Room for MAX_NESTING levels of parentheses in the recursive parser and normaliser."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 6 * MAX_NESTING + 2000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def parse_filter(text: str, spec: Spec, source: str | None = None) -> Filter:
    """A filter alone (as a Kafka view's `camus.filter` config holds it)."""
    segments = split_rules(text.removeprefix("\ufeff"))
    if len(segments) != 1:
        raise RuleError("a filter is one expression" if segments else "empty filter",
                        1, 1, source)
    seg, line, col = segments[0]
    if "\x00" in seg:
        raise RuleError("unexpected character '\\x00'", line, col + seg.index("\x00"), source)
    builder = _RuleBuilder(spec, source)
    with deep_recursion():
        parser = _Parser(_tokenize(seg, line, col, source), builder)
        f = parser.filter()
        parser.expect_end()
        return builder.instantiate(f, [])  # parsed from the text itself: no slots to fill


def split_rules(text: str) -> list[tuple[str, int, int]]:
    """Rule texts with the (line, column) of their first character; comments removed."""
    out = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if "#" not in line and ";" not in line:  # quotes only matter around ';' and '#'
            seg = line.strip()
            if seg:
                out.append((seg, lineno, len(line) - len(line.lstrip()) + 1))
            continue
        start, quote = 0, None
        for i, ch in enumerate(line + "\n"):
            # An unclosed quote ends at the end of the line: the rule is kept, and the lexer
            # reports the stray quote (a rule is never silently swallowed).
            if quote and ch != "\n":
                if ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch in ";#\n":
                seg = line[start:i]
                if seg.strip():
                    out.append((seg.strip(), lineno, start + len(seg) - len(seg.lstrip()) + 1))
                if ch == "#":
                    break
                start = i + 1
    return out


def _tokenize(text: str, line: int, column: int, source: str | None) -> list[Token]:
    tokens, pos, n = [], 0, len(text)
    match = _LEXER.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            if text[pos] in "\"'":
                raise RuleError(f"unterminated string: no closing {text[pos]} on this line", line,
                                column + pos, source)
            raise RuleError(f"unexpected character {text[pos]!r}", line, column + pos, source)
        kind = m.lastgroup
        if kind != "SPACE":
            value = m.group()
            if kind == "NAME" and value in KEYWORDS:
                kind = "KEYWORD"
            tokens.append(Token(kind, value, line, column + pos))
        pos = m.end()
    return tokens


class _Parser:
    """Recursive descent over one rule's tokens."""

    def __init__(self, tokens: list[Token], builder: "_RuleBuilder"):
        self.tokens = tokens
        self.i = 0
        self.depth = 0
        self.b = builder
        last = tokens[-1]
        self.end = Token("END", "", last.line, last.column + len(last.value))

    def peek(self) -> Token:
        return self.tokens[self.i] if self.i < len(self.tokens) else self.end

    def take(self) -> Token:
        tok = self.peek()
        self.i += 1
        return tok

    def at(self, value: str) -> bool:
        tok = self.peek()
        return tok.value == value and tok.type in ("KEYWORD", "PUNCT", "OP")

    def expect(self, value: str, what: str | None = None) -> Token:
        if not self.at(value):
            self.fail(what or f"'{value}'")
        return self.take()

    def fail(self, expected: str):
        tok = self.peek()
        got = "end of rule" if tok.type == "END" else repr(tok.value)
        raise self.b.error(f"unexpected {got}; expected {expected}", tok)

    def expect_end(self) -> None:
        if self.peek().type != "END":
            self.fail("'and', 'or' or the end of the filter")

    def filter(self) -> Filter:
        items = [self.conj()]
        while self.at("or"):
            self.take()
            items.append(self.conj())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def conj(self) -> Filter:
        items = [self.neg()]
        while self.at("and"):
            self.take()
            items.append(self.neg())
        return items[0] if len(items) == 1 else And(tuple(items))

    def neg(self) -> Filter:
        # A run of 'not's is counted, not recursed into: `not not x` is x.
        negations = 0
        while self.at("not"):
            self.take()
            negations += 1
        f = self.primary()
        return Not(f) if negations % 2 else f

    def primary(self) -> Filter:
        if self.at("("):
            if self.depth >= MAX_NESTING:
                raise self.b.error(f"parentheses nested more than {MAX_NESTING} deep",
                                   self.peek())
            self.take()
            self.depth += 1
            f = self.filter()
            self.depth -= 1
            self.expect(")", "')' or 'and' or 'or'")
            return f
        if self.at("true"):
            self.take()
            return Const(True)
        if self.at("false"):
            self.take()
            return Const(False)
        left = self.operand()
        tok = self.peek()
        if tok.type == "OP":
            self.take()
            return self.b.compare(left, tok, self.operand())
        negated = self.at("not")
        if negated:
            self.take()
            if not self.at("in"):
                self.fail("'in'")
        if self.at("in"):
            self.take()
            self.expect("{")
            values = []
            if not self.at("}"):  # `in {}` is false, `not in {}` true
                values.append(self.operand())
                while self.at(","):
                    self.take()
                    values.append(self.operand())
            self.expect("}", "',' or '}'")
            return self.b.member(left, values, negated)
        self.fail("a comparison (== != < <= > >=) or 'in'")

    def operand(self) -> Token:
        tok = self.peek()
        if tok.type not in ("NAME", "INT", "HEX", "STRING", "IPV4", "SLOT"):
            self.fail("a field or a constant")
        return self.take()

    def action(self) -> list[Token]:
        self.expect("fwd", "an action: fwd(port, ...)")
        self.expect("(")
        ports = [self.port()]
        while self.at(","):
            self.take()
            ports.append(self.port())
        self.expect(")", "',' or ')'")
        if self.peek().type != "END":
            self.fail("the end of the rule")
        return ports

    def port(self) -> Token:
        if self.peek().type not in ("INT", "HEX", "SLOT"):
            self.fail("a port number")
        return self.take()


class _Compare(NamedTuple):
    """A comparison in a rule's shape: its constant may still be a slot."""

    field: QueryField
    op: str
    constant: Token
    op_token: Token | None = None


class _Shape(NamedTuple):
    """A parsed rule shape: its tree and ports, the column it was parsed at, and its fast
    instantiation (None if it has none)."""

    parsed: tuple[Filter, list[Token], list[int]]
    column: int
    fast: object


class _RuleBuilder:
    """Turns tokens into type-checked atoms: resolves fields, converts and checks constants."""

    def __init__(self, spec: Spec, source: str | None):
        self.spec, self.source = spec, source
        self.fields: dict[str, QueryField | None] = {}
        self.shapes: dict[str, _Shape] = {}
        # Where the rule being instantiated is, and its shape's slots and first column
        # (shape tokens carry the position of the rule the shape was first parsed from).
        self.slot_columns: list[int] = []
        self.line: int | None = None
        self.column = 0
        self.origin: int | None = None
        # The fast path's caches: a slot constant's (value, prefix length) per (field, op),
        # and port sets per the ports' texts (rules share the frozensets).
        self.converted: dict[tuple[QueryField, str], dict[str, tuple[int, int | None]]] = {}
        self.port_sets: dict[str | tuple[str, ...], frozenset[int]] = {}

    def error(self, message: str, tok: Token) -> RuleError:
        return RuleError(message, tok.line, tok.column, self.source)

    def rule(self, text: str, line: int, column: int) -> Rule:
        if "\x00" in text:  # the shape's slot marker: never valid in a rule's own text
            raise RuleError("unexpected character '\\x00'", line, column + text.index("\x00"),
                            self.source)
        parts = _SPLIT(text)  # text, constant, text, ..., text
        shape = "\x00".join(parts[::2])
        plan = self.shapes.get(shape)
        if plan is None:
            try:
                parsed = self.parse(_tokenize(shape, line, column, self.source))
            except RuleError:
                # Positions in a shape are off by the constants' lengths: report from the text.
                self.parse(_tokenize(text, line, column, self.source))
                raise
            plan = self.shapes[shape] = _Shape(parsed, column, self.fast(*parsed))
        consts = parts[1::2]
        # ends[2 * i] is where constant i starts in the text (and ends[2 * i + 1] its end).
        ends = list(accumulate(map(len, parts)))
        if plan.fast is not None:
            try:
                return plan.fast(consts, ends, line, column, text)
            except (_Fallback, RuleError):
                pass  # the general path below gives the error, or the rule
        values = [Token(_constant_type(c), c, line, column + ends[2 * i])
                  for i, c in enumerate(consts)]
        f, port_tokens, slot_columns = plan.parsed
        self.slot_columns, self.line, self.column, self.origin = \
            slot_columns, line, column, plan.column
        return Rule(self.instantiate(f, values), self.ports(port_tokens, values), line, text)

    def fast(self, f, port_tokens: list[Token], slot_columns: list[int]):
        """The shape's instantiation as one function of its constants' texts and columns, or
        None when the shape has a constant that is not a slot. The function raises
        _Fallback (or RuleError) at anything it has not seen work: the general path then
        builds the rule, or reports the error, exactly as it always does."""
        build = self._fast_filter(f)
        if build is None or any(t.type != "SLOT" for t in port_tokens):
            return None
        slots = tuple(int(t.value) for t in port_tokens)
        one = slots[0] if len(slots) == 1 else None  # `fwd(p)`: the text alone is the key
        port_sets = self.port_sets
        new = object.__new__

        def instantiate(consts, ends, line, column, text):
            filt = build(consts, ends, line, column)
            key = consts[one] if one is not None else tuple([consts[i] for i in slots])
            ports = port_sets.get(key)
            if ports is None:
                toks = [Token(_constant_type(consts[i]), consts[i], line, column + ends[2 * i])
                        for i in slots]
                ports = port_sets[key] = self.ports(toks, toks)
            rule = new(Rule)
            d = rule.__dict__
            d["filter"], d["ports"], d["line"], d["text"] = filt, ports, line, text
            return rule

        return instantiate

    def _fast_filter(self, f):
        if isinstance(f, _Compare):
            if f.constant.type != "SLOT":
                return None
            i, q, op = int(f.constant.value), f.field, f.op
            start = 2 * i
            known = self.converted.setdefault((q, op), {})
            new = object.__new__

            def atom(consts, ends, line, column):
                value = known.get(consts[i])
                if value is None:
                    value = self._convert(q, op, consts[i])
                a = new(Atom)
                d = a.__dict__
                d["field"], d["op"], d["value"], d["prefix_len"], d["line"], d["column"] = \
                    q, op, value[0], value[1], line, column + ends[start]
                return a
            return atom
        if isinstance(f, (And, Or)):
            items = [self._fast_filter(i) for i in f.items]
            if None in items:
                return None
            cls, new = type(f), object.__new__
            if len(items) == 2:  # the usual `a and b`
                first, second = items

                def pair(consts, ends, line, column):
                    j = new(cls)
                    j.__dict__["items"] = (first(consts, ends, line, column),
                                           second(consts, ends, line, column))
                    return j
                return pair

            def junction(consts, ends, line, column):
                j = new(cls)
                j.__dict__["items"] = tuple([g(consts, ends, line, column) for g in items])
                return j
            return junction
        if isinstance(f, Not):
            item = self._fast_filter(f.item)
            if item is None:
                return None
            return lambda consts, ends, line, column: Not(item(consts, ends, line, column))
        return lambda consts, ends, line, column: f  # Const: shared, as instantiate() does

    def _convert(self, q: QueryField, op: str, text: str) -> tuple[int, int | None]:
        """A slot constant's value for `q op text`, remembered; errors go the general way."""
        tok = Token(_constant_type(text), text, None, None)
        try:
            a = self.atom(q, op, tok, tok)
        except RuleError:
            raise _Fallback from None
        value = self.converted[q, op][text] = (a.value, a.prefix_len)
        return value

    def parse(self, tokens: list[Token]) -> tuple[Filter, list[Token], list[int]]:
        slot, slot_columns = 0, []
        for i, tok in enumerate(tokens):
            if tok.type == "SLOT":
                tokens[i] = tok._replace(value=str(slot))
                slot_columns.append(tok.column)
                slot += 1
        if not tokens:
            raise RuleError("empty rule", None, None, self.source)
        p = _Parser(tokens, self)
        f = p.filter()
        if not p.at(":"):
            p.fail("':' before the action" if p.peek().type != "END" else "':' and an action")
        p.take()
        return f, p.action(), slot_columns

    def instantiate(self, f, values: list[Token]) -> Filter:
        if isinstance(f, _Compare):
            tok = values[int(f.constant.value)] if f.constant.type == "SLOT" \
                else self.unshape(f.constant, values)
            return self.atom(f.field, f.op, tok, self.unshape(f.op_token, values))
        if isinstance(f, (And, Or)):
            return type(f)(tuple(self.instantiate(i, values) for i in f.items))
        if isinstance(f, Not):
            return Not(self.instantiate(f.item, values))
        return f

    def unshape(self, tok: Token | None, values: list[Token]) -> Token | None:
        """A shape token moved to its line and column in the rule's text (the shape was
        parsed at the position of the first rule of that shape, and slots are 1 character)."""
        if tok is None or self.origin is None:
            return tok
        shift = sum(len(v.value) - 1 for col, v in zip(self.slot_columns, values)
                    if col < tok.column)
        return tok._replace(line=self.line, column=tok.column - self.origin + self.column + shift)

    def ports(self, tokens: list[Token], values: list[Token]) -> frozenset[int]:
        ports = set()
        for tok in tokens:
            if tok.type == "SLOT":
                tok = values[int(tok.value)]
            if tok.type == "INT" and tok.value.isdigit():
                port = int(tok.value)
            elif tok.type == "HEX" and "/" not in tok.value:
                port = int(tok.value, 16)
            else:
                raise self.error(f"expected a port number, not {tok.value!r}", tok)
            if not 1 <= port <= MAX_PORT:
                raise self.error(f"port {port} is out of range (1..{MAX_PORT})", tok)
            ports.add(port)
        return frozenset(ports)

    def lookup(self, name: str) -> QueryField | None:
        if name not in self.fields:
            try:
                self.fields[name] = self.spec.resolve(name)
            except SpecError:
                self.fields[name] = None
        return self.fields[name]

    def field(self, tok: Token) -> QueryField:
        if tok.type != "NAME":
            raise self.error(f"expected a field name, not {tok.value!r}", tok)
        q = self.lookup(tok.value)
        if q is None:
            try:
                self.spec.resolve(tok.value)
            except SpecError as exc:
                raise self.error(exc.message, tok) from None
        return q

    def compare(self, left: Token, op_token: Token, right: Token) -> _Compare:
        op = "==" if op_token.value == "=" else op_token.value
        # `price > 50` is the usual order; `50 < price` is accepted and flipped.
        if left.type == "NAME" and (self.lookup(left.value) or "." in left.value) \
                or right.type != "NAME" or not self.lookup(right.value):
            return _Compare(self.field(left), op, right, op_token)
        flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        return _Compare(self.field(right), flipped, left, op_token)

    def member(self, subject: Token, values: list[Token], negated: bool) -> Filter:
        field = self.field(subject)
        if not values:
            return Const(negated)
        atoms = tuple(_Compare(field, "==", v) for v in values)
        any_of = atoms[0] if len(atoms) == 1 else Or(atoms)
        return Not(any_of) if negated else any_of

    def atom(self, field: QueryField, op: str, tok: Token, op_tok: Token | None = None) -> Atom:
        assert op in OPS, op
        op_tok = op_tok or tok
        if field.kind == "exact" and op not in ("==", "!="):
            raise self.error(f"'{op}' on exact-match field '{field.qname}': only == and != are "
                             f"allowed (it is declared query_field_exact)", op_tok)
        if field.kind == "lpm" and op not in ("==", "!="):
            raise self.error(f"'{op}' on prefix-match field '{field.qname}': only == and != "
                             f"are allowed (it is declared query_field_lpm)", op_tok)
        value, prefix_len = self.constant(field, tok)
        if prefix_len is not None:
            if op not in ("==", "!="):
                raise self.error(f"a prefix can only be compared with == or !=, not '{op}'",
                                 op_tok)
            if field.kind == "exact" and prefix_len != field.width:
                raise self.error(f"prefix match on exact-match field '{field.qname}'", tok)
            if prefix_len == field.width:
                prefix_len = None
        return Atom(field, op, value, prefix_len, tok.line, tok.column)

    def constant(self, field: QueryField, tok: Token) -> tuple[int, int | None]:
        text = tok.value
        if tok.type in ("INT", "HEX"):
            digits, _, plen = text.partition("/")
            value = int(digits, 16) if tok.type == "HEX" else int(digits)
            if value > field.max_value:
                raise self.error(f"constant {digits} does not fit in {field.width}-bit field "
                                 f"'{field.qname}' (max {field.max_value})", tok)
            return self.prefix(field, value, plen, tok)
        if tok.type == "IPV4":
            addr, _, plen = text.partition("/")
            octets = [int(o) for o in addr.split(".")]
            if any(o > 255 for o in octets):
                raise self.error(f"{addr} is not an IPv4 address", tok)
            if field.width != 32:
                raise self.error(f"an IPv4 address needs a 32-bit field; '{field.qname}' has "
                                 f"{field.width} bits", tok)
            return self.prefix(field, int.from_bytes(bytes(octets), "big"), plen, tok)
        if tok.type in ("STRING", "NAME"):
            if tok.type == "NAME" and self.lookup(text) is not None:
                raise self.error(f"'{text}' is a field: comparing two fields is not supported "
                                 f"(write \"{text}\" to mean the text)", tok)
            if tok.type == "NAME" and "." in text:
                raise self.error(f"unknown field '{text}' (a constant with a '.' must be quoted)",
                                 tok)
            chars = text[1:-1] if tok.type == "STRING" else text
            if field.width % 8:
                raise self.error(f"a string needs a field of whole bytes; '{field.qname}' has "
                                 f"{field.width} bits", tok)
            try:
                raw = chars.encode("ascii")
            except UnicodeEncodeError:
                raise self.error(f"string {text} is not ASCII", tok) from None
            size = field.width // 8
            if len(raw) > size:
                raise self.error(f"string {text} is {len(raw)} characters; field "
                                 f"'{field.qname}' holds {size}", tok)
            return int.from_bytes(raw.ljust(size, b" "), "big"), None
        raise self.error(f"expected a constant, not {text!r}", tok)

    def prefix(self, field: QueryField, value: int, plen: str, tok: Token) -> tuple[int, int | None]:
        """`value/plen`: the prefix's network value (host bits cleared) and its length."""
        if not plen:
            return value, None
        length = int(plen)
        if length > field.width:
            raise self.error(f"prefix length /{length} is longer than the {field.width}-bit "
                             f"field '{field.qname}'", tok)
        mask = ((1 << length) - 1) << (field.width - length)
        return value & mask, length


def _constant_type(text: str) -> str:
    if text[0] in "\"'":
        return "STRING"
    if "." in text:
        return "IPV4"
    if text[:2] in ("0x", "0X"):
        return "HEX"
    return "INT"
