"""Every class of bad input gets a clear message and its line and column."""

from __future__ import annotations

import pytest

from compiler.errors import RuleError, SpecError
from compiler.rules import parse_filter, parse_rules
from compiler.spec import parse_spec

SPEC = """\
header itch_order {
    bit<16> stock_locate;
    bit<32> shares;
    bit<64> stock;
    bit<32> price;
    bit<32> dst;
    bit<3>  flags;
    bit<5>  pad;
}
@pragma query_field(itch_order.shares)
@pragma query_field(itch_order.price)
@pragma query_field_exact(itch_order.stock)
@pragma query_field_lpm(itch_order.dst)
@pragma query_field(itch_order.flags)
"""


@pytest.fixture(scope="module")
def spec():
    return parse_spec(SPEC)


RULE_ERRORS = [
    # (rule on line 2, expected column, words the message must contain)
    ('stock > "A" : fwd(1)', 7, ["'>'", "exact-match", "itch_order.stock"]),
    ('stock <= GOOGL : fwd(1)', 7, ["exact-match"]),
    ('stock == "TOOLONGSYM" : fwd(1)', 10, ["10 characters", "holds 8"]),
    ("price > 4294967296 : fwd(1)", 9, ["does not fit", "32-bit"]),
    ("flags == 8 : fwd(1)", 10, ["does not fit", "3-bit"]),
    ("price > 0x1FFFFFFFF : fwd(1)", 9, ["does not fit"]),
    ('flags == "A" : fwd(1)', 10, ["whole bytes"]),
    ("price > 5 : fwd(0)", 17, ["port 0", "1..511"]),
    ("price > 5 : fwd(512)", 17, ["port 512"]),
    ("volume > 5 : fwd(1)", 1, ["unknown field 'volume'"]),
    ("itch_order.volume > 5 : fwd(1)", 1, ["unknown field"]),
    ("stock_locate == 5 : fwd(1)", 1, ["not a query field"]),
    ("price > 5 fwd(1)", 11, ["expected ':'"]),
    ("price > 5 :", 12, ["expected an action"]),
    ("price > : fwd(1)", 9, ["expected a field or a constant"]),
    ("(price > 5 : fwd(1)", 12, ["expected ')'"]),
    ("price > 5 and : fwd(1)", 15, ["expected a field or a constant"]),
    ("price ~ 5 : fwd(1)", 7, ["unexpected character '~'"]),
    ("price > 5 : fwd(1", 18, ["expected ',' or ')'"]),
    ("price > 5 : fwd(1) extra", 20, ["expected the end of the rule"]),
    ("price > 5 : drop()", 13, ["unknown action 'drop'", "add @action(drop)"]),
    ("price > 5 : fwd(1) fwd(2)", 20, ["the end of the rule"]),
    ("dst > 10.0.0.0 : fwd(1)", 5, ["prefix-match", "only == and !="]),
    ("dst == 10.0.0.0/33 : fwd(1)", 8, ["prefix length /33"]),
    ("dst == 300.0.0.0 : fwd(1)", 8, ["not an IPv4 address"]),
    ('stock == "\u00e9t\u00e9" : fwd(1)', 10, ["not ASCII"]),
    # A bare word after a longer constant: its column counts that constant's real length.
    ("price > 123456 and shares == GOOGL : fwd(1)", 30, ["string GOOGL", "holds 4"]),
    ("  price > 123456 and price == shares : fwd(1)", 31, ["'shares' is a field"]),
]


@pytest.mark.parametrize("rule,column,words", RULE_ERRORS)
def test_rule_error_position_and_message(spec, rule, column, words):
    check_rule_error(spec, rule, column, words)


def check_rule_error(spec, rule: str, column: int, words: list[str]) -> None:
    """`rule`, on line 2 of a rules file, is refused at `column` with all of `words`."""
    text = "# a comment line first\n" + rule + "\n"
    with pytest.raises(RuleError) as info:
        parse_rules(text, spec, source="subs.rules")
    err = info.value
    assert (err.line, err.column) == (2, column), str(err)
    for w in words:
        assert w in err.message, str(err)
    assert str(err).startswith(f"subs.rules:2:{column}: ")


def test_prefix_on_32_bit_range_field_is_fine(spec):
    # A prefix is an interval: allowed with == on any 32-bit field that is not exact.
    (r,) = parse_rules("price == 10.0.0.0/8 : fwd(1)", spec)
    assert r.filter.prefix_len == 8


def test_error_column_in_second_rule_of_a_line(spec):
    with pytest.raises(RuleError) as info:
        parse_rules("price > 1 : fwd(1); stock > 5 : fwd(2)", spec)
    assert (info.value.line, info.value.column) == (1, 27)


def test_filter_alone(spec):
    f = parse_filter("price > 100 and stock == GOOGL", spec)
    assert str(f.items[0]) == "itch_order.price > 100"
    with pytest.raises(RuleError) as info:
        parse_filter("price > 100 and", spec)
    assert info.value.column == 16
    with pytest.raises(RuleError):
        parse_filter("price > 1 : fwd(1)", spec)
    with pytest.raises(RuleError):
        parse_filter("  ", spec)


