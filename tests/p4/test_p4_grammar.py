"""Every golden program is derivable from the P4_16 specification's grammar (tests/p4/p4_grammar.py),
and that check rejects the syntax mistakes an emitter could make.

Syntax only: types, scoping and p4c's back end rules are docs/p4.md's audit and test_bmv2.py.
"""

from __future__ import annotations

import re

from pathlib import Path

import pytest
from lark.exceptions import LarkError

from compiler.compile import compile_files
from compiler.p4 import emit_program
from tests.p4.p4_grammar import parse, type_names

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "p4"
KAFKA = (GOLDEN / "kafka" / "program.p4").read_text()


@pytest.mark.parametrize("case", ["int", "kafka", "all", "fig4", "itch_state"])  # all: itch's program with the other two; fig4, itch_state: with state
def test_golden_program_parses_under_the_spec_grammar(case):
    parse((GOLDEN / case / "program.p4").read_text())


def test_one_slot_itch_program_parses():
    """The shortest MoldUDP64 program (its last block state has no select)."""
    c = compile_files(ROOT / "p4/itch/itch.p4", GOLDEN / "itch" / "rules.txt")
    parse(emit_program(c.pipeline, 1))


MUTATIONS = {
    "annotation before the match kind": ('meta.state : exact @name("state");', 'meta.state @name("state") : exact;'),
    "missing semicolon": ("hdr.udp.checksum = 0;", "hdr.udp.checksum = 0"),
    "select case without colon": ("default: accept;", "default accept;"),
    "keyword as a field name": ("bit<32> partition;", "bit<32> table;"),
    "unbalanced braces": ("apply { }", "apply { "),
    "transition outside a parser": ("egress_udp_rewrite.apply();", "transition accept;"),
    "C++-style cast": ("(bit<32>)hdr.ipv4.total_len", "bit<32>(hdr.ipv4.total_len)"),
    "old v1model table syntax": ("default_action = NoAction();", "default_action : NoAction();"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_syntax_mistake_is_rejected(name):
    before, after = MUTATIONS[name]
    assert before in KAFKA
    with pytest.raises((LarkError, SyntaxError)):
        parse(KAFKA.replace(before, after, 1))


def test_names_the_grammar_allows_are_accepted():
    """`state` (metadata field, action parameter) is a `nonTypeName` in the grammar; `>>` closes
    two type argument lists."""
    assert re.search(r"bit<\d+> state;", KAFKA) and re.search(r"action set_state\(bit<\d+> state\)", KAFKA)
    parse(KAFKA.replace("transition accept;\n    }\n}", "transition select(packet.lookahead<bit<8>>()) "
                                                       "{ default: accept; }\n    }\n}", 1))


def test_type_names_include_the_programs_and_v1models():
    names = type_names(KAFKA)
    assert {"headers_t", "metadata_t", "kafka_t", "CamusIngress", "packet_in", "V1Switch"} <= names
    assert "hdr" not in names and "state" not in names
