"""Stateful subscriptions, one definition point of docs/stateful.md at a time.

Each test names the paragraph it pins: windows, own-update visibility, integer comparisons,
overflow, keyed state, scope, rule changes, slots; and the compiler's output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.ast import StateAtom, rule_state
from compiler.compile import compile_rules
from compiler.errors import StateError
from compiler.incremental import Incremental
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Packet, evaluate, run
from compiler.spec import parse_spec

SPEC = """\
header itch_order { bit<16> stock_locate; bit<32> shares; bit<64> stock; bit<32> price; }
@pragma query_field(itch_order.price)
@pragma query_field(itch_order.shares)
@pragma query_field_exact(itch_order.stock)
@pragma ascii(itch_order.stock)
@pragma query_counter(my_counter, 100, 1024)
@query_average(itch_order.price, 1000, 64)
#pragma query_meter(orders, packets, 1000000, 4096, itch_order.stock_locate, 1024)
@pragma query_meter(volume, bytes, 1000, 8)
@pragma query_counter(tiny, 10, 2)
"""


@pytest.fixture(scope="module")
def spec():
    return parse_spec(SPEC)


def rules(spec, text):
    return parse_rules(text, spec, source="t.rules")


def pkt(ts, stock="GOOGL", price=0, locate=0, length=None, shares=0):
    return Packet(ts, {"itch_order.stock": _ascii(stock), "itch_order.price": price,
                       "itch_order.stock_locate": locate, "itch_order.shares": shares}, length)


def _ascii(text):
    return int.from_bytes(text.encode().ljust(8, b" "), "big")


def fired(spec, text, packets):
    """For each packet, whether the (single-port) rules forwarded it: a list of bools."""
    return [bool(ports) for ports in run(rules(spec, text), packets)]


# ---- the language ----------------------------------------------------------------------

def test_declarations_in_every_spelling(spec):
    c, a, m, v = (spec.state_vars[n] for n in
                  ("my_counter", "avg(itch_order.price)", "orders", "volume"))
    assert (c.kind, c.window_us, c.slots, c.key, c.buckets) == ("counter", 100, 1024, None, 1)
    assert (a.kind, a.field, a.field_width, a.window_us) == ("average", "itch_order.price", 32,
                                                            1000)
    assert (m.unit, m.key, m.buckets, m.slots) == ("packets", "itch_order.stock_locate", 1024,
                                                   4096)
    assert (v.unit, v.message_bytes) == ("bytes", 18)


def test_the_documented_examples_parse(spec):
    rs = rules(spec, """\
