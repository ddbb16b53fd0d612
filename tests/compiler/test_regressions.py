"""Counterexamples found by the property tests, pinned by name so they never come back."""

from __future__ import annotations

from compiler.compile import compile_text
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import parse_spec


def test_adjacent_constants_on_exact_field_do_not_become_the_default():
    # Hypothesis seed 82: constants 0 and 1 share a successor, so the intervals were
    # [0..1] -> port 1 and [2..2^32-1] -> nothing. Taking "the first interval wider than one
    # value" as the exact stage's default picked [0..1], and then tried to write 2^32 - 2
    # exact entries for the rest (out of memory). The default is the widest successor.
    spec = "header m { bit<32> f; }\n@pragma query_field_exact(m.f)\n"
    c = compile_text(spec, "m.f == 0 or m.f == 1 : fwd(1)")
    stage = [e for e in c.entries["table_entries"] if e["table"] == "app_f"]
    assert sorted(e["match"]["m.f"]["exact"] for e in stage) == [0, 1]
    t = c.tables()
    assert [sorted(t.ports(c.application, {"m.f": v})) for v in (0, 1, 2, 2**32 - 1)] == [[1], [1], [], []]


def test_prefix_on_a_field_that_is_not_32_bits():
    # Hypothesis generated `f == 8/3` for an 8-bit lpm field; only dotted IPv4 took /len.
    text = "header m { bit<8> f; }\n@pragma query_field_lpm(m.f)\n"
    spec = parse_spec(text)
    rules = parse_rules("m.f == 0xA5/4 : fwd(1)\nm.f != 8/3 : fwd(2)", spec)
    c = compile_text(text, "m.f == 0xA5/4 : fwd(1)\nm.f != 8/3 : fwd(2)")
    t = c.tables()
    for v in range(256):
        assert t.ports(c.application, {"m.f": v}) == evaluate(rules, {"m.f": v}), v
