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

from .test_stateful_properties import SPEC_TEXT as STATE_SPEC, random_packets, random_rule

# the evaluator's property-test spec, with banks enough for most random rule sets
SPEC_TEXT = STATE_SPEC + "@pragma query_banks(16)\n"
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


def random_spec_text(rng: random.Random) -> str:
    """The property-test spec's states with random windows, keys, buckets and meter units."""
    def window():
        return rng.choice([1, 3, 10, 50, 1000])

    def key():
        return rng.choice(["", ", m.k, 2", ", m.k, 4", ", m.b, 8"])

    def unit():
        return rng.choice(["packets", "bytes"])

    return f"""\
header m {{ bit<8> k; bit<8> a; bit<16> b; }}
@pragma query_field_exact(m.k)
@pragma query_field(m.a)
@pragma query_field(m.b)
@pragma query_counter(c, {window()}, 4096{key()})
@pragma query_counter(ck, {window()}, 4096{key()})
@pragma query_average(m.a, {window()}, 4096{key()})
@pragma query_meter(mp, {unit()}, {window()}, 4096{key()})
@pragma query_meter(mb, {unit()}, {window()}, 4096{key()})
@pragma query_banks({rng.choice([1, 2, 4, 16])})
"""


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 6), n_packets=st.integers(1, 60))
def test_random_specs_tables_equal_evaluator(seed, n_rules, n_packets):
    rng = random.Random(seed)
    spec = parse_spec(random_spec_text(rng))
    rules = parse_rules("\n".join(random_rule(rng) for _ in range(n_rules)), spec)
    try:
        c = compile_rules(spec, rules)
    except StateError as exc:  # few banks: the refusal names the rules
        assert "line " in str(exc)
        return
    p, tables = through_json(c)
    ev = Evaluator(rules)
    for i, pkt in enumerate(random_packets(rng, n_packets)):
        got = tables.ports_at(p.applications[0], dict(pkt.values), pkt.ts_us, pkt.length)
        assert got == ev.packet(pkt), (seed, i, pkt)


def test_saturation_is_whole_in_tables_and_evaluator():
    # cells one step below their maximum (white box: the evaluator's instance and the
    # register cell set alike): an addition past the maximum is not made at all
    from pipeline.interpreter import pack_cell

    rules = parse_rules("c >= 4294967295 : fwd(1)\nrate(mb) >= 143165576500000 : fwd(2)",
                        SPEC)
    c = compile_rules(SPEC, rules)
    tables, app = c.tables(), c.application
    ev = Evaluator(rules)
    n_max = (1 << 32) - 1
    for h, rule in enumerate(rules):
        (var,) = (v for v in SPEC.state_vars.values() if v.name in rule.text)
        ev._rules[h].instances[(var, 0)] = [0, n_max - 6, 0]
        inst = next(i for i in c.entries["state_instances"] if i["rule"] == rule.text)
        model = next(v for v in app.state.vars if v.name == var.name)
        tables.registers[model.registers[inst["bank"]]][inst["base"]] = \
            pack_cell(model, 0, n_max - 6, 0)
    seq = [(0, 5), (1, 5), (2, 1), (3, 1), (4, 0), (5, 9)]  # (ts, length)
    fired = []
    for ts, length in seq:
        values = {"m.k": 0, "m.a": 0, "m.b": 0}
        want = ev.packet(Packet(ts, values, length))
        assert tables.ports_at(app, values, ts, length) == want, (ts, length)
        fired.append(sorted(want))
    assert fired == [[], [], [2], [2], [2], [1, 2]]
    assert ev.instance(0, SPEC.state_vars["c"])[1] == n_max  # counted up to the maximum
    assert ev.instance(1, SPEC.state_vars["mb"])[1] == n_max  # 5 + 1 (the other 5 and 9 not)


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


# ---- refusals: what the machine model cannot hold, naming the rules ----------------------

def spec_with(extra: str):
    return parse_spec("""\
header m { bit<8> k; bit<8> a; bit<16> b; }
@pragma query_field_exact(m.k)
@pragma query_field(m.a)
@pragma query_counter(c, 10, 3)
""" + extra)


