"""Stateful rules compiled to tables (docs/pipeline-ir.md, "State") against the reference
evaluator, packet by packet: random rule sets mixing stateless and stateful rules, random
timed packet sequences (out-of-order times, window edges), and rule changes between packets
through the incremental compiler."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules
from compiler.errors import StateError
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Packet
from compiler.spec import parse_spec
from pipeline import document, interpreter

from .test_stateful_properties import random_packets, random_rule

SPEC_TEXT = """\
header m { bit<8> k; bit<8> a; bit<16> b; }
@pragma query_field_exact(m.k)
@pragma query_field(m.a)
@pragma query_field(m.b)
@pragma query_counter(c, 10, 4096)
@pragma query_counter(ck, 7, 4096, m.k, 4)
@pragma query_average(m.a, 20, 4096)
@pragma query_meter(mp, packets, 50, 4096, m.k, 2)
@pragma query_meter(mb, bytes, 30, 4096)
@pragma query_banks(16)
"""
SPEC = parse_spec(SPEC_TEXT)


def compiled_or_refused(rules):
    """The compiled rules, or None when the machine model refuses them (the refusal must
    name a rule by its line)."""
    try:
        return compile_rules(SPEC, rules)
    except StateError as exc:
        assert "line " in str(exc), exc
        return None


def through_json(c):
    """The compiled pipeline and entries as a consumer reads them: through their JSON."""
    p = document.from_json(json.loads(document.dumps(c.pipeline)))
    return p, interpreter.load(p, json.loads(json.dumps(c.entries)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 6), n_packets=st.integers(1, 60))
def test_tables_equal_evaluator(seed, n_rules, n_packets):
    rng = random.Random(seed)
    rules = parse_rules("\n".join(random_rule(rng) for _ in range(n_rules)), SPEC)
    c = compiled_or_refused(rules)
    if c is None:
        return
    p, tables = through_json(c)
    app = p.applications[0]
    ev = Evaluator(rules)
    for i, pkt in enumerate(random_packets(rng, n_packets)):
        want = ev.packet(pkt)
        got = tables.ports_at(app, dict(pkt.values), pkt.ts_us, pkt.length)
        assert got == want, (seed, i, pkt)


def apply(tables: interpreter.Tables, pipeline, step) -> None:
    """A change's writes, in `steps()` order, on interpreter tables (as a target would)."""
    from pipeline.entries import parse_entry

    for op, item in step.steps():
        if op == "delete":
            tables.uninstall(parse_entry(pipeline, item))
        elif op in ("insert", "modify"):
            tables.install(parse_entry(pipeline, item))
        elif op == "set_group":
            tables.groups[item[0]] = tuple(item[1])
        elif op == "delete_group":
            del tables.groups[item]
        else:
            assert op == "reset_cells"
            tables.reset_cells(*item)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(0, 5), n_packets=st.integers(1, 60))
def test_incremental_changes_equal_evaluator(seed, n_rules, n_packets):
    # rule changes between packets, applied as the incremental compiler's writes: every
    # packet decided as the evaluator decides it (removing an equal stateful rule removes the
    # one added last); while no rule was removed, the document is a from-scratch compile's
    from compiler.incremental import Incremental, rule_key

    rng = random.Random(seed)
    pool = parse_rules("\n".join(random_rule(rng) for _ in range(n_rules + 4)), SPEC)
    rules = pool[:n_rules]
    try:
        inc = Incremental(SPEC, rules)
    except StateError:
        return
    ev = Evaluator(rules)
    handles: dict = {}
    for h, r in enumerate(rules):
        handles.setdefault(rule_key(r), []).append(h)
    tables = interpreter.load(inc.pipeline, inc.entries())
    removed_any = False
    for i, pkt in enumerate(random_packets(rng, n_packets)):
        if rng.random() < 0.2:
            live = [r for r in inc.current_rules()]
            if live and rng.random() < 0.5:
                r = rng.choice(live)
                step = inc.remove(r)
                ev.remove(handles[rule_key(r)].pop())
                removed_any = True
            else:
                r = rng.choice(pool)
                try:
                    step = inc.add(r)
                except StateError as exc:
                    assert "line " in str(exc)
                    step = None
                if step is not None:
                    handles.setdefault(rule_key(r), []).append(ev.add(r))
            if step is not None:
                if step.rebuilt or step.resized:  # a new program: loaded whole
                    tables = _carry(tables, interpreter.load(inc.pipeline, inc.entries()))
                    for cells in step.reset_cells:
                        tables.reset_cells(*cells)
                else:
                    apply(tables, inc.pipeline, step)
        want = ev.packet(pkt)
        got = tables.ports_at(inc.pipeline.applications[0], dict(pkt.values), pkt.ts_us,
                              pkt.length)
        assert got == want, (seed, i, pkt)
    if not removed_any:
        assert inc.entries() == compile_rules(SPEC, inc.current_rules()).entries


def _carry(old: interpreter.Tables, new: interpreter.Tables) -> interpreter.Tables:
    """A new program keeps the registers' cells (the pipeline's registers do not change
    with the rules)."""
    new.registers = old.registers
    return new
