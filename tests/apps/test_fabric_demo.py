"""`camus demo fabric` end to end at a small size: it checks its own deliveries against the
subscriptions, draws the four figures and writes their numbers."""

from __future__ import annotations

from camus.cli import main


def test_the_fabric_demo_draws_every_figure(tmp_path):
    out = tmp_path / "demo"
    assert main(["demo", "fabric", "--sizes", "50,100", "--packets", "60", "--changes", "2",
                 "--graph", "120,240", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.png")) == [
        "fig13ab-entries-per-layer.png", "fig13cd-alpha.png", "fig14-change-time.png", "fig15-mst.png"]
    summary = (out / "summary.txt").read_text()
    assert "are exactly what the subscriptions ask for" in summary
    assert "mst++ on 120 nodes" in summary


def test_bad_arguments_get_one_line(capsys):
    assert main(["demo", "fabric", "--alphas", "0"]) == 2
    assert "positive integers" in capsys.readouterr().err
