"""Any text at all: the parsers answer with a positioned error of their own or a result,
never another exception (bad input gets a clear error, and nothing crashes)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.errors import RuleError, SpecError
from compiler.rules import parse_rules
from compiler.spec import parse_spec

from .test_errors import SPEC

SPEC_OBJ = parse_spec(SPEC)
ALPHABET = st.sampled_from(list('stockpriceshares dst flags itch_order. ==!=<>=()"{},:;#\n'
                                "0123456789xABCDEF/ and or not in fwd true false\t'@~é"))
RULE_TOKENS = st.sampled_from([
    "stock", "price", "shares", "dst", "flags", "itch_order.price", "==", "!=", "<", "<=", ">",
    ">=", "=", "and", "or", "not", "in", "(", ")", "{", "}", ",", ":", "fwd(1)", "fwd(", "1",
    "0", "4294967295", "4294967296", "0xFF", '"GOOGL"', "GOOGL", "10.0.0.0/8", "1/3", ";",
    "\n", "#", "true", "false", "'x'", '"', "é"])


@settings(max_examples=500, deadline=None)
@given(st.text(ALPHABET, max_size=80))
def test_rules_from_characters(text):
    _parse(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(RULE_TOKENS, max_size=20).map(" ".join))
def test_rules_from_tokens(text):
    _parse(text)


def _parse(text: str) -> None:
    try:
        rules = parse_rules(text, SPEC_OBJ)
    except RuleError as err:
        assert err.line is not None and err.line >= 1 and err.column >= 1, err
        return
    for r in rules:
        assert r.ports and all(1 <= p <= 511 for p in r.ports)


SPEC_TOKENS = st.sampled_from([
    "header", "h", "g", "{", "}", ";", "bit<8>", "bit<0>", "bit<64>", "bit<", ">", "a", "b",
    "@pragma", "@", "#pragma", "query_field", "query_field_exact", "udp_port", "framing",
    "message_type", "ascii", "(", ")", "h.a", "h.b", "g.a", ",", "1234", "0x41", "moldudp64",
    "single", "\n", "//", "/*", "*/", '"s"'])


@settings(max_examples=500, deadline=None)
@given(st.lists(SPEC_TOKENS, max_size=25).map(" ".join))
def test_specs_from_tokens(text):
    try:
        parse_spec(text)
    except SpecError as err:
        assert err.message
