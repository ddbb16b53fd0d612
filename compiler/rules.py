"""The rule language: text -> `Rule`s, type-checked against a spec.

The syntax (grammar, lexer, parser) is `compiler.rule_syntax`; resolving fields and checking
constants against the spec is `compiler.rule_typing`. This module holds the entry points and
what makes parsing fast.

Speed. A subscription set of 100,000 rules must parse in about a second, and real ones are
written from a few templates (`stock == "X" and price > N : fwd(P)`). So the parser is
hand-written (a regular-expression lexer and recursive descent; a parser generator took
fifteen seconds) and parses each rule *shape* once: constants are cut out of the text, the
shape with numbered slots is parsed and cached, and each rule instantiates its shape with its
own constants (still type-checked one by one, with their own positions). A shape that fails
to parse is parsed again from the original text, so syntax errors point at the real column.

A line that is exactly one rule `field == N : fwd(P)` with decimal constants (the paper's hICN
workload: a million of them) skips even the shape split: one regular expression reads it, and
once a line of its field and operator has gone the general way, the constants are checked
against the field's width and the ports looked up in the same cache the general path fills.
Anything it has not seen work (a first line, a constant too wide, a new port) goes the
general way, which builds the same rule or reports the same error.
"""

from __future__ import annotations

import contextlib
import re
from itertools import accumulate
import sys
from pathlib import Path
from typing import NamedTuple

from compiler.ast import And, Atom, Filter, Not, Or, Rule, state_atoms
from compiler.errors import RuleError
from compiler import formula
from compiler.formula import FORMULA_AT
from compiler.normalize import size_bound
from compiler.rule_syntax import KEYWORDS, MAX_NESTING, Parser, Token, VerdictCall, line_rules, \
    split_rules, tokenize
from compiler.rule_typing import Compare, RuleTyper, StateCompare
from compiler.spec import QueryField, Spec

# The constants cut out of a rule to find its shape (see "Speed" above).
_CONSTANT = re.compile(r"""
    "[^"]*" | '[^']*'
  | (?<![A-Za-z0-9_.])(?:[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+ | 0[xX][0-9a-fA-F]+ | [0-9]+)(?:/[0-9]+)?
    (?![A-Za-z0-9_./])
""", re.VERBOSE)


# The same, capturing: `_SPLIT(text)` alternates text between constants and the constants.
# The lookahead only says what every branch starts with; it lets the search skip ahead.
_SPLIT = re.compile("((?=[\"'0-9])(?:" + _CONSTANT.pattern + "))", re.VERBOSE).split

# A whole line holding one rule `field == N : fwd(P)` (or `=`): group 1 the rule's text,
# 2 the field, 3 the operator, 4 the constant, 5 the port. Only spaces and tabs around the
# tokens (and a carriage return at the end), which the lexer skips and strip() removes.
_EQUALITY_LINE = re.compile(r"""[ \t]*(
    ([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?) [ \t]* (==?) [ \t]* ([0-9]+)
    [ \t]* : [ \t]* fwd [ \t]* \( [ \t]* ([0-9]+) [ \t]* \) )[ \t\r]*""", re.VERBOSE).fullmatch


# The parser's hot paths fill a node's slots directly: a frozen dataclass's __setattr__
# refuses, and its __init__ costs a generic call per field (millions of rules: seconds).
_new = object.__new__
_ATOM_SLOTS = tuple(getattr(Atom, f).__set__
                    for f in ("field", "op", "value", "prefix_len", "line", "column"))
_RULE_SLOTS = tuple(getattr(Rule, f).__set__
                    for f in ("filter", "ports", "line", "text", "updates", "verdict"))
_NO_UPDATES: frozenset = frozenset()
_set_items = {cls: cls.items.__set__ for cls in (And, Or)}


def _atom(field: QueryField, op: str, value: int, prefix_len: int | None, line: int,
          column: int) -> Atom:
    a = _new(Atom)
    s_field, s_op, s_value, s_prefix_len, s_line, s_column = _ATOM_SLOTS
    s_field(a, field)
    s_op(a, op)
    s_value(a, value)
    s_prefix_len(a, prefix_len)
    s_line(a, line)
    s_column(a, column)
    return a


