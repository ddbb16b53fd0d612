"""Actions beyond fwd (docs/actions.md): the language, the reference evaluator's outcome, and
compiled tables in the Python interpreter agreeing with it (Hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.ast import Verdict
from compiler.compile import compile_rules
from compiler.errors import CamusError, RuleError, SpecError
from compiler.incremental import Incremental
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Outcome, evaluate, outcome
from compiler.spec import parse_spec
from pipeline import document
from pipeline.model import PipelineError

HEADER = """header m { bit<8> a; bit<8> b; }
@query_field(m.a)
@query_field_exact(m.b)
"""
SPEC = HEADER + '@action(drop, answerDNS)\n@default_action("fwd(7)")\n'
NO_DEFAULT = HEADER + "@action(drop, answerDNS)\n"


def ip(text: str) -> int:
    return int.from_bytes(bytes(int(x) for x in text.split(".")), "big")


# ---- the language ----

def test_rules_parse_with_verdicts_and_priorities():
    spec = parse_spec(SPEC)
    r1, r2, r3 = parse_rules("a == 1 : answerDNS(10.0.0.105), fwd(2)\n"
                             "b == 2 : fwd(3), answerDNS(167772161), priority(4)\n"
                             "a > 3 : drop", spec)
    assert (r1.ports, r1.verdict) == (frozenset({2}), Verdict("answerDNS", (ip("10.0.0.105"),)))
    assert (r2.ports, r2.verdict) == (frozenset({3}), Verdict("answerDNS", (167772161,), 4))
    assert (r3.ports, r3.verdict) == (frozenset(), Verdict("drop"))
    assert spec.default == (frozenset({7}), None)


@pytest.mark.parametrize("text, column, words", [
    ("a == 1 : answerDNS(1.2.3.4/8)", 20, ["not a prefix"]),
    ("a == 1 : answerDNS(1.2.3.400)", 20, ["not an IPv4 address"]),
    ("a == 1 : answerDNS(4294967296)", 20, ["does not fit", "32 bits"]),
    ("a == 1 : answerDNS()", 10, ["takes 1 argument", "answerDNS(ipv4 ip)"]),
    ("a == 1 : answerDNS(1, 2)", 10, ["takes 1 argument"]),
    ("a == 1 : answerDNS(x)", 20, ["expected an argument"]),
    ("a == 1 : resolve(1)", 10, ["unknown action 'resolve'", "answerDNS, drop"]),
    ("a == 1 : drop, fwd(1)", 10, ["names no fwd"]),
    ("a == 1 : drop, answerDNS(1.1.1.1)", 16, ["one action besides fwd", "'drop'"]),
    ("a == 1 : fwd(1), priority(2)", 27, ["names none"]),
    ("a == 1 : drop, priority(65536)", 25, ["out of range (0..65535)"]),
    ("a == 1 : drop, priority(1), priority(2)", 29, ["priority(...) is given twice"]),
])
def test_action_errors_name_line_and_column(text, column, words):
    spec = parse_spec(SPEC)
    with pytest.raises(RuleError) as info:
        parse_rules("a == 0 : fwd(1)\n" + text, spec, source="r.rules")
    err = info.value
    assert (err.line, err.column) == (2, column), str(err)
    for w in words:
        assert w in err.message, str(err)


def test_an_undeclared_action_says_how_to_declare_it():
    with pytest.raises(RuleError, match=r"add @action\(answerDNS\) to the spec"):
        parse_rules("a == 1 : answerDNS(1.1.1.1)", parse_spec(HEADER))


@pytest.mark.parametrize("extra, line, words", [
    ("@action(resolve)", 4, ["unknown action 'resolve'", "how to add one"]),
    ("@action(drop, drop)", 4, ["declared twice"]),
    ("@action(1)", 4, ["action takes the names"]),
    ('@default_action("fwd(1)")\n@default_action("fwd(2)")', 5, ["declared twice"]),
    ('@default_action("answerDNS(1.1.1.1)")', 4, ["unknown action 'answerDNS'"]),
    ('@default_action("fwd(0)")', 4, ["port 0 is out of range"]),
    ('@default_action("")', 4, ["empty action list"]),
    ("@default_action(fwd)", 4, ["in quotes"]),
    ("@query_counter(c, 1000, 8)\n@action(drop)", 5, ["state cannot declare actions"]),
])
def test_spec_errors(extra, line, words):
    with pytest.raises(SpecError) as info:
        parse_spec(HEADER + extra + "\n", source="s.p4")
    assert info.value.line == line, str(info.value)
    for w in words:
        assert w in info.value.message, str(info.value)


def test_default_action_errors_point_into_the_string():
    with pytest.raises(SpecError) as info:
        parse_spec(HEADER + '@action(answerDNS)\n@default_action("answerDNS(1.2.3.4/8)")\n')
    assert (info.value.line, info.value.column) == (5, 28), str(info.value)
    assert "not a prefix" in info.value.message


def test_state_and_actions_do_not_mix_in_rules_yet():
    spec = parse_spec(HEADER + "@query_counter(c, 1000, 8)\n")
    with pytest.raises(RuleError, match="unknown action 'drop'"):
        parse_rules("c > 3 : drop", spec)


# ---- the reference evaluator ----

def test_outcome_by_hand():
    spec = parse_spec(SPEC)
    rules = parse_rules("a == 1 : fwd(1)\n"
                        "a <= 2 : answerDNS(1.1.1.1), fwd(2)\n"
                        "a == 2 : answerDNS(2.2.2.2), priority(1)\n"
                        "a == 3 : answerDNS(3.3.3.3), fwd(3)\n"
                        "a == 3 : drop\n"
                        "a == 4 : answerDNS(4.4.4.4), priority(2), fwd(4)\n"
                        "a == 4 : drop, priority(1)\n"
                        "a == 5 : answerDNS(5.5.5.6)\n"
                        "a == 5 : answerDNS(5.5.5.5), fwd(5)\n", spec)
    d = spec.default

    def out(a):
        return outcome(rules, {"m.a": a}, d)

    v = Verdict
    assert out(1) == Outcome(frozenset({1, 2}), v("answerDNS", (ip("1.1.1.1"),)))
    assert out(2) == Outcome(frozenset({2}), v("answerDNS", (ip("2.2.2.2"),), 1))  # priority
    assert out(3) == Outcome(frozenset(), v("drop"))  # drop first at equal priority: no port
    assert out(4) == Outcome(frozenset({4}), v("answerDNS", (ip("4.4.4.4"),), 2))
    assert out(5) == Outcome(frozenset({5}), v("answerDNS", (ip("5.5.5.5"),)))  # smallest args
    assert out(9) == Outcome(frozenset({7}))  # the default
    assert outcome(rules, {"m.a": 9}) == Outcome(frozenset())  # no default: nothing
    assert evaluate(rules, {"m.a": 3}) == set()
    assert evaluate(rules, {"m.a": 1}) == {1, 2}


def test_the_default_applies_when_matching_rules_give_nothing():
    spec = parse_spec(HEADER + '@action(drop)\n@default_action("drop")\n')
    rules = parse_rules("a == 1 : fwd(1)", spec)
    assert outcome(rules, {"m.a": 2}, spec.default) == Outcome(frozenset(), Verdict("drop"))


def test_the_stateful_evaluator_refuses_verdicts():
    rules = parse_rules("a == 1 : drop", parse_spec(SPEC))
    with pytest.raises(TypeError, match="actions besides fwd"):
        Evaluator(rules)


# ---- compiled tables agree with the evaluator ----

_FILTERS = st.one_of(
    st.builds(lambda op, n: f"a {op} {n}", st.sampled_from(["==", "<", ">=", "!="]),
              st.integers(0, 15)),
    st.builds(lambda op, n: f"b {op} {n}", st.sampled_from(["==", "!="]), st.integers(0, 15)),
)
_FILTER = st.one_of(_FILTERS, st.builds(lambda x, y, j: f"({x} {j} {y})", _FILTERS, _FILTERS,
                                        st.sampled_from(["and", "or"])),
                    st.builds(lambda x: f"not {x}", _FILTERS))
_PORTS = st.lists(st.integers(1, 9), min_size=1, max_size=3).map(
    lambda ps: f"fwd({', '.join(map(str, ps))})")
_VERDICT = st.one_of(st.just("drop"), st.builds(lambda n: f"answerDNS(10.0.0.{n})",
                                                 st.integers(1, 4)))


@st.composite
def _rule(draw):
    kind = draw(st.sampled_from(["fwd", "verdict", "both"]))
    verdict = draw(_VERDICT)
    if kind == "both" and verdict == "drop":
        kind = "verdict"
    acts = []
    if kind in ("fwd", "both"):
        acts.append(draw(_PORTS))
    if kind in ("verdict", "both"):
        acts.append(verdict)
        if draw(st.booleans()):
            acts.append(f"priority({draw(st.integers(0, 3))})")
    return f"{draw(_FILTER)} : {', '.join(acts)}"


def check_against_evaluator(spec_text: str, rules_text: str) -> None:
    spec = parse_spec(spec_text)
    rules = parse_rules(rules_text, spec)
    c = compile_rules(spec, rules)
    tables = c.tables()
    # the pipeline survives pipeline.json unchanged
    assert document.from_json(json.loads(document.dumps(c.pipeline))) == c.pipeline
    for a in range(16):
        for b in (0, 1, 2, 5, 9, 15):
            values = {"m.a": a, "m.b": b}
            want = outcome(rules, values, spec.default)
            ports, verdict = tables.outcome(c.application, values)
            assert ports == want.ports, (values, rules_text)
            got = None if want.verdict is None else (want.verdict.name, want.verdict.args)
            assert verdict == got, (values, rules_text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=st.lists(_rule(), min_size=1, max_size=10), default=st.booleans())
def test_compiled_verdicts_match_the_evaluator(rules, default):
    check_against_evaluator(SPEC if default else NO_DEFAULT, "\n".join(rules))


def test_several_default_ports_join_the_group():
    spec_text = HEADER + '@default_action("fwd(3, 12)")\n'
    check_against_evaluator(spec_text, "a == 1 : fwd(1)")
    spec = parse_spec(spec_text)
    c = compile_rules(spec, parse_rules("a == 1 : fwd(1)", spec))
    assert c.pipeline.ports_width == 13
    assert [r["port"] for r in c.entries["multicast_groups"][0]["replicas"]] == [1, 3, 12]


def test_fwd_only_rule_sets_keep_ir_3():
    spec = parse_spec(HEADER)
    c = compile_rules(spec, parse_rules("a == 1 : fwd(1)", spec))
    doc = document.to_json(c.pipeline)
    assert doc["camus_ir"] == 3 and "actions" not in doc["applications"][0]
    spec = parse_spec(SPEC)
    c = compile_rules(spec, parse_rules("a == 1 : fwd(1)", spec))
    assert document.to_json(c.pipeline)["camus_ir"] == 5


def test_pipeline_json_refuses_bad_actions():
    spec = parse_spec(SPEC)
    doc = document.to_json(compile_rules(spec, parse_rules("a == 1 : drop", spec)).pipeline)
    bad = json.loads(json.dumps(doc))
    bad["applications"][0]["actions"][1]["name"] = "mcast"
    with pytest.raises(PipelineError, match="pipeline's own actions"):
        document.from_json(bad)
    bad = json.loads(json.dumps(doc))
    bad["applications"][0]["default_action"] = {"action": "answerDNS", "params": {"ports": 0}}
    with pytest.raises(PipelineError, match=r"takes \['ports', 'ip'\]"):
        document.from_json(bad)
    bad = json.loads(json.dumps(doc))
    bad["camus_ir"] = 3
    with pytest.raises(PipelineError, match="does not match"):
        document.from_json(bad)


def test_the_incremental_compiler_refuses_actions():
    with pytest.raises(CamusError, match="incremental compiler does not handle"):
        Incremental(parse_spec(SPEC))


def test_approximation_refuses_rules_with_verdicts():
    from compiler.approximate import approximate_rules
    spec = parse_spec(SPEC)
    rules = parse_rules("a == 1 : fwd(1)\na > 7 : drop", spec)
    with pytest.raises(CamusError, match="approximation widens filters") as info:
        approximate_rules(rules, 2)
    assert info.value.line == 2
    assert approximate_rules(rules, 1) == rules