def test_more_rules_in_one_scope_than_banks_is_refused_naming_them():
    spec = spec_with("@pragma query_banks(2)\n")
    rs = parse_rules("c > 1 : fwd(1)\nk == 1 and c > 2 : fwd(2)\nc < 5 : fwd(3)", spec,
                     source="r.rules")
    with pytest.raises(StateError) as info:
        compile_rules(spec, rs)
    err = info.value
    assert err.line == 3 and "2 banks" in err.message and "state c" in err.message
    assert "line 1: c > 1 : fwd(1)" in err.message and "line 2: k == 1" in err.message
    # rules whose scopes are disjoint share a bank
    ok = parse_rules("k == 1 and c > 1 : fwd(1)\nk == 2 and c > 2 : fwd(2)\n"
                     "k == 3 and c > 3 : fwd(3)", spec)
    banks = {i["bank"] for i in compile_rules(spec, ok).entries["state_instances"]}
    assert banks == {0}


def test_incremental_refusal_leaves_the_rules_as_they_were():
    from compiler.incremental import Incremental

    spec = spec_with("@pragma query_banks(2)\n")
    rs = parse_rules("c > 1 : fwd(1)\nk == 1 and c > 2 : fwd(2)\nc < 5 : fwd(3)", spec)
    inc = Incremental(spec, rs[:2])
    before = inc.entries()
    with pytest.raises(StateError, match="2 banks"):
        inc.add(rs[2])
    assert inc.entries() == before and inc.current_rules() == rs[:2]
    step = inc.remove(rs[0])  # its bank is free again
    assert inc.add(rs[2]).insert and step.delete


def test_slots_thresholds_and_combinations_are_refused_at_the_rule():
    spec = spec_with("")
    rs = parse_rules("c > 1 : fwd(1)\nc > 2 : fwd(2)\nk == 1 and c > 3 : fwd(3)\n"
                     "c > 4 : fwd(4)", spec)
    with pytest.raises(StateError, match="3 slots") as info:
        compile_rules(spec, rs)
    assert info.value.line == 4
    many = " or ".join(f"c == {i}" for i in range(1, 11, 2))  # 10 thresholds on c
    with pytest.raises(StateError, match="at most 8") as info:
        compile_rules(spec, parse_rules(f"k == 1 : fwd(1)\n{many} : fwd(2)", spec))
    assert info.value.line == 2
    spec2 = parse_spec("""\
header m { bit<8> k; bit<8> a; bit<16> b; }
@pragma query_field(m.a)
@pragma query_counter(c, 10, 8)
@pragma query_counter(d, 10, 8)
@pragma query_counter(e, 10, 8)
""")
    text = " and ".join(f"{s} in {{1, 3, 5}}" for s in "cde")  # 7^3 combinations
    with pytest.raises(StateError, match="343 combinations"):
        compile_rules(spec2, parse_rules(text + " : fwd(1)", spec2))


def test_a_context_over_the_decide_budget_is_refused_naming_its_rules():
    spec = parse_spec("""\
header m { bit<8> k; bit<8> a; bit<16> b; }
@pragma query_field(m.a)
@pragma query_counter(c, 10, 16)
@pragma query_banks(16)
""")
    rules = "\n".join(f"c in {{{i}, {i + 10}, {i + 20}}} : fwd({i})" for i in range(1, 6))
    with pytest.raises(StateError, match="7 stateful|decide entries") as info:
        compile_rules(spec, parse_rules(rules, spec))
    assert "line 1: c in" in info.value.message


# ---- time: the spec's query_timestamp --------------------------------------------------------

def test_a_declared_time_field_is_the_messages_time_everywhere():
    spec = parse_spec("""\
header m { bit<8> k; bit<64> t; bit<8> a; }
@pragma query_field(m.a)
@pragma query_counter(c, 10, 8)
@pragma query_timestamp(m.t, ns)
""")
    rules = parse_rules("c >= 2 : fwd(1)", spec)
    ev = Evaluator(rules)
    c = compile_rules(spec, rules)
    tables, app = c.tables(), c.application
    assert app.state.timestamp.unit == "ns"
    # times in ns: windows of 10 µs; the packets' own ts_us (given as junk) is not read
    seq = [(0, set()), (9_999, {1}), (10_000, set()), (19_999_999, set()),
           (10_500, set()), (10_600, {1}),  # back to window 1: restarted there (out of order)
           ((1 << 64) - 1, set()), ((1 << 64) - 2, {1})]  # 2^64 ns: µs kept to 48 bits
    for i, (t_ns, want) in enumerate(seq):
        values = {"m.t": t_ns, "m.a": 0}
        assert ev.packet(Packet(777 * i, values)) == want, i
        assert tables.ports_at(app, values, 777 * i) == want, i


