"""Wide filters compiled as formulas (compiler.formula, issue 16 item 7): an `and` of `or`s
is expanded field by field instead of into its disjunctive normal form. Checked against the
reference evaluator on random filters with and/or/not, and against the normal-form path,
which must give the same reduced diagram (same function, same shape, same entries but for
the state ids, which are named after the residuals' texts)."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import formula
from compiler.compile import TooLarge, compile_rules
from compiler.diagram import Diagram
from compiler.errors import RuleError
from compiler.incremental import Incremental
from compiler.normalize import MAX_DISJUNCTS, size_bound
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import load_spec

from .gen import random_filter, random_message, random_rules, random_spec
from .test_cli import ROOT, camus


def shape(d: Diagram, s: int | None = None, memo: dict | None = None):
    """The reduced diagram from state `s` with its states unnamed: what it decides."""
    memo = {} if memo is None else memo
    s = d.root if s is None else s
    if s not in memo:
        split = d.splits.get(s)
        memo[s] = ("leaf", tuple(sorted(d.contents[s][0]))) if split is None else \
            (d.order[split.stage].qname, tuple((lo, hi, shape(d, t, memo)) for lo, hi, t in split.intervals))
    return memo[s]


def below_start(sh):
    """A diagram's shape past the start state's splits that go one way."""
    while sh[0] != "leaf" and len(sh[1]) == 1:
        sh = sh[1][0][2]
    return sh


def both_ways(monkeypatch, spec, rules, static=False):
    """The compile through normal forms, and through formulas for every non-atom filter
    with the same field order (the heuristic sees a formula's atoms, not its conjunctions,
    and may choose another)."""
    by_dnf = compile_rules(spec, rules, static=static)
    with monkeypatch.context() as m:
        m.setattr(formula, "FORMULA_AT", 0)
        first = [s.field.name for s in by_dnf.stages]
        by_formula = compile_rules(spec, rules, first + [q for q in spec.query_fields
                                                         if q not in first], static=static)
    return by_dnf, by_formula


def check(monkeypatch, seed: int, n_rules: int, static: bool = False) -> None:
    rng = random.Random(seed)
    spec, gens = random_spec(rng)
    rules = parse_rules(random_rules(rng, gens, n_rules), spec)
    by_dnf, by_formula = both_ways(monkeypatch, spec, rules, static)
    with_formula, with_dnf = shape(by_formula.diagram), shape(by_dnf.diagram)
    # The start state is never bypassed (its id is fixed), so it may test a field that
    # decides nothing, with one interval, where the other path's start state does not: the
    # rest of the diagram must be the same (one seed in a few hundred).
    assert below_start(with_formula) == below_start(with_dnf), seed
    if with_formula == with_dnf:
        for key in ("states", "multicast_groups", "entries", "state_width"):
            assert by_formula.stats[key] == by_dnf.stats[key], (seed, key)
    assert by_formula.entries["multicast_groups"] == by_dnf.entries["multicast_groups"]
    # The documents are byte for byte equal in most cases (146 of 150 seeds tried); else the
    # state ids differ (named after residual formulas where the normal form has
    # conjunctions), and with them which successor a tie for a state's default entry picks;
    # the entries per table (compared above) are as many.
    tables = by_formula.tables()
    for _ in range(200):
        msg = random_message(rng, gens)
        assert tables.ports(by_formula.application, msg) == evaluate(rules, msg), (seed, msg)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 10))
def test_formulas_decide_as_normal_forms_and_the_evaluator(monkeypatch, seed, n_rules):
    check(monkeypatch, seed, n_rules)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 40))
def test_formulas_in_a_static_pipeline(monkeypatch, seed, n_rules):
    check(monkeypatch, seed, n_rules, static=True)


def and_of_ors(rng: random.Random, n: int, ops=(">", "<", "=="),
               witness: list[int] | None = None) -> str:
    """An `and` of n `(slotI op x or slotJ op y)` over random pairs of the eight slots,
    constants below 100; with `witness` (eight slot values), every clause's first atom holds
    on it, so the filter is satisfiable."""
    clauses = []
    for _ in range(n):
        i, j = rng.sample(range(8), 2)
        op, x = rng.choice(ops), rng.randrange(100)
        if witness is not None:  # a constant that makes `slotI op x` hold on the witness
            w = witness[i]
            op = rng.choice([o for o in ops if o != ">" or w > 0])
            x = {">": rng.randrange(w) if w else 0, "<": w + 1 + rng.randrange(5), "==": w}[op]
        clauses.append(f"(kafka.slot{i} {op} {x} or "
                       f"kafka.slot{j} {rng.choice(ops)} {rng.randrange(100)})")
    return " and ".join(clauses)


@pytest.fixture(scope="module")
def kafka():
    return load_spec(ROOT / "p4/kafka/kafka.p4")


def test_an_and_of_twenty_ors_compiles_without_its_normal_form(kafka):
    """2^20 alternatives in normal form: refused at parse time before formulas; now a
    diagram of a few dozen states, right on values at and around every constant."""
    rng = random.Random(7)
    witness = [rng.randrange(100) for _ in range(8)]
    text = and_of_ors(rng, 20, (">", "<"), witness)
    rules = parse_rules(f"kafka.topic_id == 3 and {text} : fwd(1)\n"
                        "kafka.slot2 > 50 : fwd(2)", kafka)
    assert size_bound(rules[0].filter) > MAX_DISJUNCTS
    c = compile_rules(kafka, rules, static=True)
    assert 1 < c.stats["states"] < 2000, c.stats
    tables = c.tables()
    matched = 0
    for _ in range(3000):
        msg = {name: 0 for name in kafka.query_fields}
        msg["kafka.topic_id"] = rng.choice((3, 3, 3, 4))
        for i in range(8):
            msg[f"kafka.slot{i}"] = witness[i] if rng.random() < 0.7 else rng.randrange(102)
        want = evaluate(rules, msg)
        matched += 1 in want
        assert tables.ports(c.application, msg) == want, msg
    assert matched > 0  # the filter is not unsatisfiable by accident


def test_a_wide_filter_whose_diagram_is_too_large_is_refused_at_parse_time(kafka, monkeypatch):
    monkeypatch.setattr(formula, "MAX_FORMULA_STATES", 50)
    text = and_of_ors(random.Random(3), 20, (">", "<"))
    with pytest.raises(RuleError) as err:
        parse_rules(f"kafka.slot0 == 1 : fwd(2)\n\n  {text} : fwd(1)", kafka)
    assert (err.value.line, err.value.column) == (3, 3)
    assert "decision diagram more than 50 states" in str(err.value)


def test_the_incremental_compiler_refuses_wide_filters_before_changing_anything(kafka):
    rng = random.Random(5)
    wide_rule, = parse_rules(f"{and_of_ors(rng, 20, ('>', '<'))} : fwd(1)", kafka)
    small = parse_rules("kafka.slot0 > 3 : fwd(2)", kafka)
    with pytest.raises(RuleError, match="incremental"):
        Incremental(kafka, small + [wide_rule], static=True)
    inc = Incremental(kafka, small, static=True)
    before = inc.entries()
    with pytest.raises(RuleError, match="incremental"):
        inc.add(wide_rule)
    assert inc.entries() == before


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_clauses=st.integers(17, 24))
def test_wide_ands_of_ors_on_random_specs(seed, n_clauses):
    """Past the normal form's limit, no forcing: an `and` of two-atom `or`s (some of them
    negated) over random fields, beside plain rules, against the evaluator."""
    rng = random.Random(seed)
    spec, gens = random_spec(rng, rng.randint(3, 4))
    clauses = []
    for _ in range(n_clauses):
        a, b = rng.sample(gens, 2)
        clause = f"({random_filter(rng, [a], 3)} or {random_filter(rng, [b], 3)})"
        clauses.append(f"not {clause}" if rng.random() < 0.1 else clause)
    text = " and ".join(clauses) + " : fwd(1)\n" + random_rules(rng, gens, 3)
    try:
        rules = parse_rules(text, spec)
    except RuleError as err:  # its own diagram too large: refused, never compiled halfway
        assert "too wide to compile" in str(err)
        return
    c = compile_rules(spec, rules)
    tables = c.tables()
    for _ in range(300):
        msg = random_message(rng, gens)
        assert tables.ports(c.application, msg) == evaluate(rules, msg), (seed, msg)


def test_a_field_order_that_makes_a_wide_filter_too_large_is_refused_by_the_compile(
        kafka, monkeypatch):
    """`(slot2k != v or slot2k+1 != v)`: small in the order its constants suggest (each pair
    of slots read together), about 6^4 residuals when the first slot of every pair is read
    first."""
    text = " and ".join(f"(kafka.slot{2 * k} != {v} or kafka.slot{2 * k + 1} != {v})"
                        for k in range(4) for v in range(5))
    monkeypatch.setattr(formula, "MAX_FORMULA_STATES", 200)
    rules = parse_rules(f"kafka.slot0 == 9 : fwd(2)\n{text} : fwd(1)", kafka)
    c = compile_rules(kafka, rules)
    assert c.stats["states"] < 200
    spread = [f"kafka.slot{i}" for i in (0, 2, 4, 6, 1, 3, 5, 7)]
    with pytest.raises(RuleError, match=r"2:1: the wide filter\(s\) at line\(s\) 2 expand to "
                                        r"more than 200 residual formulas in this field order"):
        compile_rules(kafka, rules, spread)


def test_wide_filters_compile_to_the_same_document_in_any_rule_order(kafka):
    rng = random.Random(11)
    lines = [f"{and_of_ors(rng, 18, ('>', '<', '=='))} : fwd({p})" for p in (1, 2, 3)]
    lines += ["kafka.slot1 > 40 : fwd(4)", "kafka.slot2 == 7 : fwd(2)"]
    first = compile_rules(kafka, parse_rules("\n".join(lines), kafka))
    rng.shuffle(lines)
    assert compile_rules(kafka, parse_rules("\n".join(lines), kafka)).entries == first.entries


def test_the_size_estimate_counts_a_wide_filter_by_its_own_diagram(kafka):
    """Not by its atoms taken as conjunctions, whose intervals the estimate multiplies over
    every field they test (3.5 million entries for this filter's 81)."""
    rng = random.Random(7)
    witness = [rng.randrange(100) for _ in range(8)]
    rules = parse_rules(f"{and_of_ors(rng, 20, ('>', '<'), witness)} : fwd(1)\n"
                        "kafka.slot1 > 5 : fwd(2)", kafka)
    c = compile_rules(kafka, rules, max_entries=1_000_000)
    entries = c.stats["entries"]["total"]
    assert entries <= c.stats["estimate"]["entries"] <= 10 * entries, c.stats
    with pytest.raises(TooLarge, match=r"more than the budget of 10 entries") as err:
        compile_rules(kafka, rules, max_entries=10)
    estimated = int(re.search(r"about ([\d,]+) entries", str(err.value))[1].replace(",", ""))
    assert estimated <= 10 * entries


def deep_filter(rng: random.Random, gens, depth: int) -> str:
    """A random filter nested up to `depth` levels: and/or of 2-4 parts, not, atoms."""
    r = rng.random()
    if depth > 0 and r < 0.6:
        op = rng.choice(("and", "or"))
        return "(" + f" {op} ".join(deep_filter(rng, gens, depth - 1)
                                    for _ in range(rng.randint(2, 4))) + ")"
    if depth > 0 and r < 0.7:
        return "not " + deep_filter(rng, gens, depth - 1)
    return random_filter(rng, gens, 3)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), depth=st.integers(2, 6))
