"""`camus demo itch` end to end at a small size (UDP modes and Kafka views), and replay of a
NASDAQ binary ITCH file."""

from __future__ import annotations

from apps.itch_filter import binaryfile, feed
from apps.itch_filter.demo import prepare, run_mode
from camus.cli import main


def test_camus_demo_itch_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    feed_file = tmp_path / "feed.bin.gz"
    assert main(["demo", "itch", "--messages", "3000", "--rounds", "1", "--out", str(out),
                 "--save-feed", str(feed_file)]) == 0
    assert list(binaryfile.read(feed_file)) == feed.synthetic_day(3000, seed=1)
    printed = capsys.readouterr().out
    assert ("every subscriber received exactly its expected messages in both modes and in its "
            "Kafka view") in printed
    assert (out / "itch-latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (out / "summary.txt").read_text()
    assert summary in printed
    rows = [line.split() for line in summary.splitlines() if line.split()[1:2] in (["camus"], ["host"])]
    assert len(rows) == 2 * 5 and all(row[-1] == "yes" for row in rows)
    # Host filtering gets every packet; behind camus a subscriber gets only copies for it.
    for camus_row, host_row in zip(rows[0::2], rows[1::2]):
        assert int(camus_row[5]) < int(host_row[5])
    kafka = [line.split() for line in summary.splitlines() if line.split()[1:2] == ["kafka"]]
    assert len(kafka) == 5 and all(row[2] == row[3] and row[-1] == "yes" for row in kafka)


def test_replay_of_a_binary_file_delivers_what_the_rules_select(tmp_path):
    day = feed.synthetic_day(1500, seed=11)
    path = tmp_path / "S011125-v50.bin"
    binaryfile.write(path, day)
    demo = prepare(1200, rate=50000, replay=path)
    assert demo.messages == day[:1200]
    assert "replay" in demo.source
    run = run_mode(demo, "camus")
    for s in demo.subscriptions:
        r = run.results[s.name]
        assert r.complete and sorted(r.received) == demo.expected[s.name] and r.unwanted == 0
