"""The rule language's syntax: a rules text split into rules, the lexer, the parser of one rule.

A rules file holds one rule per line, or several separated by ';'; '#' starts a comment
(outside quotes). The grammar of one rule:

    rule       := filter ':' action
    filter     := conj ('or' conj)*
    conj       := neg ('and' neg)*
    neg        := 'not' neg | primary
    primary    := '(' filter ')' | 'true' | 'false' | comparison
    comparison := operand OP operand                   OP: == != < <= > >= (= means ==)
                | operand ['not'] 'in' '{' [operand (',' operand)*] '}'   (`in {}` is false)
    operand    := field | state | INT['/'LEN] | HEX['/'LEN] | STRING | WORD | IPV4['/'LEN]
    state      := NAME | 'avg' '(' field ')' | 'rate' '(' NAME ')'    (declared state)
    actions    := action (',' action)*
    action     := 'fwd' '(' PORT (',' PORT)* ')'                PORT: INT or HEX, 1..511
                | ('count' | 'meter' | 'avg') '(' NAME ')'      (update actions)
                | 'drop' | NAME ['(' [ARG (',' ARG)*] ')']      (one verdict: docs/actions.md)
                | 'priority' '(' INT ')'                        (the verdict's priority)

One side of a comparison is a field (`header.field`, or a bare `field` when unique); the
other is a constant: a number, a quoted string or bare word for character fields, or a dotted
IPv4 address with an optional prefix length. A side may instead be declared state (a counter
by its name, `avg(field)`, `rate(meter)`; docs/stateful.md), compared with a number. Every
error names the line and column of the offending token and what was expected there.

A regular-expression lexer and recursive descent, hand-written for speed (`compiler.rules`
says why). The parser knows no spec: each comparison and `in` set goes to its typer
(`compiler.rule_typing.RuleTyper`), which resolves fields and checks constants. The lexer
also reads a rule's *shape*, in which every constant is one SLOT character (`\\x00`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from compiler.ast import And, Const, Filter, Not, Or
from compiler.errors import RuleError

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "fwd"})
# Parentheses nest at most this deep. Parsing, instantiating and normalising recurse once or
# a few times per level, so `compiler.rules.deep_recursion()` raises Python's limit to fit.
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


class Token(NamedTuple):
    type: str  # NAME INT HEX STRING IPV4 OP PUNCT KEYWORD END, or SLOT in a rule's shape
    value: str
    line: int
    column: int


class Call(NamedTuple):
    """`name(arg)` in a filter (`avg(price)`, `rate(m)`) or an update action (`count(c)`)."""

    name: Token
    arg: Token


class VerdictCall(NamedTuple):
    """`drop`, or `name(arg, ...)` of a declared action, and the rule's `priority(N)` (None:
    0), as parsed; `compiler.rule_typing.RuleTyper.verdict` types it."""

    name: Token
    args: list[Token]
    priority: Token | None


UPDATE_ACTIONS = ("count", "meter", "avg")


def split_rules(text: str) -> list[tuple[str, int, int]]:
    """Rule texts with the (line, column) of their first character; comments removed."""
    out = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        out += line_rules(line, lineno)
    return out


def line_rules(line: str, lineno: int) -> list[tuple[str, int, int]]:
    """`split_rules` of one line (without its newline), numbered `lineno`."""
    if "#" not in line and ";" not in line:  # quotes only matter around ';' and '#'
        seg = line.strip()
        return [(seg, lineno, len(line) - len(line.lstrip()) + 1)] if seg else []
    out = []
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


def tokenize(text: str, line: int, column: int, source: str | None) -> list[Token]:
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


class Parser:
    """Recursive descent over one rule's tokens. `typer` (a `compiler.rule_typing.RuleTyper`)
    makes the filter of each comparison and reports errors."""

    def __init__(self, tokens: list[Token], typer):
        self.tokens = tokens
        self.i = 0
        self.depth = 0
        self.typer = typer
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
        raise self.typer.error(f"unexpected {got}; expected {expected}", tok)

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
                raise self.typer.error(f"parentheses nested more than {MAX_NESTING} deep",
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
            return self.typer.compare(left, tok, self.operand())
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
            return self.typer.member(left, values, negated)
        self.fail("a comparison (== != < <= > >=) or 'in'")

    def operand(self) -> Token | Call:
        tok = self.peek()
        if tok.type not in ("NAME", "INT", "HEX", "STRING", "IPV4", "SLOT"):
            self.fail("a field or a constant")
        self.take()
        if tok.type == "NAME" and self.at("("):  # `avg(price)`, `rate(m)`: the typer checks
            return self.call(tok)
        return tok

    def call(self, name: Token) -> Call:
        self.take()
        if self.peek().type != "NAME":
            self.fail("a name")
        arg = self.take()
        self.expect(")")
        return Call(name, arg)

    def action(self) -> tuple[list[Token], list[Call], "VerdictCall | None"]:
        """The ports of the rule's `fwd` (if any), its update actions in order, and its
        verdict (`drop` or a declared action, with its `priority(N)`), if any."""
        ports: list[Token] | None = None
        updates: list[Call] = []
        verdict: Token | None = None
        args: list[Token] = []
        priority: Token | None = None
        while True:
            tok = self.peek()
            if self.at("fwd"):
                if ports is not None:
                    raise self.typer.error("fwd(...) is given twice; list every port in one "
                                           "fwd(...)", tok)
                self.take()
                self.expect("(")
                ports = [self.port()]
                while self.at(","):
                    self.take()
                    ports.append(self.port())
                self.expect(")", "',' or ')'")
            elif tok.type == "NAME" and tok.value in UPDATE_ACTIONS:
                self.take()
                if not self.at("("):
                    self.fail("'('")
                updates.append(self.call(tok))
            elif tok.type == "NAME" and tok.value == "priority":
                if priority is not None:
                    raise self.typer.error("priority(...) is given twice", tok)
                self.take()
                self.expect("(")
                if self.peek().type not in ("INT", "HEX", "SLOT"):
                    self.fail("a priority (a number)")
                priority = self.take()
                self.expect(")")
            elif tok.type == "NAME":  # drop, or an action the spec declares: the typer checks
                if verdict is not None:
                    raise self.typer.error(
                        f"a rule takes one action besides fwd; '{verdict.value}' is given "
                        f"already (docs/actions.md)", tok)
                verdict = self.take()
                if self.at("("):
                    self.take()
                    if not self.at(")"):
                        args.append(self.argument())
                        while self.at(","):
                            self.take()
                            args.append(self.argument())
                    self.expect(")", "',' or ')'")
            else:
                self.fail("an action: fwd(port, ...), drop, an action the spec declares, "
                          "priority(n), count(counter), meter(meter) or avg(field)")
            if self.peek().type == "END":
                if verdict is None and priority is not None:
                    raise self.typer.error("priority(...) ranks a rule's action (drop or a "
                                           "declared one); this rule names none", priority)
                call = None if verdict is None else VerdictCall(verdict, args, priority)
                return ports or [], updates, call
            if not self.at(","):
                self.fail("the end of the rule (or ',' and another action)")
            self.take()

    def argument(self) -> Token:
        if self.peek().type not in ("INT", "HEX", "IPV4", "SLOT"):
            self.fail("an argument (a number or an IPv4 address)")
        return self.take()

    def port(self) -> Token:
        if self.peek().type not in ("INT", "HEX", "SLOT"):
            self.fail("a port number")
        return self.take()
