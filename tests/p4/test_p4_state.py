"""The state stages of the generated P4 (compiler/p4/state.py, docs/p4.md "State").

* The window index and a nanosecond time field's microseconds are divisions by constants,
  which p4c-bm2-ss refuses (`/` needs both operands known at compile time), so the program
  multiplies by a reciprocal and shifts: `test_reciprocal_*` check the theorem's hypothesis
  for every divisor and width the program can meet, which proves the result exact for every
  input of the width, and try the inputs where a wrong constant would show first.
* The emitted program text, run by the test interpreter (tests/p4/p4_interp.py: registers
  that persist across frames, the ingress timestamp), gives byte for byte the copies of the
  Python reference switch, frame after frame, on random stateful rule sets and timed frames
  (ITCH over MoldUDP64: each message a packet of its own for state; single-message
  specs with a time field in us, ms or ns), and both give `compiler.semantics.Evaluator`'s
  port sets. bmv2 running the same programs is tests/p4/test_bmv2_differential.py.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.p4 import emit_program
from compiler.p4.state import divide, reciprocal
from switch.dataplane import load
from tests.p4 import diff_cases
from tests.p4.p4_interp import Interpreter

WIDTHS = (8, 16, 32, 48, 64)


def _check(d: int, bits: int) -> None:
    m, k = reciprocal(d, bits)
    if m == 1:
        assert d == 1 << k
        return
    # The hypothesis of the proof in `reciprocal`'s docstring: m*d = 2^k + e, 0 <= e < d,
    # and d <= 2^(k - bits), so x*e < 2^k for every x < 2^bits.
    e = m * d - (1 << k)
    assert 0 <= e < d <= 1 << (k - bits), (d, bits)
    # and, on the inputs nearest to each quotient step, the quotient itself
    top = (1 << bits) - 1
    q_top = top // d
    xs = {0, 1, d - 1, d, d + 1, top, top - 1, q_top * d, q_top * d - 1}
    rng = random.Random(d * 131 + bits)
    for _ in range(200):
        q = rng.randint(0, q_top)
        xs.update({q * d, q * d - 1, q * d + d - 1, rng.randint(0, top)})
    for x in xs:
        if 0 <= x <= top:
            assert x * m >> k == x // d, (x, d, bits)
    assert (top * m).bit_length() <= bits + m.bit_length()  # the product's declared width


def test_reciprocal_is_exact_for_the_windows_and_units_the_program_meets():
    windows = [1, 2, 3, 5, 7, 10, 20, 30, 50, 100, 1000, 1_000_000, 999_983, (1 << 48) - 1,
               (1 << 47) + 1, 1 << 40, 86_400_000_000, 3_600_000_000]
    for bits in WIDTHS:
        for d in windows + [1000]:  # 1000: a nanosecond field's microseconds
            _check(d, bits)


@settings(max_examples=400, deadline=None)
@given(d=st.integers(1, (1 << 48) - 1), bits=st.sampled_from(WIDTHS))
def test_reciprocal_is_exact_for_any_divisor(d, bits):
    _check(d, bits)


def test_divide_is_a_shift_for_powers_of_two_and_a_multiply_otherwise():
    assert divide("ts", 48, 1) == "ts"
    assert divide("ts", 48, 1024) == "(ts >> 10)"
    m, k = reciprocal(100, 48)
    assert divide("ts", 48, 100) == f"(bit<48>)(((bit<{48 + m.bit_length()}>)ts * {48 + m.bit_length()}w{m}) >> {k})"


def run_case(case: diff_cases.StateCase, probes) -> None:
    rs = case.rs
    py = load(rs.compiled.pipeline, rs.entries, impl="python")
    program = Interpreter(emit_program(rs.compiled.pipeline), rs.entries)
    for i, (p, ts) in enumerate(probes):
        out = py.process(p.frame, 0, ts)
        if p.want is not None:
            assert {port for port, _ in out} == p.want, (i, p.what, rs.text)
        assert program.process(p.frame, 0, ts_us=ts) == out, (i, p.frame.hex(), case.spec_text, rs.text)
    for register, cells in program.registers.items():  # the same cells, written the same way
        for index, cell in cells.items():
            assert py.read_cell(register, index) == cell, (register, index)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["itch", "single"]), timed=st.booleans())
def test_program_text_equals_the_reference_switch_and_the_evaluator(seed, kind, timed):
    rng = random.Random(seed)
    case = diff_cases.state_case(kind, rng, timed=timed or kind == "single")
    run_case(case, diff_cases.state_probes(case, rng, 30))


def test_static_incremental_removal_writes_entries_the_pipeline_takes():
    """Found here by the bmv2 differential's rule changes: with a static pipeline, removing
    `k == 0 and ck != 2 : fwd(1)` from beside `avg(a) > 0 : fwd(3)` used to insert an
    `mcast` leaf entry of the pseudo-rules' marker ports (1,048,641 bits), because the new
    leaf node joined a context that already had an id and was never given it. Every entry
    written now parses against the pipeline, and the leaf decides `stateful(ctx)`."""
    from compiler.incremental import Incremental
    from compiler.rules import parse_rules
    from compiler.spec import parse_spec
    from pipeline.entries import parse_entry

    spec = parse_spec(diff_cases.SINGLE_STATE_SPEC + "@pragma query_banks(2)\n", name="st")
    rules = parse_rules("avg(a) > 0 : fwd(3)\nk == 0 and ck != 2 : fwd(1)", spec)
    inc = Incremental(spec, rules, static=True)
    step = inc.remove(rules[1])
    written = [parse_entry(inc.pipeline, item) for op, item in step.steps()
               if op in ("insert", "modify")]
    assert written and "stateful" in {e.action for e in written}


def test_cells_to_zero_are_the_new_rules_ranges():
    """`controller.push.cell_resets`: with the previous document, the ranges of rules that
    were not there with the same text and line (here the one added); without it, all."""
    from compiler.incremental import Incremental
    from compiler.rules import parse_rules
    from compiler.spec import parse_spec
    from controller.push import cell_resets

    spec = parse_spec(diff_cases.SINGLE_STATE_SPEC + "@pragma query_banks(2)\n", name="st")
    rules = parse_rules("c > 3 : fwd(1)\nck > 1 : fwd(2)\navg(a) > 7 : fwd(3)", spec)
    inc = Incremental(spec, rules[:2], static=True)
    before = inc.entries()
    step = inc.add(rules[2])
    after = inc.entries()
    everything = cell_resets(inc.pipeline, after)
    assert sorted(everything) == sorted(
        (f"st_{i['state'].replace('(', '_').replace(')', '').replace('.', '_')}_r{i['bank']}",
         i["base"], i["buckets"]) for i in after["state_instances"])
    new, = [i for i in after["state_instances"] if i["rule"] == "avg(a) > 7 : fwd(3)"]
    assert cell_resets(inc.pipeline, after, before) == [(f"st_avg_m_a_r{new['bank']}", new["base"], 1)]
    assert cell_resets(inc.pipeline, before, before) == []
    # the compiler's own resets are a subset: a fresh unit needs none
    assert set(step.reset_cells) <= set(cell_resets(inc.pipeline, after, before))


def test_register_entries_name_p4cs_registers_and_carry_canonical_cells():
    from compiler.compile import compile_files
    from p4rt.entries import cell_value, register_entry
    from p4rt.index import P4InfoIndex
    from p4rt.p4info import program_p4info
    from p4rt.values import BadValue
    from tests.p4.test_p4_golden import GOLDEN, ROOT, STATE_SPECS

    c = compile_files(ROOT / STATE_SPECS["itch_state"], GOLDEN / "itch_state" / "rules.txt")
    index = P4InfoIndex(program_p4info(c.pipeline))
    r = index.register("itch_avg_itch_order_price_r1")
    assert (r.name, r.bitwidth, r.size) == ("CamusIngress.itch_avg_itch_order_price_r1", 144, 256)
    assert index.register("CamusIngress.itch_orders_r0").bitwidth == 80
    e = register_entry(index, "itch_my_counter_r0", 1023, 0)
    assert (e.register_id, e.index.index, e.data.bitstring) == (index.register("itch_my_counter_r0").id, 1023, b"\0")
    e = register_entry(index, "itch_avg_itch_order_price_r0", 3, 7 << 96 | 2 << 64 | 101)
    assert cell_value(index, e) == 7 << 96 | 2 << 64 | 101
    with pytest.raises(BadValue):
        register_entry(index, "itch_my_counter_r0", 1024, 0)
    with pytest.raises(BadValue):
        register_entry(index, "itch_my_counter_r0", 0, 1 << 80)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_saturation_and_stale_tags_as_the_tables_interpreter(seed):
    """Cells no short frame sequence reaches: counts at and near 2^32 - 1, sums near 2^64,
    tags of other windows (earlier, later, 2^48 - 1). The program text and the IR's own
    interpreter (`pipeline.interpreter.Tables`) start from the same cells and must give the
    same ports and write the same cells."""
    import struct

    from compiler.compile import compile_rules
    from compiler.rules import parse_rules
    from compiler.spec import parse_spec
    from pipeline import interpreter
    from switch.packet import udp_frame

    rng = random.Random(seed)
    spec = parse_spec(diff_cases.SINGLE_STATE_SPEC + "@pragma query_banks(2)\n@pragma query_timestamp(m.t, us)\n", name="st")
    text = "\n".join(diff_cases.random_state_rule(rng) for _ in range(rng.randint(1, 4)))
    try:
        c = compile_rules(spec, parse_rules(text, spec), static=True)
    except diff_cases.StateError:
        return
    tables = interpreter.load(c.pipeline, c.entries)
    program = Interpreter(emit_program(c.pipeline), c.entries)
    app = c.pipeline.applications[0]
    n_max, s_max, t_max = (1 << 32) - 1, (1 << 64) - 1, (1 << 48) - 1
    for _ in range(12):
        values = {"m.k": rng.choice([0, 1, 2, 3]), "m.a": rng.choice([0, 1, 200, 255]),
                  "m.b": rng.choice([0, 7]), "m.t": rng.choice([0, 5, 99, 1000, (1 << 32) - 1])}
        for inst in c.entries["state_instances"]:  # seed the cells this message may touch
            var = next(v for v in app.state.vars if v.name == inst["state"])
            for i in range(inst["base"], inst["base"] + inst["buckets"]):
                w = values["m.t"] // var.window_us
                tag = rng.choice([w, w, w - 1, w + 1, t_max, 0]) & t_max
                n = rng.choice([n_max, n_max - 1, n_max - 40, 0, 1, 3])
                s = rng.choice([s_max, s_max - 100, 0, n * 255]) if var.kind == "average" else 0
                cell = interpreter.pack_cell(var, tag, n, s & s_max)
                tables.registers[var.registers[inst["bank"]]][i] = cell
                program.registers[var.registers[inst["bank"]]][i] = cell
        msg = bytes([values["m.k"], values["m.a"]]) + struct.pack("!HI", values["m.b"], values["m.t"])
        msg += bytes(rng.choice([0, 0, 30]))
        want = {p for p, _ in tables.process(app, lambda f: values[f.name], 0, len(msg))}
        got = {p for p, _ in program.process(udp_frame(msg, dst_port=app.udp_port), 0)}
        assert got == want, (text, values)
        for register, cells in tables.registers.items():
            assert {i: v for i, v in program.registers[register].items() if v} == \
                {i: v for i, v in cells.items() if v}, register