def test_deeply_nested_formulas_against_the_evaluator(monkeypatch, seed, depth):
    """Every non-atom filter through the formula path, nested deeper than the shared
    generator goes, on values at and beside every constant."""
    rng = random.Random(seed)
    spec, gens = random_spec(rng, rng.randint(2, 4))
    text = "\n".join(f"{deep_filter(rng, gens, depth)} : fwd({p})" for p in range(1, 4))
    rules = parse_rules(text, spec)
    monkeypatch.setattr(formula, "FORMULA_AT", 0)
    c = compile_rules(spec, rules)
    tables = c.tables()
    for _ in range(300):
        msg = random_message(rng, gens)
        assert tables.ports(c.application, msg) == evaluate(rules, msg), (seed, msg)


def test_camus_compile_takes_a_wide_filter_and_changes_refuse_it(kafka, tmp_path):
    """Through the CLI as a user runs it: the tables `camus eval` runs agree with the
    evaluator; `--changes` (the incremental compiler) refuses the filter with its line."""
    rng = random.Random(9)
    witness = [rng.randrange(100) for _ in range(8)]
    rules = tmp_path / "wide.rules"
    rules.write_text("kafka.slot1 > 50 : fwd(2)\n"
                     f"kafka.topic_id == 3 and {and_of_ors(rng, 20, ('>', '<', '=='), witness)}"
                     " : fwd(1)\n")
    out = tmp_path / "out"
    spec_path = str(ROOT / "p4/kafka/kafka.p4")
    r = camus("compile", spec_path, str(rules), "--out", str(out))
    assert r.returncode == 0, r.stderr
    parsed = parse_rules(rules.read_text(), kafka)
    messages = []
    for _ in range(300):
        m = {"topic_id": rng.choice((3, 3, 4))}
        for i in range(8):
            m[f"slot{i}"] = witness[i] if rng.random() < 0.8 else rng.randrange(102)
        messages.append(m)
    r = camus("eval", "--pipeline", str(out),
              stdin="".join(json.dumps(m) + "\n" for m in messages))
    assert r.returncode == 0, r.stderr
    got = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(got) == len(messages)
    for m, ports in zip(messages, got):
        values = {f"kafka.{k}": v for k, v in m.items()}
        assert ports == sorted(evaluate(parsed, values)), m
    assert any(1 in ports for ports in got)  # the wide rule matched somewhere

    changes = tmp_path / "changes"
    changes.write_text("+ kafka.slot2 < 9 : fwd(3)\n")
    r = camus("compile", spec_path, str(rules), "--out", str(tmp_path / "o2"),
              "--changes", str(changes))
    assert r.returncode != 0
    assert "2:1: this filter may have more than 100000 alternatives" in r.stderr
    assert "incremental compiler" in r.stderr