def _rule(filt: Filter, ports: frozenset[int], line: int, text: str) -> Rule:
    r = _new(Rule)
    s_filter, s_ports, s_line, s_text, s_updates, s_verdict = _RULE_SLOTS
    s_filter(r, filt)
    s_ports(r, ports)
    s_line(r, line)
    s_text(r, text)
    s_updates(r, _NO_UPDATES)  # the fast paths build stateless, fwd-only rules only
    s_verdict(r, None)
    return r


class _Fallback(Exception):
    """A rule the shape's fast instantiation does not handle: take the general path."""


def load_rules(path: str | Path, spec: Spec) -> list[Rule]:
    path = Path(path)
    return parse_rules(path.read_text(), spec, source=str(path))


def parse_rules(text: str, spec: Spec, source: str | None = None) -> list[Rule]:
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
    builder = _RuleBuilder(spec, source)
    with deep_recursion():
        return builder.rules(text)


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
        parser = Parser(tokenize(seg, line, col, source), builder.typer)
        f = parser.filter()
        parser.expect_end()
        return builder.instantiate(f, [])  # parsed from the text itself: no slots to fill


class _Shape(NamedTuple):
    """A parsed rule shape: its tree and ports, the column it was parsed at, and its fast
    instantiation (None if it has none)."""

    # filter, ports, slots, updates, verdict
    parsed: tuple[Filter, list[Token], list[int], frozenset, VerdictCall | None]
    column: int
    fast: object


