"""`camus compile --changes` as a user runs it: a real subprocess, real files."""

from __future__ import annotations

import random

from .test_cli import ITCH, camus


def _rules(rng: random.Random, n: int) -> list[str]:
    syms = ["GOOGL", "MSFT", "AAPL", "A", "ZVZZT"]
    return [rng.choice([
        f'stock == "{rng.choice(syms)}" and price > {rng.randint(0, 2000)} : fwd({rng.randint(1, 9)})',
        f'stock == "{rng.choice(syms)}" : fwd({rng.randint(1, 9)}, {rng.randint(1, 9)})',
        f'shares >= {rng.randint(0, 500)} or buy_sell_indicator == "S" : fwd({rng.randint(1, 9)})',
    ]) for _ in range(n)]


def test_changes_end_where_a_scratch_compile_of_the_final_rules_does(tmp_path):
    rng = random.Random(3)
    rules = _rules(rng, 80)
    (tmp_path / "subs.rules").write_text("\n".join(rules) + "\n")
    final = list(rules)
    lines = ["# one change a line"]
    for new in _rules(rng, 12):
        lines.append(f"+ {new}")
        final.append(new)
        gone = final.pop(rng.randrange(len(final)))
        lines.append(f"- {gone}")
    (tmp_path / "changes").write_text("\n".join(lines) + "\n")
    (tmp_path / "final.rules").write_text("\n".join(final) + "\n")
    r = camus("compile", str(ITCH), str(tmp_path / "subs.rules"), "--out", str(tmp_path / "inc"),
              "--changes", str(tmp_path / "changes"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(" ms\n") == 24 and "change 24 (line 25, -)" in r.stderr
    r = camus("compile", str(ITCH), str(tmp_path / "final.rules"), "--out", str(tmp_path / "ref"))
    assert r.returncode == 0, r.stderr
    for name in ("entries.json", "pipeline.json"):
        assert (tmp_path / "inc" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


def test_a_bad_change_is_refused_with_its_line_and_nothing_is_written(tmp_path):
    (tmp_path / "subs.rules").write_text('stock == "A" : fwd(1)\n')
    for text, message in [
        ('+ stock == "B" : fwd(2)\n* stock == "C" : fwd(3)\n', ":2:1: a change is '+ RULE'"),
        ('+ stock == "B" : fwd(2)\n- stock == "C" : fwd(3)\n', ":2:1: no such rule to remove"),
        ('+ stock === "B" : fwd(2)\n', ":1:11: unexpected '='"),
    ]:
        (tmp_path / "changes").write_text(text)
        r = camus("compile", str(ITCH), str(tmp_path / "subs.rules"), "--out",
                  str(tmp_path / "out"), "--changes", str(tmp_path / "changes"))
        assert r.returncode == 2 and message in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()


def test_changes_keep_to_the_entry_budget(tmp_path):
    """--max-entries holds for the rules before and after the changes: a final rule set over
    the budget is refused before anything is written."""
    (tmp_path / "subs.rules").write_text('stock == "A" and price > 5 : fwd(1)\n')
    big = [f'+ stock == "S{i}" and price > {i} : fwd({i % 9 + 1})' for i in range(60)]
    (tmp_path / "changes").write_text("\n".join(big) + "\n")
    args = ("compile", str(ITCH), str(tmp_path / "subs.rules"), "--out", str(tmp_path / "out"),
            "--changes", str(tmp_path / "changes"))
    r = camus(*args, "--max-entries", "20")
    assert r.returncode == 2 and "more than the budget of 20 entries" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    r = camus(*args, "--max-entries", "100000")
    assert r.returncode == 0 and "change 60 (line 60, +)" in r.stderr, r.stderr
