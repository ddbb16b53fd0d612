"""`camus net compile` and `camus net run` as commands, checked against brute force."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from camus.cli import main
from compiler.rules import parse_filter
from switch.pcap import PcapReader, write_pcap

from .routing_helpers import ITCH, ROOT, expected, kept, packet, subscriptions_text

SPEC = str(ROOT / "p4" / "itch" / "itch.p4")


def read_frames(path) -> list[bytes]:
    with open(path, "rb") as fh:
        return [r.data for r in PcapReader(fh)]


@pytest.mark.parametrize("where", [["--topology", "fattree:4", "--policy", "mr", "--alpha", "10"],
                                   ["--topology", "fattree:4"],
                                   ["--graph", "GRAPH", "--tree", "mst"]])
def test_compile_then_run_delivers_exactly_the_subscriptions(tmp_path, where):
    rng = random.Random(11)
    graph = tmp_path / "g.txt"
    graph.write_text("# a ring with a chord\nA B\nB C\nC D\nD A\nA C\n"
                     + "".join(f"host h{i} {'ABCD'[i % 4]}\n" for i in range(16)))
    where = [str(graph) if w == "GRAPH" else w for w in where]
    hosts = [f"h{i}" for i in range(16)]
    subs_path = tmp_path / "subs.txt"
    text = "# subscriptions\n" + subscriptions_text(rng, hosts, 40)
    subs_path.write_text(text)
    out = tmp_path / "net"
    assert main(["net", "compile", SPEC, str(subs_path), *where, "--out", str(out)]) == 0
    doc = json.loads((out / "network.json").read_text())
    assert {s["name"] for s in doc["switches"]} == {p.name for p in (out / "switches").iterdir()}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["subscriptions"] == 40 and stats["entries"]["total"] > 0

    sends = {"h0": [], "h5": []}
    for i in range(30):
        sender = rng.choice(sorted(sends))
        sends[sender].append((1000 * i + 1, *packet(rng, 1000 * i + 1)))
    args = ["net", "run", "--net", str(out), "--out-dir", str(tmp_path / "out")]
    for host, items in sends.items():
        write_pcap(str(tmp_path / f"{host}-in.pcap"), [frame for _, frame, _ in items])
        args += ["--inject", f"{host}={tmp_path / f'{host}-in.pcap'}"]
    assert main(args) == 0
    wants: dict[str, list] = {h: [] for h in hosts}
    for line in text.splitlines()[1:]:
        host, _, f = line.partition(":")
        wants[host].append(parse_filter(f, ITCH))
    want: dict[str, list] = {}
    for host, items in sends.items():  # the files run in the order given
        for seq, _, msgs in items:
            for h, copies in expected(wants, host, seq, msgs).items():
                want.setdefault(h, []).extend(copies)
    got = {p.stem: [kept(f) for f in read_frames(p)] for p in (tmp_path / "out").glob("*.pcap")}
    assert got == want
    links = json.loads((tmp_path / "out" / "links.json").read_text())
    assert links and all(link["packets"] > 0 for link in links)


def test_each_switch_directory_is_a_camus_compile_output(tmp_path):
    subs = tmp_path / "subs.txt"
    subs.write_text('h0: stock == "GOOGL"\nh3: price > 100\n')
    out = tmp_path / "net"
    assert main(["net", "compile", SPEC, str(subs), "--topology", "fattree:4", "--out", str(out)]) == 0
    # t0_0: its host port 1 (h0) gets GOOGL; up (511, TR) only what h3 above wants.
    r = subprocess.run([sys.executable, "-m", "camus", "eval", "--pipeline", str(out / "switches" / "t0_0")],
                       input='{"stock": "GOOGL", "price": 5}\n{"stock": "IBM", "price": 500}\n',
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.split()] == [[1], [511]]


@pytest.mark.parametrize("subs, where, message", [
    ("h99: price > 1\n", ["--topology", "fattree:4"], "subs.txt:1:1: no host 'h99'"),
    ("h0 price > 1\n", ["--topology", "fattree:4"], "subs.txt:1:1: expected `HOST: FILTER`"),
    ("h0: price >> 1\n", ["--topology", "fattree:4"], "subs.txt:1:"),
    ("h0: price > 1\n", ["--topology", "fattree:5"], "even k"),
    ("h0: price > 1\n", ["--topology", "ring:4"], "expected fattree:K"),
    ("h0: price > 1\n", ["--graph", "missing.txt"], "missing.txt"),
])
def test_bad_input_gets_one_clear_line(tmp_path, capsys, subs, where, message):
    (tmp_path / "subs.txt").write_text(subs)
    where = [str(tmp_path / w) if w.endswith(".txt") else w for w in where]
    code = main(["net", "compile", SPEC, str(tmp_path / "subs.txt"), *where,
                 "--out", str(tmp_path / "net")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "net").exists()


@pytest.mark.parametrize("args, message", [
    pytest.param(["compile", SPEC, "SUBS", "--graph", "BINARY", "--out", "NEW"],
                 "BINARY:1:1: byte 0x89 is not UTF-8 text", id="compile-binary-graph"),
    pytest.param(["serve", "--graph", "BINARY"],
                 "BINARY:1:1: byte 0x89 is not UTF-8 text", id="serve-binary-graph"),
    pytest.param(["run", "--net", "NET", "--inject", "h0=PCAP", "--out-dir", "SUBS"],
                 "--out-dir SUBS: exists and is not a directory", id="run-out-dir-file"),
    pytest.param(["up", "--net", "NET", "--inject", "h0=PCAP", "--out-dir", "SUBS"],
                 "--out-dir SUBS: exists and is not a directory", id="up-out-dir-file"),
    pytest.param(["change", "--net", "NET", "--fail-link", "A"],
                 "--fail-link 'A': expected two switches, A,B", id="fail-link-no-comma"),
    pytest.param(["change", "--net", "NET", "--fail-link", "A,B,C"],
                 "--fail-link 'A,B,C': expected two switches, A,B", id="fail-link-three"),
    pytest.param(["serve", "--topology", "fattree:4", "--listen", "127.0.0.1:70000"],
                 "a port 0-65535", id="serve-port"),
    pytest.param(["serve", "--topology", "fattree:4", "--listen", "unix:NEW/x.sock"],
                 "no directory NEW", id="serve-unix-dir"),
    pytest.param(["serve", "--topology", "fattree:4", "--bind", "999.1.1.1"],
                 "--bind '999.1.1.1': ", id="serve-bind-unresolvable"),
    pytest.param(["serve", "--topology", "fattree:4", "--listen", "999.1.1.1:0"],
                 "--listen '999.1.1.1': ", id="serve-listen-unresolvable"),
    pytest.param(["serve", "--topology", "fattree:4", "--state", "SUBS"],
                 "--state SUBS: not a directory", id="serve-state-file"),
    pytest.param(["serve", "--topology", "fattree:4", "--state", "STATE"],
                 "STATE/topics.json: cannot read the topic numbers", id="serve-state-binary"),
])
def test_net_commands_say_what_is_wrong_in_one_line(tmp_path, capsys, args, message):
    """Files of the wrong kind, an out-dir that is a file, a link without its comma: each
    one line on stderr, exit 2, nothing started (up stops before Mininet, serve before
    listening)."""
    subs = tmp_path / "subs.txt"
    subs.write_text("h0: price > 1\n")
    (tmp_path / "binary").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "topics.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    write_pcap(str(tmp_path / "in.pcap"), [])
    graph = tmp_path / "g.txt"
    graph.write_text("A B\nB C\nC A\nhost h0 A\n")
    net = tmp_path / "net"
    assert main(["net", "compile", SPEC, str(subs), "--graph", str(graph), "--out", str(net)]) == 0
    capsys.readouterr()
    names = {"SUBS": subs, "BINARY": tmp_path / "binary", "NET": net, "PCAP": tmp_path / "in.pcap",
             "NEW": tmp_path / "new", "STATE": tmp_path / "state"}
    for name, path in names.items():
        args = [a.replace(name, str(path)) for a in args]
        message = message.replace(name, str(path))
    assert main(["net", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "new").exists()


def test_a_negative_settle_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["net", "up", "--net", "x", "--settle", "-1"])
    assert exit.value.code == 2 and "--settle: '-1': expected seconds >= 0" in capsys.readouterr().err


def test_run_refuses_unknown_hosts_and_missing_networks(tmp_path, capsys):
    assert main(["net", "run", "--net", str(tmp_path), "--inject", "h0=x.pcap",
                 "--out-dir", str(tmp_path / "o")]) == 2
    assert "cannot load" in capsys.readouterr().err
    subs = tmp_path / "subs.txt"
    subs.write_text("h0: price > 1\n")
    assert main(["net", "compile", SPEC, str(subs), "--topology", "fattree:4",
                 "--out", str(tmp_path / "net")]) == 0
    assert main(["net", "run", "--net", str(tmp_path / "net"), "--inject", "h77=x.pcap",
                 "--out-dir", str(tmp_path / "o")]) == 2
    assert "no host 'h77'" in capsys.readouterr().err


def test_change_rewrites_only_the_switches_it_touches(tmp_path, capsys):
    rng = random.Random(4)
    subs = tmp_path / "subs.txt"
    # h6 subscribes to nothing yet, so its new subscription must change its ToR's entries.
    subs.write_text(subscriptions_text(rng, [f"h{i}" for i in range(16) if i != 6], 30))
    out = tmp_path / "net"
    assert main(["net", "compile", SPEC, str(subs), "--topology", "fattree:4", "--policy", "mr",
                 "--out", str(out)]) == 0
    before = {p.parent.name: p.read_text() for p in (out / "switches").glob("*/entries.json")}
    capsys.readouterr()
    assert main(["net", "change", "--net", str(out), "--json", "--add", "h5: price > 4242",
                 "--remove", "h5: price > 4242", "--add", 'h6: stock == "NEW"']) == 0
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["change"] for r in reports] == ["add", "remove", "add"]
    # MR: h6's change reaches its ToR (t1_1), its pod's aggregation switches and the cores only.
    assert set(reports[2]["switches"]) <= {"t1_1", "a1_0", "a1_1", "c0", "c1", "c2", "c3"}
    assert "t1_1" in reports[2]["switches"] and reports[2]["writes"] > 0
    after = {p.parent.name: p.read_text() for p in (out / "switches").glob("*/entries.json")}
    assert {s for s in before if before[s] != after[s]} <= set(reports[2]["switches"])
    assert (out / "subscriptions.txt").read_text().endswith('h6: stock == "NEW"\n')
    # The directory now is what compiling the new subscriptions from scratch writes.
    again = tmp_path / "again"
    assert main(["net", "compile", SPEC, str(out / "subscriptions.txt"), "--topology", "fattree:4",
                 "--policy", "mr", "--out", str(again)]) == 0
    for s in before:
        want = json.loads((again / "switches" / s / "entries.json").read_text())
        got = json.loads((out / "switches" / s / "entries.json").read_text())
        assert sorted(map(repr, got["table_entries"])) == sorted(map(repr, want["table_entries"])), s
    assert main(["net", "change", "--net", str(out), "--remove", "h6: price > 1"]) == 1
    assert "no such subscription" in capsys.readouterr().err


def test_failures_from_the_command_line_reroute_on_a_new_tree(tmp_path, capsys):
    rng = random.Random(9)
    graph = tmp_path / "ring.txt"
    graph.write_text("A B\nB C\nC D\nD A\n" + "".join(f"host h{i} {'ABCD'[i % 4]}\n" for i in range(8)))
    hosts = [f"h{i}" for i in range(8)]
    subs = tmp_path / "subs.txt"
    text = subscriptions_text(rng, hosts, 30)
    subs.write_text(text)
    out = tmp_path / "net"
    assert main(["net", "compile", SPEC, str(subs), "--graph", str(graph), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["net", "change", "--net", str(out), "--json", "--fail-link", "A,B",
                 "--fail-switch", "C"]) == 0
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["change"] for r in reports] == ["fail-link", "fail-switch"]
    doc = json.loads((out / "network.json").read_text())
    assert doc["failed"] == {"links": [["A", "B"]], "switches": ["C"]}
    assert ["A", "B"] not in doc["tree"]["links"] and not any("C" in link for link in doc["tree"]["links"])
    # B is now cut off (its links lead to A, failed, and C, down): from h0 (on A) only the
    # hosts on A and D can be reached, and they get exactly their subscriptions.
    sends = [(1000 * i + 1, *packet(rng, 1000 * i + 1)) for i in range(25)]
    write_pcap(str(tmp_path / "in.pcap"), [frame for _, frame, _ in sends])
    assert main(["net", "run", "--net", str(out), "--inject", f"h0={tmp_path / 'in.pcap'}",
                 "--out-dir", str(tmp_path / "o")]) == 0
    wants: dict[str, list] = {h: [] for h in hosts}
    for line in text.splitlines():
        host, _, f = line.partition(":")
        wants[host].append(parse_filter(f, ITCH))
    alive = {"h0", "h4", "h3", "h7"}  # on A and D
    want: dict[str, list] = {}
    for seq, _, msgs in sends:
        for h, copies in expected(wants, "h0", seq, msgs, lambda a, b: b in alive).items():
            want.setdefault(h, []).extend(copies)
    got = {p.stem: [kept(f) for f in read_frames(p)] for p in (tmp_path / "o").glob("*.pcap")}
    assert got == want
    assert main(["net", "change", "--net", str(out), "--fail-link", "A,C"]) == 1
    assert "no link A C" in capsys.readouterr().err


def test_net_up_on_bmv2_without_bmv2_says_so(tmp_path, capsys):
    from controller.emulation import bmv2_missing

    if bmv2_missing() is None:
        pytest.skip("p4c-bm2-ss and simple_switch_grpc are on PATH here")
    assert main(["net", "up", "--net", str(tmp_path), "--switch", "bmv2"]) == 2
    err = capsys.readouterr().err
    assert "bmv2 asked for" in err and "simple_switch_grpc" in err


def test_net_serve_takes_a_switch_only_with_mininet(capsys):
    """Without --mininet the network runs in the controller's process, on camus's switch:
    `--switch bmv2` there is refused in one line before anything starts."""
    assert main(["net", "serve", "--topology", "fattree:2", "--switch", "bmv2"]) == 2
    assert capsys.readouterr().err.strip() == "camus net serve: error: --switch bmv2 needs --mininet"


def test_a_fat_tree_the_memory_cannot_hold_is_refused_up_front(tmp_path):
    """Under a 400 MB address-space limit, fattree:64 (about 0.5 GB) is refused in one line
    before anything is built (it was a MemoryError traceback: the routing alone wanted
    ~35 GB); fattree:16 still compiles."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (400 << 20, resource.getrlimit(resource.RLIMIT_AS)[1]))

    subs = tmp_path / "subs.txt"
    subs.write_text('h0: stock == "GOOGL"\n')
    runs = {k: subprocess.run([sys.executable, "-m", "camus", "net", "compile", SPEC, str(subs),
                               "--topology", f"fattree:{k}", "--out", str(tmp_path / f"k{k}")],
                              capture_output=True, text=True, timeout=300, preexec_fn=cap)
            for k in (16, 64)}
    assert runs[16].returncode == 0, runs[16].stderr
    err = runs[64].stderr
    assert runs[64].returncode == 2 and err.count("\n") == 1, err
    assert "fattree:64 (5120 switches, 65536 hosts) needs at least" in err and "ulimit -v" in err
    assert not (tmp_path / "k64").exists()
