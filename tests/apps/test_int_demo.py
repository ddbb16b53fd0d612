"""`camus demo int` end to end at a small size: fabric -> software switch -> UDP subscribers on
127.0.0.1, and the same reports through `camus serve` to a kafka-python consumer of the view
`int-anomalies`; every delivery checked against compiler.semantics.evaluate; and the check
itself catches a wrong delivery."""

from __future__ import annotations

import json
from pathlib import Path

from apps.int_events import demo
from apps.int_events.int_md import Hop
from apps.int_events.subscribers import Event, Subscription
from camus.cli import main


def test_camus_demo_int_runs_end_to_end(tmp_path: Path, capsys):
    out = tmp_path / "int"
    assert main(["demo", "int", "--packets", "4000", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    summary = (out / "summary.txt").read_text()
    assert summary in text
    for name in [s.name for s in demo.SUBSCRIPTIONS] + ["kafka:int-anomalies"]:
        row = next(line for line in summary.splitlines() if line.startswith(name + " "))
        _name, _port, expected, delivered, verdict = row.split()[:5]
        assert int(expected) > 0 and expected == delivered and verdict == "equal", row
    assert "all subscribers got exactly what compiler.semantics.evaluate expects" in summary
    assert (out / "int-anomalies.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "switch" / "pipeline.json").exists() and (out / "int-anomalies.rules").exists()
    # The view keeps the source topic's offsets; packets were produced in order from 0.
    records = [json.loads(line) for line in (out / "int-anomalies.jsonl").read_text().splitlines()]
    assert records and all(r["offset"] == r["packet"] for r in records)
    assert all(r["hops"][0]["node_id"] == 2 and r["hops"][0]["hop_latency"] > 100 for r in records)


def test_every_subscriber_gets_anomalies_and_only_a_small_share_is_delivered(tmp_path: Path):
    result = demo.run(4000, tmp_path, seed=2)
    assert result.ok
    for sub in result.subscribers:
        assert sub.expected, f"{sub.subscription.name}: the run holds no anomaly for it"
        assert all(e.top.hop_latency > 100 or e.top.queue_occupancy > 4000 for e in sub.delivered)
    assert 0 < result.packets_delivered < 0.05 * result.packets
    assert result.switch_drops["no_route"] == result.packets - result.packets_delivered


def test_a_wrong_or_duplicate_delivery_is_not_equal():
    sub = Subscription("s", "hop_latency > 100", 1)
    hop = Hop(2, 1, 1, 150, 0, 0)
    right = demo.SubscriberResult(sub, {1, 2}, [Event(1, 0, hop, 4, 100), Event(2, 0, hop, 4, 100)], 0)
    assert right.equal
    assert not demo.SubscriberResult(sub, {1, 2}, [Event(1, 0, hop, 4, 100)], 0).equal
    assert not demo.SubscriberResult(sub, {1}, [Event(1, 0, hop, 4, 100), Event(1, 0, hop, 4, 100)], 0).equal
    assert not demo.SubscriberResult(sub, {1}, [Event(1, 0, hop, 4, 100)], 1).equal