class _RuleBuilder:
    """Rules from their texts through the shape cache; `typer` checks every atom and port."""

    def __init__(self, spec: Spec, source: str | None):
        self.typer = RuleTyper(spec, source)
        self.source = source
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
        self.plain: set[tuple[QueryField, str]] = set()  # (field, op) that took a decimal
        self.bounds: dict[str, int] = {}  # shape -> normalize.size_bound of its filters

    def rules(self, text: str) -> list[Rule]:
        """Every rule of a rules text, in order; equality lines the quick way (see "Speed")."""
        out: list[Rule] = []
        append = out.append
        # (field name, operator) -> (field, op, most digits, max value) once a line of it has
        # been typed the general way with a plain decimal constant
        typed: dict[tuple[str, str], tuple[QueryField, str, int, int]] = {}
        port_sets = self.port_sets
        for lineno, line in enumerate(text.split("\n"), start=1):
            m = _EQUALITY_LINE(line)
            if m is not None:
                name, op, value, port = m.group(2, 3, 4, 5)
                known = typed.get((name, op))
                ports = port_sets.get(port)
                if known is not None and ports is not None and len(value) <= known[2] \
                        and (v := int(value)) <= known[3]:
                    append(_rule(_atom(known[0], known[1], v, None, lineno, m.start(4) + 1),
                                 ports, lineno, m.group(1)))
                    continue
                append(self.rule(m.group(1), lineno, m.start(1) + 1))
                if known is None and name not in KEYWORDS:
                    q = self.typer.lookup(name)
                    canonical = "==" if op == "=" else op
                    if q is not None and (q, canonical) in self.plain:
                        typed[name, op] = (q, canonical, len(str(q.max_value)), q.max_value)
                continue
            for seg, _, col in line_rules(line, lineno):
                append(self.rule(seg, lineno, col))
        return out

    def rule(self, text: str, line: int, column: int) -> Rule:
        if "\x00" in text:  # the shape's slot marker: never valid in a rule's own text
            raise RuleError("unexpected character '\\x00'", line, column + text.index("\x00"),
                            self.source)
        parts = _SPLIT(text)  # text, constant, text, ..., text
        shape = "\x00".join(parts[::2])
        plan = self.shapes.get(shape)
        if plan is None:
            try:
                parsed = self.parse(tokenize(shape, line, column, self.source))
            except RuleError:
                # Positions in a shape are off by the constants' lengths: report from the text.
                self.parse(tokenize(text, line, column, self.source))
                raise
            plan = self.shapes[shape] = _Shape(parsed, column, self.fast(*parsed))
        consts = parts[1::2]
        # ends[2 * i] is where constant i starts in the text (and ends[2 * i + 1] its end).
        ends = list(accumulate(map(len, parts)))
        rule = None
        if plan.fast is not None:
            try:
                rule = plan.fast(consts, ends, line, column, text)
            except (_Fallback, RuleError):
                pass  # the general path below gives the error, or the rule
        if rule is None:
            values = [Token(_constant_type(c), c, line, column + ends[2 * i])
                      for i, c in enumerate(consts)]
            f, port_tokens, slot_columns, updates, call = plan.parsed
            self.slot_columns, self.line, self.column, self.origin = \
                slot_columns, line, column, plan.column
            verdict = None
            if call is not None:
                verdict = self.typer.verdict(
                    call, [self.slot(t, values) for t in call.args],
                    None if call.priority is None else self.slot(call.priority, values))
            rule = Rule(self.instantiate(f, values), self.ports(port_tokens, values), line, text,
                        updates, verdict)
        # A filter whose normal form may be too large compiles as a formula (compiler.formula);
        # one whose diagram would still be too large is refused here, at parse time, with its
        # position, never later by the compiler. The bound depends on the shape only.
        bound = self.bounds.get(shape)
        if bound is None:
            bound = self.bounds[shape] = size_bound(rule.filter)
        if bound > FORMULA_AT and not state_atoms(rule.filter):  # state: not compiled yet
            formula.check(rule.filter, line, column, self.source)
        return rule

    def fast(self, f, port_tokens: list[Token], slot_columns: list[int], updates: frozenset,
             call: VerdictCall | None):
        """The shape's instantiation as one function of its constants' texts and columns, or
        None when the shape has a constant that is not a slot. The function raises
        _Fallback (or RuleError) at anything it has not seen work: the general path then
        builds the rule, or reports the error, exactly as it always does."""
        build = self._fast_filter(f)
        if build is None or updates or call is not None or \
                any(t.type != "SLOT" for t in port_tokens):
            return None
        slots = tuple(int(t.value) for t in port_tokens)
        one = slots[0] if len(slots) == 1 else None  # `fwd(p)`: the text alone is the key
        port_sets = self.port_sets

        def instantiate(consts, ends, line, column, text):
            filt = build(consts, ends, line, column)
            key = consts[one] if one is not None else tuple([consts[i] for i in slots])
            ports = port_sets.get(key)
            if ports is None:
                toks = [Token(_constant_type(consts[i]), consts[i], line, column + ends[2 * i])
                        for i in slots]
                ports = port_sets[key] = self.ports(toks, toks)
            return _rule(filt, ports, line, text)

        return instantiate

    def _fast_filter(self, f):
        if isinstance(f, StateCompare):
            return None  # stateful rules take the general path
        if isinstance(f, Compare):
            if f.constant.type != "SLOT":
                return None
            i, q, op = int(f.constant.value), f.field, f.op
            start = 2 * i
            known = self.converted.setdefault((q, op), {})

            def atom(consts, ends, line, column):
                value = known.get(consts[i])
                if value is None:
                    value = self._convert(q, op, consts[i])
                return _atom(q, op, value[0], value[1], line, column + ends[start])
            return atom
        if isinstance(f, (And, Or)):
            items = [self._fast_filter(i) for i in f.items]
            if None in items:
                return None
            cls = type(f)
            set_items = _set_items[cls]
            if len(items) == 2:  # the usual `a and b`
                first, second = items

                def pair(consts, ends, line, column):
                    j = _new(cls)
                    set_items(j, (first(consts, ends, line, column),
                                  second(consts, ends, line, column)))
                    return j
                return pair

            def junction(consts, ends, line, column):
                j = _new(cls)
                set_items(j, tuple([g(consts, ends, line, column) for g in items]))
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
        if (q, op) in self.plain and text.isascii() and text.isdigit() \
                and len(text) <= len(str(q.max_value)) and int(text) <= q.max_value:
            # A decimal integer where the typer has accepted one already: nothing left to
            # check (a million distinct identifiers each take this once, hICN's workload).
            value = self.converted[q, op][text] = (int(text), None)
            return value
        tok = Token(_constant_type(text), text, None, None)
        try:
            a = self.typer.atom(q, op, tok, tok)
        except RuleError:
            raise _Fallback from None
        value = self.converted[q, op][text] = (a.value, a.prefix_len)
        if tok.type == "INT" and text.isdigit() and a.prefix_len is None:
            self.plain.add((q, op))
        return value

    def parse(self, tokens: list[Token]
              ) -> tuple[Filter, list[Token], list[int], frozenset, VerdictCall | None]:
        slot, slot_columns = 0, []
        for i, tok in enumerate(tokens):
            if tok.type == "SLOT":
                tokens[i] = tok._replace(value=str(slot))
                slot_columns.append(tok.column)
                slot += 1
        if not tokens:
            raise RuleError("empty rule", None, None, self.source)
        p = Parser(tokens, self.typer)
        f = p.filter()
        if not p.at(":"):
            p.fail("':' before the action" if p.peek().type != "END" else "':' and an action")
        p.take()
        ports, calls, verdict = p.action()
        if verdict is not None:
            self.typer.verdict_name(verdict)  # the name and arity: once per shape
            if calls:
                raise self.typer.error(
                    "a rule with state cannot name an action besides fwd yet (docs/actions.md, "
                    "\"Actions and state\")", verdict.name)
            if verdict.name.value == "drop" and ports:
                raise self.typer.error("drop discards the packet: a rule naming it names no "
                                       "fwd(...)", verdict.name)
        updates = set()
        for call in calls:  # no constants inside: typed once per shape
            var = self.typer.update(call)
            if var in updates:
                raise self.typer.error(f"{var.action} is given twice", call.name)
            updates.add(var)
        if verdict is not None and _reads_state(f):
            raise self.typer.error("a rule with state cannot name an action besides fwd yet "
                                   "(docs/actions.md, \"Actions and state\")", verdict.name)
        return f, ports, slot_columns, frozenset(updates), verdict

    def instantiate(self, f, values: list[Token]) -> Filter:
        if isinstance(f, Compare):
            tok = values[int(f.constant.value)] if f.constant.type == "SLOT" \
                else self.unshape(f.constant, values)
            return self.typer.atom(f.field, f.op, tok, self.unshape(f.op_token, values))
        if isinstance(f, StateCompare):
            tok = values[int(f.constant.value)] if f.constant.type == "SLOT" \
                else self.unshape(f.constant, values)
            return self.typer.state_atom(f.state, f.op, tok, self.unshape(f.op_token, values))
        if isinstance(f, (And, Or)):
            return type(f)(tuple(self.instantiate(i, values) for i in f.items))
        if isinstance(f, Not):
            return Not(self.instantiate(f.item, values))
        return f

    def slot(self, tok: Token, values: list[Token]) -> Token:
        """A shape's token as the rule's own: its constant if it is a slot, else moved."""
        return values[int(tok.value)] if tok.type == "SLOT" else self.unshape(tok, values)

    def unshape(self, tok: Token | None, values: list[Token]) -> Token | None:
        """A shape token moved to its line and column in the rule's text (the shape was
        parsed at the position of the first rule of that shape, and slots are 1 character)."""
        if tok is None or self.origin is None:
            return tok
        shift = sum(len(v.value) - 1 for col, v in zip(self.slot_columns, values)
                    if col < tok.column)
        return tok._replace(line=self.line, column=tok.column - self.origin + self.column + shift)

    def ports(self, tokens: list[Token], values: list[Token]) -> frozenset[int]:
        return frozenset(self.typer.port(values[int(tok.value)] if tok.type == "SLOT" else tok)
                         for tok in tokens)


def _reads_state(f) -> bool:
    """Whether a parsed shape's filter compares declared state somewhere."""
    if isinstance(f, StateCompare):
        return True
    if isinstance(f, (And, Or)):
        return any(_reads_state(i) for i in f.items)
    return isinstance(f, Not) and _reads_state(f.item)


def _constant_type(text: str) -> str:
    if text[0] in "\"'":
        return "STRING"
    if "." in text:
        return "IPV4"
    if text[:2] in ("0x", "0X"):
        return "HEX"
    return "INT"
