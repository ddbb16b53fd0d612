"""Every mistake with state, in the spec or in a rule, is refused with its line and column."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.errors import RuleError, SpecError
from compiler.rules import parse_filter, parse_rules
from compiler.spec import parse_spec

from .test_errors import check_rule_error, check_spec_error
from .test_stateful import SPEC


@pytest.fixture(scope="module")
def spec():
    return parse_spec(SPEC)


RULE_ERRORS = [
    # (rule on line 2, expected column, words the message must contain)
    ("hits > 5 : fwd(1)", 1, ["unknown field 'hits'"]),
    ("rate(hits) > 5 : fwd(1)", 6, ["unknown meter 'hits'", "orders"]),
    ("avg(shares) > 5 : fwd(1)", 5, ["'itch_order.shares' is not declared averageable",
                                     "@query_average(itch_order.shares"]),
    ("avg(stock_locate) > 5 : fwd(1)", 5, ["not declared averageable"]),
    ("avg(volume) > 5 : fwd(1)", 5, ["unknown field 'volume' in avg", "itch_order.price"]),
    ("rate(my_counter) > 5 : fwd(1)", 6, ["'my_counter' is a counter", "as my_counter"]),
    ("orders > 5 : fwd(1)", 1, ["'orders' is a meter", "rate(orders)"]),
    ("count(my_counter) > 5 : fwd(1)", 1, ["update action"]),
    ("max(price) > 5 : fwd(1)", 1, ["unknown function 'max'"]),
    ('my_counter == "ten" : fwd(1)', 15, ["compared with a number, not a string"]),
    ("avg(price) > 10.0.0.1 : fwd(1)", 14, ["compared with a number, not an address"]),
    ("my_counter > 16/4 : fwd(1)", 14, ["compared with a number, not a prefix"]),
    ("my_counter > ten : fwd(1)", 14, ["not a word"]),
    ("my_counter > 4294967296 : fwd(1)", 14, ["out of range", "at most 4294967295"]),
    ("avg(price) >= 0x100000000 : fwd(1)", 15, ["out of range for avg(itch_order.price)"]),
    ("rate(orders) > 18446744073709551616 : fwd(1)", 16, ["out of range"]),
    ("my_counter > price : fwd(1)", 14, ["comparing state with a field"]),
    ("price > my_counter : fwd(1)", 9, ["comparing a field with state"]),
    ("avg(price) < rate(orders) : fwd(1)", 14, ["other state"]),
    ("my_counter in {1, price} : fwd(1)", 19, ["comparing state with a field"]),
    ("avg(7) > 1 : fwd(1)", 5, ["expected a name"]),
    ("avg(price > 1 : fwd(1)", 11, ["expected ')'"]),
    ("price > 1 : fwd(1), count(orders)", 27, ["updates a counter", "meter(orders)"]),
    ("price > 1 : fwd(1), meter(my_counter)", 27, ["updates a meter", "count(my_counter)"]),
    ("price > 1 : fwd(1), count(hits)", 27, ["unknown counter 'hits'", "my_counter"]),
    ("price > 1 : fwd(1), avg(shares)", 25, ["not declared averageable"]),
    ("price > 1 : count(my_counter), count(my_counter)", 32, ["given twice"]),
    ("price > 1 : fwd(1), fwd(2)", 21, ["fwd(...) is given twice"]),
    ("price > 1 : fwd(1), drop(2)", 21, ["unknown action 'drop'"]),
    ("price > 1 : fwd(1) count(my_counter)", 20, ["expected the end of the rule",
                                                  "another action"]),
    ("price > 1 : count my_counter", 19, ["expected '('"]),
]


@pytest.mark.parametrize("rule,column,words", RULE_ERRORS)
def test_rule_error_position_and_message(spec, rule, column, words):
    check_rule_error(spec, rule, column, words)


def test_errors_point_into_the_rule_after_a_shape_was_cached(spec):
    # the second rule has the first one's shape; its error must carry its own column
    text = "my_counter > 1 : fwd(1)\n   my_counter > 99999999999 : fwd(1)\n"
    with pytest.raises(RuleError) as info:
        parse_rules(text, spec)
    assert (info.value.line, info.value.column) == (2, 17)


def test_filter_alone_with_state(spec):
    f = parse_filter("avg(price) > 5 and not rate(orders) < 2", spec)
    assert str(f.items[0]) == "avg(itch_order.price) > 5"
    with pytest.raises(RuleError) as info:
        parse_filter("avg(prize) > 5", spec)
    assert info.value.column == 5


HEADER = "header h { bit<16> id; bit<32> v; bit<64> s; bit<40> w; }\n@pragma ascii(h.s)\n"
SPEC_ERRORS = [
    # (annotation on line 3, (line, column), words)
    ("@pragma query_counter(c, 0, 1024)", (3, 26), "window of 0"),
    ("@pragma query_counter(c, 281474976710656, 4)", (3, 26), "2^48 - 1"),
    ("@pragma query_counter(c, 100, 0)", (3, 31), "0 slots"),
    ("@pragma query_counter(c, 100, 16777217)", (3, 31), "1 .. 16777216"),
    ("@pragma query_counter(c, 100)", (3, 1), "takes NAME, WINDOW_US, SLOTS"),
    ("@pragma query_counter(c, 100, 8, h.id)", (3, 1), "takes NAME"),
    ("@pragma query_counter(c, 100, 8, h.id, 3)", (3, 40), "3 buckets: a power of two"),
    ("@pragma query_counter(c, 100, 8, h.id, 16)", (3, 40), "at most the slots (8)"),
    ("@pragma query_counter(c, 100, 8, h.id, 0)", (3, 40), "0 buckets"),
    ("@pragma query_counter(c, 100, 8, h.nope, 4)", (3, 34), "has no field 'nope'"),
    ("@pragma query_counter(c, 100, 8, h.s, 4)", (3, 34), "ascii field"),
    ("@pragma query_counter(id, 100, 8)", (3, 23), "also a header or field name"),
    ("@pragma query_counter(h, 100, 8)", (3, 23), "also a header or field name"),
    ("@pragma query_counter(avg, 100, 8)", (3, 23), "word of the rule language"),
    ("@pragma query_counter(h.v, 100, 8)", (3, 23), "plain name"),
    ("@pragma query_counter(c, 100, 8)\n@pragma query_meter(c, bytes, 5, 5)", (4, 1),
     "declared twice"),
    ("@pragma query_meter(m, frames, 100, 8)", (3, 24), "'packets' or 'bytes', not 'frames'"),
    ("@pragma query_meter(m, 100, 8)", (3, 1), "takes NAME, packets|bytes"),
    ("@pragma query_average(h.s, 100, 8)", (3, 23), "ascii field cannot be averaged"),
    ("@pragma query_average(h.w, 100, 8)", (3, 23), "40 bits; at most 32"),
    ("@pragma query_average(h.x, 100, 8)", (3, 23), "has no field 'x'"),
    ("@pragma query_average(v, 100, 8)", (3, 23), "header.field"),
    ("@pragma query_average(h.v, 0, 8)", (3, 28), "window of 0"),
    ("@pragma query_average(h.v, 10, 0)", (3, 32), "0 slots"),
    ("@pragma query_average(h.v, 10, 8)\n@pragma query_average(h.v, 20, 8)", (4, 1),
     "'h.v' is declared twice"),
    ("@pragma query_countr(c, 1, 1)", (3, 1), "query_counter"),
]


@pytest.mark.parametrize("text,pos,words", SPEC_ERRORS)
def test_spec_error_position_and_message(text, pos, words):
    check_spec_error(HEADER + text + "\n", pos, words)


def test_framing_fields_cannot_hold_state():
    mold = ("header mold { bit<80> session; bit<64> seq; bit<16> count; }\n"
            "header m { bit<32> v; }\n@pragma framing(moldudp64, mold)\n")
    with pytest.raises(SpecError, match="framing header") as info:
        parse_spec(mold + "@pragma query_average(mold.count, 10, 8)\n")
    assert info.value.line == 4
    parse_spec(mold + "@pragma query_average(m.v, 10, 8)\n")


STATE_TOKENS = st.sampled_from([
    "my_counter", "orders", "avg", "rate", "count", "meter", "avg(price)", "rate(orders)",
    "price", "stock", "(", ")", "==", "<", ">=", "!=", "and", "or", "not", "in", "{", "}", ",",
    ":", "fwd(1)", "fwd(", "count(my_counter)", "meter(orders)", "avg(price)", "1", "0x10",
    "4294967296", '"x"', "10.0.0.1", "1/2", ";", "\n", "true"])


@settings(max_examples=300, deadline=None)
@given(st.lists(STATE_TOKENS, max_size=16).map(" ".join))
def test_state_token_soup_gives_positioned_errors_or_rules(text):
    # the fuzz of test_fuzz.py, with state words: a RuleError with a position, or rules
    try:
        rules = parse_rules(text, parse_spec(SPEC))
    except RuleError as err:
        assert err.line is not None and err.line >= 1 and err.column >= 1, err
        return
    for r in rules:
        assert r.ports or r.updates


STATE_SPEC_TOKENS = st.sampled_from([
    "@pragma", "query_counter", "query_average", "query_meter", "(", ")", ",", "c", "h.id",
    "h.v", "h.s", "h.w", "packets", "bytes", "0", "1", "8", "3", "0x10", "281474976710656",
    "\n"])


@settings(max_examples=300, deadline=None)
@given(st.lists(STATE_SPEC_TOKENS, max_size=14).map(" ".join))
def test_state_annotation_soup_gives_spec_errors(text):
    try:
        parse_spec(HEADER + text)
    except SpecError as err:
        assert err.message