stock == "GOOGL" and avg(price) > 50 : fwd(1)
my_counter > 100 : fwd(2)
not (stock == "MSFT" or my_counter <= 10) : fwd(3)
rate(orders) >= 5000 : fwd(4)
5000 > rate(orders) : fwd(5)
stock == "GOOGL" and my_counter < 100 : fwd(6), count(my_counter)
price > 5 : avg(price), meter(orders)
my_counter in {1, 2, 0x3} and avg(itch_order.price) != 7 : fwd(7)
""")
    assert str(rs[1].filter) == "my_counter > 100"
    assert str(rs[4].filter) == "rate(orders) < 5000"  # flipped
    assert rs[5].updates == {spec.state_vars["my_counter"]} and rs[5].ports == {6}
    assert rs[6].ports == frozenset() and len(rs[6].updates) == 2
    assert {v.name for v in rule_state(rs[7])} == {"my_counter", "avg(itch_order.price)"}
    atom = rs[0].filter.items[1]
    assert isinstance(atom, StateAtom) and (atom.line, atom.column) == (1, 35)


def test_stateless_rules_are_untouched_by_state_declarations(spec):
    (r,) = rules(spec, "price > 5 : fwd(1)")
    assert r.updates == frozenset() and rule_state(r) == []
    assert evaluate([r], {"itch_order.price": 6}) == {1}


# ---- windows ----------------------------------------------------------------------------

def test_tumbling_window_boundaries_on_timestamps(spec):
    # window 100 µs: 0..99 is window 0, 100 starts window 1, whatever the gap
    got = fired(spec, "my_counter >= 3 : fwd(1)",
                [pkt(0), pkt(50), pkt(99), pkt(100), pkt(101), pkt(199), pkt(200)])
    assert got == [False, False, True, False, False, True, False]


def test_a_window_ends_by_itself_and_an_idle_instance_reads_zero(spec):
    # `my_counter == 0` is never true for a scoped counter (a packet sees its own count)
    # but `< 2` is: the count of window 1 does not carry over to window 5
    got = fired(spec, "my_counter < 2 : fwd(1)", [pkt(100), pkt(150), pkt(520), pkt(530)])
    assert got == [True, False, True, False]


def test_window_tags_are_whole_indices_no_wraparound(spec):
    # an instance idle for exactly 2^16 and 2^32 windows starts empty: no aliasing
    for gap in (1 << 16, 1 << 32):
        got = fired(spec, "my_counter == 2 : fwd(1)", [pkt(5), pkt(gap * 100 + 5)])
        assert got == [False, False], gap


def test_out_of_order_update_restarts_the_instance_in_its_window(spec):
    got = fired(spec, "my_counter == 1 : fwd(1)", [pkt(250), pkt(260), pkt(10), pkt(270)])
    # 250: n=1 (fires); 260: 2; 10 (window 0): restarts there, n=1 (fires);
    # 270 (window 2 again): restarts, n=1 (fires)
    assert got == [True, False, True, True]


def test_timestamps_and_lengths_are_checked(spec):
    ev = Evaluator(rules(spec, "my_counter > 1 : fwd(1)"))
    for bad in (-1, 1 << 48, 1.5):
        with pytest.raises(ValueError):
            ev.packet(pkt(bad))
    with pytest.raises(ValueError):
        ev.packet(pkt(0, length=65536))


# ---- own-update visibility ----------------------------------------------------------------

def test_scoped_update_is_visible_to_its_own_test(spec):
    assert fired(spec, "my_counter == 1 : fwd(1)", [pkt(0), pkt(1)]) == [True, False]


def test_update_action_is_not_visible_to_its_own_test(spec):
    assert fired(spec, "my_counter == 0 : fwd(1), count(my_counter)",
                 [pkt(0), pkt(1)]) == [True, False]


def test_quota_forwards_the_first_n_of_each_window(spec):
    text = 'stock == "GOOGL" and my_counter < 3 : fwd(6), count(my_counter)'
    packets = [pkt(t) for t in (0, 1, 2, 3, 4)] + [pkt(5, "MSFT")] + [pkt(100), pkt(101)]
    assert fired(spec, text, packets) == [True, True, True, False, False, False, True, True]


def test_update_action_needing_a_count_first_never_starts(spec):
    assert fired(spec, "my_counter > 0 : fwd(1), count(my_counter)",
                 [pkt(t) for t in range(5)]) == [False] * 5


# ---- integer comparisons ------------------------------------------------------------------

def test_average_is_compared_exactly(spec):
    prices = [50, 51]  # average 50.5
    cases = {"avg(price) > 50": True, "avg(price) >= 51": False, "avg(price) == 50": False,
             "avg(price) < 51": True, "avg(price) != 50": True, "avg(price) <= 50": False}
    for filt, want in cases.items():
        got = fired(spec, f"{filt} : fwd(1)", [pkt(0, price=p) for p in prices])
        assert got[-1] is want, filt


def test_average_covers_the_rules_scope_only(spec):
    text = 'stock == "GOOGL" and avg(price) > 50 : fwd(1)'
    packets = [pkt(0, "GOOGL", 40), pkt(1, "MSFT", 1000), pkt(2, "GOOGL", 70),
               pkt(3, "MSFT", 1000), pkt(1000, "GOOGL", 49)]
    # GOOGL: 40 -> 40; 40, 70 -> 55; new window (1000 µs): 49
    assert fired(spec, text, packets) == [False, False, True, False, False]


def test_empty_average_is_zero_under_an_update_action(spec):
    text = "avg(price) == 0 : fwd(1), avg(price)"
    assert fired(spec, text, [pkt(0, price=9), pkt(1, price=9)]) == [True, False]


def test_rate_is_units_so_far_over_the_window(spec):
    # orders: 1 s windows, so rate(orders) > 2 means a third order in the second
    text = "rate(orders) > 2 : fwd(1)"
    got = fired(spec, text, [pkt(t) for t in (0, 10, 20, 999_999, 1_000_000)])
    assert got == [False, False, True, True, False]
    # volume: bytes over 1000 µs; 18-byte messages by default: 18 bytes per ms = 18,000 B/s
    got = fired(spec, "rate(volume) >= 36000 : fwd(1)", [pkt(0), pkt(1), pkt(2)])
    assert got == [False, True, True]
    got = fired(spec, "rate(volume) == 1000 : fwd(1)", [pkt(0, length=1), pkt(1, length=0)])
    assert got == [True, True]


# ---- overflow -------------------------------------------------------------------------------

def test_bytes_meter_saturates_at_32_bits(spec):
    # 65537 packets of 65535 bytes make exactly 2^32 - 1; one more byte is not added
    top = (1 << 32) - 1
    ev = Evaluator(rules(spec, f"rate(volume) == {top * 1000} : fwd(1)"))
    answers = [ev.packet(pkt(7, length=65535)) for _ in range(65537)]
    assert answers[-1] == {1} and answers[-2] == set()
    assert ev.packet(pkt(8, length=1)) == {1}
    assert ev.instance(0, spec.state_vars["volume"]) == (0, top, 0)


def test_average_saturates_whole(spec):
    # n at its maximum: the next packet adds neither to n nor to s
    ev = Evaluator(rules(spec, "avg(price) > 0 : fwd(1)"))
    avg = spec.state_vars["avg(itch_order.price)"]
    ev.packet(pkt(0, price=3))
    ev._rules[0].instances[avg, 0][1] = (1 << 32) - 1  # white box: 2^32 - 1 packets later
    ev.packet(pkt(1, price=1 << 31))
    assert ev.instance(0, avg) == (0, (1 << 32) - 1, 3)


# ---- keyed state ----------------------------------------------------------------------------

def test_keyed_meter_has_one_instance_per_bucket(spec):
    text = "rate(orders) > 1 : fwd(1)"
    packets = [pkt(0, locate=5), pkt(1, locate=6), pkt(2, locate=5), pkt(3, locate=6),
               pkt(4, locate=7), pkt(5, locate=5 + 1024)]  # 5 + 1024: bucket 5, by definition
    assert fired(spec, text, packets) == [False, False, True, True, False, True]
    ev = Evaluator(rules(spec, text))
    for p in packets:
        ev.packet(p)
    orders = spec.state_vars["orders"]
    assert [ev.instance(0, orders, b)[1] for b in (5, 6, 7, 8)] == [3, 2, 1, 0]


def test_one_keyed_rule_serves_every_identifier(spec):
    # the hICN shape: hot content to the forwarder (1), the rest upstream (2), two rules
    rs = rules(spec, "rate(orders) >= 3 : fwd(1)\nrate(orders) < 3 : fwd(2)")
    got = list(run(rs, [pkt(t, locate=t % 2) for t in range(6)]))
    assert got == [{2}, {2}, {2}, {2}, {1}, {1}]


# ---- scope ----------------------------------------------------------------------------------

def test_scope_is_three_valued(spec):
    # `not (MSFT or unknown)` is false for MSFT: MSFT packets are not counted
    text = 'not (stock == "MSFT" or my_counter <= 1) : fwd(1)'
    packets = [pkt(0, "MSFT"), pkt(1, "MSFT"), pkt(2, "AAPL"), pkt(3, "AAPL")]
    assert fired(spec, text, packets) == [False, False, False, True]
    # `GOOGL or unknown` is true: every packet is in scope, GOOGL ones are counted too
    ev = Evaluator(rules(spec, 'stock == "GOOGL" or my_counter > 2 : fwd(1)'))
    got = [ev.packet(pkt(t, s)) for t, s in enumerate(["GOOGL", "GOOGL", "MSFT", "MSFT"])]
    assert got == [{1}, {1}, {1}, {1}]
    assert ev.instance(0, spec.state_vars["my_counter"])[1] == 4


# ---- rule changes ---------------------------------------------------------------------------

def test_a_rule_change_touches_no_other_rule_and_starts_itself_empty(spec):
    a, b = rules(spec, "my_counter == 3 : fwd(1)\nmy_counter == 1 : fwd(2)")
    ev = Evaluator([a])
    assert [ev.packet(pkt(t)) for t in (0, 1)] == [set(), set()]
    hb = ev.add(b)  # b starts empty while a has counted 2
    assert ev.packet(pkt(2)) == {1, 2}
    ev.remove(hb)
    hb = ev.add(b)  # the same rule again: new, empty instances
    assert ev.packet(pkt(3)) == {2}
    ev.remove(0)  # removing a leaves b's count alone
    assert ev.packet(pkt(4)) == set() and ev.instance(hb, b.filter.state)[1] == 2


def test_equal_rules_do_not_share_instances(spec):
    r, = rules(spec, "my_counter == 1 : fwd(1)")
    ev = Evaluator([r])
    ev.packet(pkt(0))
    ev.add(r)
    assert ev.packet(pkt(1)) == {1}  # the second copy sees its own first packet


# ---- slots ----------------------------------------------------------------------------------

def test_slots_running_out_is_refused_naming_the_rules(spec):
    text = "tiny > 1 : fwd(1)\nprice > 3 : fwd(2)\ntiny < 5 : fwd(3)\ntiny == 2 : fwd(4)"
    rs = rules(spec, text)
    with pytest.raises(StateError) as info:
        Evaluator(rs)
    err = info.value
    assert err.line == 4 and "tiny" in err.message and "2 slots" in err.message
    assert "line 1: tiny > 1 : fwd(1)" in err.message and "line 4: tiny == 2" in err.message
    ev = Evaluator(rs[:3])
    with pytest.raises(StateError):
        ev.add(rs[3])
    assert sorted(ev.rules) == [0, 1, 2]  # unchanged


def test_keyed_state_takes_its_buckets_per_rule(spec):
    # orders: 4096 slots, 1024 buckets each: four rules fit, a fifth does not
    rs = rules(spec, "\n".join(f"rate(orders) > {i} : fwd(1)" for i in range(5)))
    Evaluator(rs[:4])
    with pytest.raises(StateError, match="1024 buckets each"):
        Evaluator(rs)


# ---- the reference evaluator and the compiler ----------------------------------------------

def test_evaluate_refuses_state_and_evaluator_agrees_on_stateless(spec):
    rs = rules(spec, 'price > 5 : fwd(1)\nstock == "MSFT" or shares < 3 : fwd(2)')
    packets = [pkt(t, s, p, shares=sh) for t, (s, p, sh) in
               enumerate([("GOOGL", 6, 9), ("MSFT", 1, 9), ("AAPL", 0, 0)])]
    assert list(run(rs, packets)) == [evaluate(rs, p.values) for p in packets]
    with pytest.raises(TypeError, match="Evaluator"):
        evaluate(rules(spec, "my_counter > 1 : fwd(1)"), {})


def test_compiler_compiles_state_and_incremental_agrees(spec):
    # stateful rules compile (docs/pipeline-ir.md, "State"), from scratch and incrementally
    rs = rules(spec, "price > 5 : fwd(1)\nprice > 7 and avg(price) > 5 : fwd(2)")
    c = compile_rules(spec, rs)
    assert c.pipeline.version == 4 and c.entries["camus_entries"] == 3
    assert [i["rule"] for i in c.entries["state_instances"]] == [rs[1].text]
    inc = Incremental(spec, rs[:1])
    step = inc.add(rs[1])
    assert step.insert and inc.entries() == c.entries
    tables, app = c.tables(), c.application
    ev = Evaluator(rs)
    for t, price in enumerate([8, 3, 9, 2, 2, 2, 8]):
        p = pkt(t, price=price)
        assert tables.ports_at(app, p.values, t) == ev.packet(p)


def test_the_reference_page_examples_parse():
    # docs/stateful.md's spec and rules, as written there
    page = (Path(__file__).parents[2] / "docs" / "stateful.md").read_text()
    blocks = re.findall(r"```(\w*)\n(.*?)```", page, re.S)
    (spec_text,) = [text for lang, text in blocks if lang == "p4"]
    doc_spec = parse_spec(spec_text)
    assert set(doc_spec.state_vars) == {"my_counter", "avg(itch_order.price)", "orders"}
    rule_text = next(text for lang, text in blocks if not lang and ": fwd(" in text)
    assert len(parse_rules(rule_text, doc_spec)) == 6
    # the hICN example: its declaration is the product's hICN spec's, its two rules
    hicn = next(text for lang, text in blocks if "query_meter(hot" in text)
    declaration, _, hicn_rules = hicn.partition("\n\n")
    base = (Path(__file__).parents[2] / "p4" / "hicn" / "hicn.p4").read_text()
    assert declaration.split("//")[0].strip() in base
    hicn_spec = parse_spec(base)
    hot, cold = parse_rules(hicn_rules, hicn_spec)
    packets = [Packet(t, {"hicn.content": 7 + (t % 2) * 65536}) for t in range(201)]
    got = list(run([hot, cold], packets))  # 7 and 7 + 65536 share a bucket
    assert got[98] == {2} and got[99] == {1}


def test_camus_compile_compiles_stateful_rules_and_refuses_alpha_on_them(tmp_path):
    (tmp_path / "app.p4").write_text(SPEC)
    (tmp_path / "subs.rules").write_text("price > 5 : fwd(1)\nmy_counter > 100 : fwd(2)\n")
    (tmp_path / "ch.txt").write_text("+ price > 9 : fwd(3)\n+ avg(price) > 9 : fwd(3)\n"
                                     "- my_counter > 100 : fwd(2)\n")
    root = Path(__file__).resolve().parents[2]

    def camus(*args):
        return subprocess.run([sys.executable, "-m", "camus", "compile", "app.p4", *args],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(root)})

    r = camus("subs.rules", "--out", "a")
    assert r.returncode == 0, r.stderr
    assert '"camus_ir": 4' in (tmp_path / "a" / "pipeline.json").read_text()
    r = camus("subs.rules", "--out", "b", "--changes", "ch.txt")
    assert r.returncode == 0, r.stderr
    entries = json.loads((tmp_path / "b" / "entries.json").read_text())
    assert [i["rule"] for i in entries["state_instances"]] == ["avg(price) > 9 : fwd(3)"]
    r = camus("subs.rules", "--out", "c", "--alpha", "10")
    assert r.returncode != 0 and "subs.rules:2:1" in r.stderr and "--alpha" in r.stderr
    assert not (tmp_path / "c" / "entries.json").exists()
