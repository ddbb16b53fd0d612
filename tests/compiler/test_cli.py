"""`camus compile` and `camus eval` as a user runs them: a real subprocess, real files."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from compiler.rules import load_rules
from compiler.semantics import evaluate
from compiler.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
ITCH = ROOT / "p4/itch/itch.p4"


def camus(*args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "camus", *args], input=stdin, text=True,
                          capture_output=True, cwd=ROOT, timeout=120)


def test_compile_writes_outputs_and_eval_agrees_with_reference(tmp_path):
    rules = tmp_path / "subs.rules"
    rng = random.Random(7)
    syms = ["GOOGL", "MSFT", "AAPL", "A", "ZVZZT"]
    lines = []
    for i in range(60):
        s = rng.choice(syms)
        lines.append(rng.choice([
            f'stock == "{s}" : fwd({rng.randint(1, 9)})',
            f'stock == {s} and price > {rng.randint(0, 2000)} : fwd({rng.randint(1, 9)})',
            f'(shares >= {rng.randint(0, 500)} or buy_sell_indicator == "S") and '
            f'not stock == "{s}" : fwd({rng.randint(1, 9)}, {rng.randint(1, 9)})',
        ]))
    rules.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    r = camus("compile", str(ITCH), str(rules), "--out", str(out), "--dot", str(tmp_path / "d.dot"))
    assert r.returncode == 0, r.stderr
    stats = json.loads((out / "stats.json").read_text())
    for key in ("rules", "entries", "states", "multicast_groups", "compile_seconds"):
        assert key in stats
    assert stats["rules"] == 60
    assert stats["entries"]["total"] == sum(stats["entries"]["per_table"].values())
    pipeline = json.loads((out / "pipeline.json").read_text())
    assert pipeline["applications"][0]["framing"] == "moldudp64"
    assert (tmp_path / "d.dot").read_text().startswith("digraph")

    spec = load_spec(ITCH)
    parsed = load_rules(rules, spec)
    messages = []
    for _ in range(300):
        m = {"stock": rng.choice(syms + ["NOPE"]), "price": rng.randint(0, 2100),
             "shares": rng.randint(0, 600), "buy_sell_indicator": rng.choice("BS")}
        messages.append(m)
    r = camus("eval", "--pipeline", str(out), stdin="".join(json.dumps(m) + "\n"
                                                            for m in messages))
    assert r.returncode == 0, r.stderr
    got = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(got) == len(messages)
    for m, ports in zip(messages, got):
        values = {f"itch_order.{k}": spec.resolve(k).encode(v) for k, v in m.items()}
        assert ports == sorted(evaluate(parsed, values)), m


def test_eval_missing_fields_and_message_types(tmp_path):
    rules = tmp_path / "r"
    rules.write_text('stock == "" : fwd(1)\nprice < 10 : fwd(2)\n')
    out = tmp_path / "o"
    assert camus("compile", str(ITCH), str(rules), "--out", str(out)).returncode == 0
    r = camus("eval", "--pipeline", str(out), stdin='{}\n{"message_type": "E"}\n'
              '{"itch_order.message_type": "F", "price": 50}\n{"bogus": 1}\n')
    # Missing stock is spaces (== ""), missing price is 0; an 'E' is no subscription message.
    assert r.stdout.splitlines() == ["[1, 2]", "[]", "[1]", "null"]
    assert r.returncode == 1 and "unknown field 'bogus'" in r.stderr


def test_compile_errors_name_file_line_and_column(tmp_path):
    rules = tmp_path / "bad.rules"
    rules.write_text('stock == "GOOGL" : fwd(1)\nstock > "MSFT" : fwd(2)\n')
    r = camus("compile", str(ITCH), str(rules), "--out", str(tmp_path / "o"))
    assert r.returncode == 2
    assert f"{rules}:2:7: '>' on exact-match field 'itch_order.stock'" in r.stderr
    assert not (tmp_path / "o").exists()


def test_field_order_override(tmp_path):
    rules = tmp_path / "r"
    rules.write_text('stock == "A" and price > 5 : fwd(1)\n')
    out = tmp_path / "o"
    r = camus("compile", str(ITCH), str(rules), "--out", str(out), "--field-order", "price,stock")
    assert r.returncode == 0, r.stderr
    stages = json.loads((out / "pipeline.json").read_text())["applications"][0]["stages"]
    assert [s["field"] for s in stages] == ["itch_order.price", "itch_order.stock"]
    r = camus("compile", str(ITCH), str(rules), "--out", str(out), "--field-order", "price")
    assert r.returncode == 2 and "leaves out" in r.stderr


def test_help_lists_subcommands():
    r = camus("--help")
    assert r.returncode == 0
    assert "compile" in r.stdout and "eval" in r.stdout
