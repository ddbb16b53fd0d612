"""`camus compile --alpha`: the approximated compile forwards a superset of the exact one on
every packet, and the same set on packets whose values lie in α-blocks no constant cuts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.alpha_option import apply, parse_alpha
from compiler.compile import compile_rules
from compiler.errors import CamusError
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
ITCH = load_spec(ROOT / "p4/itch/itch.p4")
OPS = ("<", "<=", ">", ">=", "==", "!=")
# Where each operator cuts the domain: x op v changes truth between cut - 1 and cut.
CUT = {"<": 0, ">=": 0, "==": 0, "!=": 0, "<=": 1, ">": 1}

atoms = st.tuples(st.sampled_from(("price", "shares")), st.sampled_from(OPS),
                  st.integers(0, 300))
rules_st = st.lists(st.tuples(st.lists(atoms, min_size=1, max_size=3),
                              st.sampled_from(('"A"', '"B"')), st.booleans(),
                              st.integers(1, 4)), min_size=1, max_size=8)


def rule_text(rules) -> str:
    lines = []
    for ats, stock, negate, port in rules:
        body = " and ".join(f"{f} {op} {v}" for f, op, v in ats)
        body = f"not ({body})" if negate else body
        lines.append(f"stock == {stock} and ({body}) : fwd({port})")
    return "\n".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=rules_st, alpha=st.sampled_from((2, 10, 64)), per_field=st.booleans(),
       data=st.data())
def test_superset_everywhere_and_equal_away_from_the_cuts(rules, alpha, per_field, data):
    text = rule_text(rules)
    exact = parse_rules(text, ITCH)
    option = f"price={alpha}" if per_field else str(alpha)
    approx = apply(exact, option, ITCH)
    c_exact, c_approx = compile_rules(ITCH, exact), compile_rules(ITCH, approx)
    t_exact, t_approx = c_exact.tables(), c_approx.tables()
    alphas = {"price": alpha, "shares": 1 if per_field else alpha}
    blocks = {f: {(v + CUT[op]) // alphas[f] for ats, *_ in rules for g, op, v in ats if g == f}
              for f in alphas}
    values = st.integers(0, 400) | st.sampled_from([v + d for ats, *_ in rules
                                                    for _, _, v in ats for d in (-1, 0, 1)
                                                    if v + d >= 0])
    for _ in range(30):
        stock = data.draw(st.sampled_from((b"A", b"B", b"C")))
        msg = {"itch_order.stock": int.from_bytes(stock + b" " * 7, "big"),
               "itch_order.price": data.draw(values), "itch_order.shares": data.draw(values)}
        want = evaluate(exact, msg)
        got_exact = t_exact.ports(c_exact.application, msg)
        got_approx = t_approx.ports(c_approx.application, msg)
        assert got_exact == want
        assert got_approx == evaluate(approx, msg)
        assert got_approx >= got_exact, (option, msg)
        clear = all(msg[f"itch_order.{f}"] // alphas[f] not in blocks[f] for f in alphas)
        if clear:
            assert got_approx == got_exact, (option, msg)


def test_alpha_option_parsing():
    assert parse_alpha("100", ITCH) == 100
    assert parse_alpha("price=100, itch_order.shares=10", ITCH) == \
        {"itch_order.price": 100, "itch_order.shares": 10}
    for bad, said in [("0", "positive"), ("x", "positive"), ("price=", "positive"),
                      ("nosuch=3", "nosuch"), ("price=2,price=3", "twice"),
                      ("stock=10", "characters"), ("=4", "field=N")]:
        with pytest.raises(CamusError, match=said):
            parse_alpha(bad, ITCH)


def test_cli_alpha_fewer_entries_and_recorded(tmp_path):
    rules = tmp_path / "r.rules"
    rules.write_text("\n".join(f'stock == "S{i % 3}" and price > {i * 7} : fwd({i % 5 + 1})'
                               for i in range(200)))
    sizes = {}
    for option in ([], ["--alpha", "100"], ["--alpha", "price=100"]):
        out = tmp_path / ("o" + "".join(option).replace("=", "_"))
        done = subprocess.run([sys.executable, "-m", "camus", "compile",
                               str(ROOT / "p4/itch/itch.p4"), str(rules), "--out", str(out),
                               *option], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        stats = json.loads((out / "stats.json").read_text())
        sizes[tuple(option)] = stats["entries"]["total"]
        assert stats.get("alpha") == ({"itch_order.price": 100} if "price=100" in option
                                      else 100 if option else None)
    assert sizes[("--alpha", "100")] == sizes[("--alpha", "price=100")] < sizes[()]
    done = subprocess.run([sys.executable, "-m", "camus", "compile",
                           str(ROOT / "p4/itch/itch.p4"), str(rules), "--out",
                           str(tmp_path / "bad"), "--alpha", "price=-1"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--alpha itch_order.price" in done.stderr
