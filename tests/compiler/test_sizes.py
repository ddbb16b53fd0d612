"""Sizes known before they are paid (issue 16 item 3): state ids as wide as needed, the size
estimate, and `--max-entries` refusing before anything is built."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler.diagram
from compiler import estimate
from compiler.compile import TooLarge, compile_rules, compile_text
from compiler.normalize import dnf
from compiler.order import choose
from compiler.p4 import emit_program
from compiler.rules import parse_rules
from compiler.spec import load_spec
from compiler.tables import state_bits

ROOT = Path(__file__).resolve().parents[2]
ITCH = load_spec(ROOT / "p4" / "itch" / "itch.p4")


def itch_rules(n: int, fields: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r = f'stock == "S{rng.randrange(20):02d}" and price > {rng.randint(1, 999)}'
        if fields == 3:
            r += f" and shares < {rng.randint(1, 999)}"
        out.append(f"{r} : fwd({rng.randint(1, 200)})")
    return "\n".join(out)


def test_state_ids_are_as_wide_as_the_states_need():
    assert state_bits(1) == 16 and state_bits(255) == 16 and state_bits(256) == 24
    assert state_bits(70_000) == 32  # past 65,535 ids: no 16-bit ceiling
    assert state_bits(10, static=True) == 32  # a static pipeline keeps its width
    with pytest.raises(OverflowError):
        state_bits(1 << 48)
    small = compile_text((ROOT / "p4/itch/itch.p4").read_text(), 'stock == "A" : fwd(1)\n', name="itch")
    big = compile_rules(ITCH, parse_rules(itch_rules(3000, 2), ITCH))
    assert small.pipeline.state_width == 16
    assert big.stats["states"] > 256 and big.pipeline.state_width == 24
    assert "bit<24> state;" in emit_program(big.pipeline)  # P4 declares the width needed
    assert max(e["params"]["state"] for e in big.entries["table_entries"]
               if e["action"] == "set_state") < 1 << 24


def test_over_budget_is_refused_while_the_diagram_grows():
    """The estimate is over the budget, so the build runs on trial and stops once the entries
    it has counted for sure pass the budget, long before the diagram's full size."""
    rules = parse_rules(itch_rules(3000, 3), ITCH)
    with pytest.raises(TooLarge) as exc:
        compile_rules(ITCH, rules, max_entries=100_000)
    message = str(exc.value)
    assert "field order itch_order.stock -> " in message  # the order used
    assert "more than the budget of 100,000 entries" in message
    assert "entries were counted for sure" in message
    assert "The size comes from itch_order." in message and "lines 1, 2, 3, 4, 5" in message
    assert "Approximated with alpha 100 " in message and "within the budget" in message
    assert "--max-entries" in message


@pytest.mark.parametrize("seed", [74, 925])
def test_a_loose_estimate_over_the_budget_does_not_refuse_a_small_compile(seed):
    """Random 10-field Kafka rule sets the estimate puts at 5*10^10 and 1.5*10^11 entries
    compile to a few hundred: the default budget must not refuse them (the outside judge's
    campaign, through `camus compile` with its default --max-entries)."""
    from tests.compiler import outside

    outside.campaign(seed, subprocess_mode=False, app_name="kafka", n_messages=10, n_frames=4)


def test_the_message_names_an_order_that_fits():
    """price has 300 constants and shares 2: shares first fits the budget, price first does not."""
    spec = load_spec(ROOT / "p4/itch/itch.p4")
    text = "\n".join(f"price > {i} and shares > {i % 2} : fwd(1)" for i in range(300))
    rules = parse_rules(text, spec)
    from compiler import order
    from compiler.compile import _too_large

    items = [(c, r.ports) for r in rules for c in dnf(r.filter, r.line)]
    fields = order.choose(spec, (c for c, _ in items), ["itch_order.price", "itch_order.shares"], False)
    predicted = estimate.estimate([c for c, _ in items], fields)
    assert predicted.entries > 1_000
    message = str(_too_large(items, rules, fields, 1_000, predicted))
    assert "Another field order fits: --field-order itch_order.shares,itch_order.price" in message
    # The estimate is an upper bound: these rules collapse to 2 entries in either order, so a
    # compile with that budget succeeds.
    assert compile_rules(spec, rules, ["itch_order.price", "itch_order.shares"], max_entries=1_000)
    assert compile_rules(spec, rules, ["itch_order.shares", "itch_order.price"], max_entries=2_000)


def test_the_cli_refuses_with_the_message_and_loses_nothing(tmp_path):
    from camus.cli import main

    (tmp_path / "r.rules").write_text(itch_rules(2000, 3))
    out = tmp_path / "o"
    assert main(["compile", str(ROOT / "p4/itch/itch.p4"), str(tmp_path / "r.rules"), "--out", str(out),
                 "--max-entries", "50000"]) == 2
    assert not out.exists()
    assert main(["compile", str(ROOT / "p4/itch/itch.p4"), str(tmp_path / "r.rules"), "--out", str(out),
                 "--max-entries", "0"]) == 0  # no limit: compiled regardless


atoms = st.one_of(
    st.builds(lambda s: f'stock == "{s}"', st.sampled_from(["A", "B", "C"])),
    st.builds(lambda s: f'stock != "{s}"', st.sampled_from(["A", "B"])),
    st.builds(lambda op, n: f"price {op} {n}", st.sampled_from(["<", ">", "==", "<="]), st.integers(0, 30)),
    st.builds(lambda op, n: f"shares {op} {n}", st.sampled_from(["<", ">=", "!="]), st.integers(0, 30)),
)
rule_sets = st.lists(st.builds(lambda a, b, p: f"{a} and {b} : fwd({p})", atoms, atoms, st.integers(1, 5)),
                     min_size=1, max_size=30).map("\n".join)


@settings(max_examples=150, deadline=None)
@given(rule_sets, st.permutations(["itch_order.stock", "itch_order.price", "itch_order.shares"]))
def test_the_estimate_is_never_below_the_entries_on_exact_and_range_fields(text, order):
    rules = parse_rules(text, ITCH)
    c = compile_rules(ITCH, rules, order)
    conjunctions = [x for r in rules for x in dnf(r.filter, r.line)]
    predicted = estimate.estimate(conjunctions, choose(ITCH, conjunctions, order))
    assert predicted.entries >= c.stats["entries"]["total"]
