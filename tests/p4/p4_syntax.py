"""Reading the P4_16 subset that compiler/p4 emits into nested tuples, for tests/p4/p4_interp.py.

`parse_program(text)` returns a `Program`: header and struct types, the header instances and
metadata fields (with their `@field_list` marks), the parser's states with their statements
and transitions, actions, tables (keys with their `@name`s), control bodies and the
deparser's emit order. Expressions and statements become tuples such as
`("bin", "+", left, right)` or `("if", cond, then, else)`. Anything else raises
`Unsupported`: this reads our emitter's output, not P4 in general.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TOKEN = re.compile(r"""
    (?P<skip>\s+|//[^\n]*|/\*.*?\*/|\#[^\n]*)
  | (?P<num>\d+w0x[0-9a-fA-F]+|\d+w\d+|0x[0-9a-fA-F]+|\d+)
  | (?P<str>"[^"]*")
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>&&&|&&|\|\||==|!=|<=|>=|<<|>>|[<>+\-|&!=.,;:(){}\[\]@*~^])
""", re.S | re.X)


class Unsupported(Exception):
    """A construct outside the subset this interpreter knows."""


def tokenize(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if m is None:
            raise Unsupported(f"cannot read {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.lastgroup != "skip":
            out.append(m.group())
    return out


# ---- parsing into nested tuples ------------------------------------------------------------

BINARY = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="),
          ("<<", ">>"), ("+", "-"), ("*",)]


class Reader:
    def __init__(self, tokens: list[str]):
        self.t, self.i = tokens, 0

    def peek(self, k: int = 0) -> str | None:
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def next(self) -> str:
        tok = self.t[self.i]
        self.i += 1
        return tok

    def take(self, tok: str) -> bool:
        if self.peek() == tok:
            self.i += 1
            return True
        return False

    def want(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            raise Unsupported(f"expected {tok!r}, got {got!r} near {' '.join(self.t[self.i - 5:self.i + 5])}")

    def close_angle(self) -> None:
        # `bit<bit<8>>` style: a `>>` token closes two angle brackets.
        if self.peek() == ">>":
            self.t[self.i] = ">"
        else:
            self.want(">")

    def annotations(self) -> dict:
        out = {}
        while self.take("@"):
            name = self.next()
            args = []
            if self.take("("):
                while not self.take(")"):
                    args.append(self.next())
            out[name] = [a for a in args if a != ","]
        return out

    def type_(self) -> tuple:
        name = self.next()
        if name in ("bit", "varbit"):
            self.want("<")
            width = int(self.next())
            self.close_angle()
            return (name, width)
        return ("named", name)

    # expressions

    def expr(self, level: int = 0):
        if level == len(BINARY):
            return self.unary()
        left = self.expr(level + 1)
        while self.peek() in BINARY[level]:
            op = self.next()
            left = ("bin", op, left, self.expr(level + 1))
        return left

    def unary(self):
        if self.take("!"):
            return ("not", self.unary())
        if self.peek() == "(" and self.peek(1) in ("bit", "bool"):
            self.next()
            t = self.type_()
            self.want(")")
            return ("cast", t, self.unary())
        return self.postfix(self.primary())

    def primary(self):
        tok = self.next()
        if tok == "(":
            e = self.expr()
            self.want(")")
            return e
        if tok == "{":
            items = []
            while not self.take("}"):
                items.append(self.expr())
                self.take(",")
            return ("list", items)
        if tok[0].isdigit():
            if "w" in tok:
                w, v = tok.split("w")
                return ("num", int(v, 0), int(w))
            return ("num", int(tok, 0), None)
        if tok in ("true", "false"):
            return ("bool", tok == "true")
        return ("name", tok)

    def postfix(self, e):
        while True:
            if self.take("."):
                e = ("member", e, self.next())
            elif self.peek() == "<" and e[0] == "member" and e[2] == "lookahead":
                self.next()
                t = self.type_()
                self.close_angle()
                e = ("generic", e, t)
            elif self.take("("):
                args = []
                while not self.take(")"):
                    args.append(self.expr())
                    self.take(",")
                e = ("call", e, args)
            elif self.peek() == "[":
                self.next()
                hi = int(self.next())
                self.want(":")
                lo = int(self.next())
                self.want("]")
                e = ("slice", e, hi, lo)
            else:
                return e

    # statements

    def block(self) -> list:
        self.want("{")
        out = []
        while not self.take("}"):
            out.append(self.statement())
        return out

    def statement(self):
        if self.peek() == "{":
            return ("block", self.block())
        if self.take("if"):
            self.want("(")
            cond = self.expr()
            self.want(")")
            then = self.statement()
            other = self.statement() if self.take("else") else None
            return ("if", cond, then, other)
        if self.peek() == "bool" or (self.peek() == "bit" and self.peek(1) == "<"):
            t = self.type_()
            name = self.next()
            init = self.expr() if self.take("=") else None
            self.want(";")
            return ("var", t, name, init)
        target = self.expr()
        if self.take("="):
            value = self.expr()
            self.want(";")
            return ("assign", target, value)
        self.want(";")
        return ("expr", target)


@dataclass
class Table:
    name: str
    keys: list  # (expr, kind, control-plane name)
    entries: list = field(default_factory=list)


@dataclass
class Program:
    types: dict  # type name -> [(field, type)]
    instances: dict  # header instance -> type name
    meta: dict  # field -> (width, preserved)
    states: dict  # parser state -> (statements, transition)
    actions: dict  # name -> (params, body)
    tables: dict
    controls: dict  # name -> statements
    deparser: list  # instance names, emit order
    registers: dict = field(default_factory=dict)  # name -> (cell width, cells)


def parse_program(text: str) -> Program:
    r = Reader(tokenize(text))
    p = Program({}, {}, {}, {}, {}, {}, {}, [])
    while r.peek() is not None:
        tok = r.next()
        if tok in ("header", "struct"):
            name = r.next()
            r.want("{")
            fields = []
            while not r.take("}"):
                ann = r.annotations()
                t = r.type_()
                fname = r.next()
                r.want(";")
                fields.append((fname, t, "field_list" in ann))
            if name == "headers_t":
                p.instances = {f: t[1] for f, t, _ in fields}
            elif name == "metadata_t":
                p.meta = {f: (t[1], pres) for f, t, pres in fields}
            else:
                p.types[name] = [(f, t) for f, t, _ in fields]
        elif tok == "parser":
            r.next()
            _skip_params(r)
            r.want("{")
            while not r.take("}"):
                r.want("state")
                name = r.next()
                r.want("{")
                body = []
                while r.peek() != "transition":
                    body.append(r.statement())
                r.want("transition")
                if r.take("select"):
                    r.want("(")
                    keys = []
                    while not r.take(")"):
                        keys.append(r.expr())
                        r.take(",")
                    r.want("{")
                    cases = []
                    while not r.take("}"):
                        keyset = _keyset(r)
                        r.want(":")
                        cases.append((keyset, r.next()))
                        r.want(";")
                    trans = ("select", keys, cases)
                else:
                    trans = ("goto", r.next())
                    r.want(";")
                r.want("}")
                p.states[name] = (body, trans)
        elif tok == "control":
            name = r.next()
            _skip_params(r)
            r.want("{")
            while not r.take("}"):
                kind = r.next()
                if kind == "action":
                    aname = r.next()
                    r.want("(")
                    params = []
                    while not r.take(")"):
                        t = r.type_()
                        params.append((r.next(), t[1]))
                        r.take(",")
                    p.actions[aname] = (params, r.block())
                elif kind == "table":
                    t = _table(r)
                    p.tables[t.name] = t
                elif kind == "register":  # register<bit<W>>(N) name;
                    r.want("<")
                    t = r.type_()
                    r.close_angle()
                    r.want("(")
                    size = int(r.next(), 0)
                    r.want(")")
                    p.registers[r.next()] = (t[1], size)
                    r.want(";")
                elif kind == "apply":
                    body = r.block()
                    if name == "CamusDeparser":
                        p.deparser = [s[1][2][0][2] for s in body]  # packet.emit(hdr.X);
                    else:
                        p.controls[name] = body
                else:
                    raise Unsupported(f"control element {kind}")
        elif tok == "V1Switch":
            while r.next() != ";":
                pass
        else:
            raise Unsupported(f"top-level {tok}")
    return p


def _skip_params(r: Reader) -> None:
    r.want("(")
    depth = 1
    while depth:
        depth += {"(": 1, ")": -1}.get(r.next(), 0)


def _keyset(r: Reader):
    if r.take("default"):
        return ("default",)
    if r.peek() == "(":
        r.next()
        items = []
        while not r.take(")"):
            items.append(_keyset(r))
            r.take(",")
        return ("tuple", items)
    value = r.expr(len(BINARY) - 3)  # below &&& (which is its own token)
    if r.take("&&&"):
        return ("mask", value, r.expr(len(BINARY) - 3))
    return ("value", value)


def _table(r: Reader) -> Table:
    name = r.next()
    r.want("{")
    t = Table(name, [])
    while not r.take("}"):
        prop = r.next()
        r.want("=")
        if prop == "key":
            r.want("{")
            while not r.take("}"):
                e = r.expr()
                r.want(":")
                kind = r.next()
                ann = r.annotations()
                r.want(";")
                t.keys.append((e, kind, ann["name"][0].strip('"')))
        elif prop == "actions":
            r.want("{")
            while not r.take("}"):
                r.next()
        else:
            while r.next() != ";":
                pass
            continue
        r.take(";")
    return t
