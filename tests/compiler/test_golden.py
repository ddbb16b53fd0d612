"""Golden outputs: every change to compiled output shows up in review.

Regenerate after an intended change with `CAMUS_REGEN_GOLDEN=1 pytest tests/compiler/test_golden.py`
and read the diff before committing it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from compiler.compile import compile_files, write_outputs

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "compiler"
CASES = {"figure5": ["shares", "stock", "price"]}  # case -> --field-order (None: heuristic)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, tmp_path):
    d = GOLDEN / case
    c = compile_files(d / "spec.p4", d / "rules.txt", CASES[case])
    write_outputs(c, tmp_path)
    for name in ("pipeline.json", "entries.json"):
        got = (tmp_path / name).read_text()
        if os.environ.get("CAMUS_REGEN_GOLDEN"):
            (d / name).write_text(got)
        assert json.loads(got) == json.loads((d / name).read_text()), name


def test_figure5_entries_mean_what_the_rules_say():
    """The golden entries read as the paper's Figure 6: shares splits, then stock, then price."""
    d = GOLDEN / "figure5"
    entries = json.loads((d / "entries.json").read_text())["table_entries"]
    by_table: dict[str, list] = {}
    for e in entries:
        by_table.setdefault(e["table"], []).append(e)
    # shares <= 100 is the exception at the root; the rest is the default.
    (low,) = by_table["spec_shares"]
    assert low["match"]["itch_order.shares"] == {"range": [0, 100]}
    (high,) = by_table["spec_shares_default"]
    # MSFT with few shares decides port 3 at the stock stage; nothing else needs price.
    msft = int.from_bytes(b"MSFT    ", "big")
    decided = [e for e in by_table["spec_stock"]
               if e["match"]["itch_order.stock"]["exact"] == msft]
    assert [e["action"] for e in decided] == ["fwd"] and decided[0]["params"] == {"port": 3}
    # Two price entries: GOOGL & cheap -> port 2 (few shares) or ports {1, 2} (many shares).
    assert len(by_table["spec_price"]) == 2
    assert {e["action"] for e in by_table["spec_price"]} == {"fwd", "mcast"}
    assert high["params"]["state"] != low["params"]["state"]