def test_query_timestamp_and_query_banks_errors_have_positions():
    from compiler.errors import SpecError

    base = "header m { bit<8> k; bit<64> t; }\n@pragma query_field(m.k)\n"
    for extra, what in [("@pragma query_timestamp(m.t, s)", "ns, us or ms"),
                        ("@pragma query_timestamp(m.x, ns)", "no field"),
                        ("@pragma query_timestamp(m.t)", "a field and a unit"),
                        ("@pragma query_timestamp(m.t, ns)\n@pragma query_timestamp(m.t, us)",
                         "twice"),
                        ("@pragma query_banks(0)", "1 .. 16"),
                        ("@pragma query_banks(17)", "1 .. 16")]:
        with pytest.raises(SpecError, match=what) as info:
            parse_spec(base + extra + "\n")
        assert info.value.line is not None and info.value.line >= 3, extra


def test_camus_compile_and_eval_run_the_slides_rule_in_time(tmp_path):
    # the ITCH spec with Fig. 4's counter and an average; the slides' rule; messages with
    # their times ("@ts") through camus eval, against the evaluator
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec_text = (root / "p4" / "itch" / "itch.p4").read_text() + (
        "@pragma query_counter(my_counter, 100, 1024)\n"
        "@pragma query_average(itch_order.price, 1000, 64)\n")
    (tmp_path / "itch.p4").write_text(spec_text)
    rules_text = 'stock == "GOOGL" and avg(price) > 50 : fwd(1)\nmy_counter > 2 : fwd(2)\n'
    (tmp_path / "r.rules").write_text(rules_text)
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, "-m", "camus", "compile", "itch.p4", "r.rules", "--out",
                        "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    rng = random.Random(5)
    messages = []
    for i in range(40):
        messages.append({"stock": rng.choice(["GOOGL", "MSFT"]), "price": rng.choice([20, 60, 90]),
                         "@ts": i * 37})
    lines = "\n".join(json.dumps(m) for m in messages) + "\n" + '{"price": 1}\n'
    r = subprocess.run([sys.executable, "-m", "camus", "eval", "--pipeline", "out"],
                       input=lines, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=env)
    spec = parse_spec(spec_text, name="itch")
    ev = Evaluator(parse_rules(rules_text, spec))
    want = []
    for m in messages:
        values = {"itch_order.stock": int.from_bytes(m["stock"].encode().ljust(8), "big"),
                  "itch_order.price": m["price"]}
        want.append(sorted(ev.packet(Packet(m["@ts"], values))))
    out = r.stdout.splitlines()
    assert [json.loads(x) for x in out[:-1]] == want and any(want)
    assert out[-1] == "null" and '"@ts"' in r.stderr and r.returncode == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_static_pipeline_with_state(seed):
    # the broker's kind of compile (static: the pipeline depends on the spec alone) takes
    # stateful rules; lanes are not used with state; incremental gives the same document
    from compiler.incremental import Incremental

    rng = random.Random(seed)
    rules = parse_rules("\n".join(random_rule(rng) for _ in range(4)), SPEC)
    try:
        c = compile_rules(SPEC, rules, static=True, lanes="auto")
    except StateError:
        return
    assert not c.application.lanes and c.pipeline.state_width == 32
    assert Incremental(SPEC, rules, static=True).entries() == c.entries
    tables, ev = c.tables(), Evaluator(rules)
    for pkt in random_packets(rng, 30):
        assert tables.ports_at(c.application, dict(pkt.values), pkt.ts_us, pkt.length) == \
            ev.packet(pkt)


