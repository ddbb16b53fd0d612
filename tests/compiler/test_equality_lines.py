"""The parser's path for `field == N : fwd(P)` lines (`compiler.rules`, "Speed"): the same rules
as the general path (filters, ports, lines, columns, texts) and the same first error, at the
same line and column, on random texts that mix such lines with near misses and other rules."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.ast import And, Atom, Const, Not, Or
from compiler.errors import RuleError
from compiler.rule_syntax import split_rules
from compiler.rules import _RuleBuilder, parse_rules
# small: 3-bit exact; big: 32-bit, declared range; pad: not a query field
from tests.compiler.test_exact_only import SPEC


def general(text: str):
    """Rules the general way alone: split into segments, each through the shape cache."""
    builder = _RuleBuilder(SPEC, "r")
    return [builder.rule(seg, line, col)
            for seg, line, col in split_rules(text.removeprefix("\ufeff"))]


def shown(f):
    """A filter with every atom's position (Atom equality ignores them)."""
    if isinstance(f, Atom):
        return ("atom", f.field.qname, f.op, f.value, f.prefix_len, f.line, f.column)
    if isinstance(f, (And, Or)):
        return (type(f).__name__, tuple(shown(i) for i in f.items))
    if isinstance(f, Not):
        return ("not", shown(f.item))
    assert isinstance(f, Const)
    return ("const", f.value)


def outcome(parse, text: str):
    try:
        return [(shown(r.filter), r.ports, r.line, r.text) for r in parse(text)]
    except RuleError as exc:
        return ("error", exc.message, exc.line, exc.column, exc.source)


space = st.sampled_from(["", " ", "  ", "\t", " \t"])
name = st.sampled_from(["big", "msg.big", "small", "msg.small", "pad", "nosuch", "fwd",
                        "not", "msg.nosuch"])
number = st.one_of(st.integers(0, 9).map(str), st.integers(0, 2**33).map(str),
                   st.sampled_from(["007", "0", "00000000000000000000001", "4294967295",
                                    "4294967296", "99999999999999999999999"]))
ending = st.sampled_from(["", " ", "\r", " \r", "\x0c", " # c", "; small == 1 : fwd(2)"])
port = st.one_of(st.integers(1, 6).map(str), st.sampled_from(["0", "511", "512", "01", "7"]))


@st.composite
def equality_line(draw):
    s = [draw(space) for _ in range(8)]
    return (f"{s[0]}{draw(name)}{s[1]}{draw(st.sampled_from(['==', '=', '!=']))}{s[2]}"
            f"{draw(number)}{s[3]}:{s[4]}fwd{s[5]}({s[6]}{draw(port)}{s[7]})"
            + draw(ending))


other_line = st.sampled_from(["", "   ", "# a comment", "small == 1 : fwd(1, 2)",
                              "big == 0x10 : fwd(3)", "big > 5 : fwd(1)",
                              "big == 5 and small == 1 : fwd(2)", "5 == big : fwd(1)",
                              "big == \"ab\" : fwd(1)", "big == 5 : fwd(0x3)",
                              "big == 5/32 : fwd(1)", "big == 5 : fwd(1)  extra",
                              "\ufeffbig == 5 : fwd(1)", "big\u00a0== 5 : fwd(1)"])

texts = st.lists(st.one_of(equality_line(), equality_line(), other_line), min_size=1,
                 max_size=25).map("\n".join)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_equality_lines_parse_as_the_general_path_does(text):
    assert outcome(lambda t: parse_rules(t, SPEC, source="r"), text) == outcome(general, text)


def test_many_identifiers_then_a_bad_one():
    # The quick path takes over after the first line; the error is still the general one.
    lines = [f"big == {v} : fwd({v % 5 + 1})" for v in range(1, 2000)]
    rules = parse_rules("\n".join(lines), SPEC)
    assert [r.filter.value for r in rules] == list(range(1, 2000))
    assert {(r.filter.line, r.filter.column) for r in rules[:3]} == {(1, 8), (2, 8), (3, 8)}
    bad = "\n".join(lines + ["  big == 4294967296 : fwd(1)"])
    assert outcome(lambda t: parse_rules(t, SPEC, source="r"), bad) == outcome(general, bad)
    assert outcome(general, bad)[2:4] == (2000, 10)