SPEC_ERRORS = [
    ("header h { bit<8> a; }\n@pragma query_field(h.b)\n", (2, 21), "has no field 'b'"),
    ("header h { bit<8> a; }\n@pragma query_field(g.a)\n", (2, 21), "unknown header 'g'"),
    ("header h { bit<8> a; }\n@query_field(a)\n", (2, 14), "header.field"),
    ("header h { bit<8> a; }\n@pragma frobnicate(h.a)\n", (2, 1), "unknown annotation"),
    ("header h { bit<8> a; bit<8> a; }\n", (1, 29), "declared twice"),
    ("header h { bit<8> a; }\nheader h { bit<8> b; }\n", (2, 8), "declared twice"),
    ("header h { bit<7> a; }\n", (1, 8), "whole number of bytes"),
    ("header h { bit<128> a; }\n@pragma query_field(h.a)\n", (2, 1), "at most 64 bits"),
    ("header h { bit<8> a; }\n@pragma udp_port(70000)\n", (2, 1), "not a UDP port"),
    ("header h { bit<8> a }\n", (1, 21), "expected ';'"),
    ("header h { bit<8> a;\n", (None, None), "unexpected end"),
    ("header h { bit<8> a; }\n@pragma query_counter(c, 0, 1024)\n", (2, 26), "window of 0"),
    ("header h { bit<8> a; }\n@pragma framing(moldudp64, h)\n", (2, 1), "MoldUDP64 header"),
    ("header h { bit<8> a; }\n@pragma query_field(h.a)\n@pragma query_field_exact(h.a)\n",
     (3, 1), "different match kinds"),
]


@pytest.mark.parametrize("text,pos,words", SPEC_ERRORS)
def test_spec_error_position_and_message(text, pos, words):
    check_spec_error(text, pos, words)


def check_spec_error(text: str, pos: tuple, words: str) -> None:
    """The spec `text` is refused at `pos` (line, column; None: no position) with `words`."""
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="app.p4")
    err = info.value
    if pos[0] is not None:
        assert (err.line, err.column) == pos, str(err)
    assert words in err.message, str(err)


def test_operator_column_after_long_constants_in_a_cached_shape(spec):
    # The same shape twice, with constants of different lengths before the bad operator.
    text = 'price > 1 and stock > "A" : fwd(1)\nprice > 123456 and stock > "A" : fwd(1)\n'
    with pytest.raises(RuleError) as info:
        parse_rules(text, spec)
    assert (info.value.line, info.value.column) == (1, 21)
    with pytest.raises(RuleError) as info:
        parse_rules(text.split("\n", 1)[1], spec)
    assert (info.value.line, info.value.column) == (1, 26)
    with pytest.raises(RuleError) as info:
        parse_rules('price > 1 and stock == "A" : fwd(1)\n'
                    'price > 123456 and stock > "A" : fwd(1)\n', spec)
    assert (info.value.line, info.value.column) == (2, 26)


def test_value_error_in_a_cached_shape_names_its_own_line_and_column(spec):
    # The shape `dst == \x00 : fwd(\x00)` is first parsed from line 1 (indent 0); the bad
    # prefix on line 3 (indented) used to be reported at the operator's line and column
    # on line 1.
    text = "dst == 10.0.0.1 : fwd(1)\nprice > 7 : fwd(2)\n    price > 10.0.0.0/8 : fwd(3)\n"
    with pytest.raises(RuleError) as info:
        parse_rules(text.replace("dst ==", "price >", 1), spec)
    assert (info.value.line, info.value.column) == (3, 11), str(info.value)
    assert "a prefix can only be compared" in info.value.message


def test_bare_word_constant_atoms_carry_their_own_rule_position(spec):
    r1, r2 = parse_rules("stock == GOOGL : fwd(1)\n  price > 10 and stock == GOOGL : fwd(2)",
                         spec)
    assert (r1.filter.line, r1.filter.column) == (1, 10)
    assert (r2.filter.items[1].line, r2.filter.items[1].column) == (2, 27)


@pytest.mark.parametrize("rule, message", [
    ("msg.f0 == " + "9" * 5000 + " : fwd(1)", "1:11: constant 9999999999999999...99999999 (5000 digits) does not fit"),
    ("msg.f0 == 0x" + "f" * 5000 + " : fwd(1)", "1:11: constant 0xffffffffffffff"),
    ("msg.f0 == 1 : fwd(" + "9" * 5000 + ")", "1:19: port 9999999999999999...99999999 (5000 digits) is out of range"),
    ("msg.f0 == 1/" + "9" * 5000 + " : fwd(1)", "is longer than the 16-bit field"),
])
def test_constants_of_thousands_of_digits_are_rule_errors(rule, message):
    """Python refuses to convert more than 4,300 digits; such a rule got a traceback."""
    spec = parse_spec("header msg { bit<16> f0; }\n@pragma query_field_lpm(msg.f0)\n", name="t")
    with pytest.raises(RuleError) as err:
        parse_rules(rule, spec)
    assert message in str(err.value)