def test_predicates_a_constant_decides_cut_no_regions():
    rules = parse_rules("(a > 3 or true or c in {1, 3, 5, 7, 9, 11}) and ck > 2 : fwd(1)",
                        SPEC)
    c = compile_rules(SPEC, rules)  # 13 thresholds on c, but none that matters
    binds = [e for e in c.entries["table_entries"] if e["action"] == "bind"]
    assert sorted(e["params"]["bounds"] for e in binds) == [0, 1]  # c still counts (scoped)


# ---- incremental changes never write marker ports (static and sized pipelines) ----------

def _ports_fit(pipeline, e: dict) -> bool:
    """Whether an entry's port parameters fit the pipeline's port bitmap: a `fwd` port
    below `ports_width`, a bitmap (`mcast`, `decide`) with no bit at or above it. Checked
    before `parse_entry`, whose error on a million-bit bitmap cannot even print it."""
    if e["action"] == "fwd":
        return e["params"]["port"] < pipeline.ports_width
    if e["action"] in ("mcast", "decide"):
        return e["params"]["ports"] >> pipeline.ports_width == 0
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), static=st.booleans(), n_rules=st.integers(0, 5),
       n_changes=st.integers(1, 10))
def test_incremental_changes_write_real_ports_and_keep_the_document(seed, static, n_rules,
                                                                    n_changes):
    # After every change: each written entry names ports the pipeline's bitmap holds (a
    # stateful leaf decides `stateful(ctx)`, never its pseudo-rules' marker ports); the
    # writes take the previous document to `entries()`; and `entries()`, loaded fresh, sends
    # packets where an evaluator of the current rules (fresh instances too) sends them.
    from compiler.incremental import Incremental, rule_key
    from p4rt.entry_key import entry_key
    from pipeline.entries import parse_entry

    rng = random.Random(seed)
    pool = parse_rules("\n".join(random_rule(rng) for _ in range(n_rules + 4)), SPEC)
    try:
        inc = Incremental(SPEC, pool[:n_rules], static=static)
    except StateError:
        return
    held = {entry_key(e): e for e in inc.entries()["table_entries"]}
    for change in range(n_changes):
        live = inc.current_rules()
        try:
            if live and rng.random() < 0.5:
                step = inc.remove(rng.choice(live))
            else:
                step = inc.add(rng.choice(pool))
        except StateError as exc:
            assert "line " in str(exc)
            continue
        pipeline, doc = inc.pipeline, inc.entries()
        if static:
            assert not (step.rebuilt or step.resized)
        for op, item in step.steps():
            if op in ("insert", "modify"):
                assert _ports_fit(pipeline, item), (seed, change, item["table"], item["action"])
                parse_entry(pipeline, item)
                held[entry_key(item)] = item
            elif op == "delete":
                held.pop(entry_key(item))
        if step.rebuilt or step.resized:  # a new program: its document is loaded whole
            held = {entry_key(e): e for e in doc["table_entries"]}
        assert held == {entry_key(e): e for e in doc["table_entries"]}, (seed, change)
        for e in doc["table_entries"]:
            assert _ports_fit(pipeline, e), (seed, change, e["table"], e["action"])
        tables, ev = interpreter.load(pipeline, doc), Evaluator(inc.current_rules())
        app = pipeline.applications[0]
        for i, pkt in enumerate(random_packets(rng, 15)):
            assert tables.ports_at(app, dict(pkt.values), pkt.ts_us, pkt.length) == \
                ev.packet(pkt), (seed, change, i, [r.text for r in inc.current_rules()])


def test_a_leaf_joining_a_context_in_use_decides_it():
    # the P4 engineer's case (tests/p4/test_p4_state.py), on the property test's spec: after
    # the removal, a new leaf node holds the context an old leaf held (its id unchanged)
    from compiler.incremental import Incremental

    for static in (False, True):
        rules = parse_rules("avg(a) > 0 : fwd(3)\nk == 0 and ck != 2 : fwd(1)", SPEC)
        inc = Incremental(SPEC, rules, static=static)
        step = inc.remove(rules[1])
        written = [e for op, e in step.steps() if op in ("insert", "modify")]
        assert written and all(_ports_fit(inc.pipeline, e) for e in written)
        assert "stateful" in {e["action"] for e in written}
        assert inc.entries()["table_entries"] == \
            compile_rules(SPEC, inc.current_rules(), static=static).entries["table_entries"]
