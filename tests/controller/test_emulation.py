"""`camus net up` (Mininet: a `camus switch serve` process per switch, or bmv2 running the
generated fabric program where p4c and bmv2 are on PATH; hosts in namespaces) delivers what
`camus net run` delivers, frame for frame, on the same traffic.

Skipped unless Mininet is installed and this is root. All traffic stays in the namespaces
and links Mininet creates for the test, which it removes afterwards. Copies may arrive in
another order on real links (different paths, one thread per port), so each host's frames are
compared as multisets.
"""

from __future__ import annotations

import collections
import random
import subprocess
import sys

import pytest

from camus.cli import main
from controller.emulation import bmv2_missing, usable
from switch.pcap import PcapReader, write_pcap

from .routing_helpers import ROOT, packet, subscriptions_text

REASON = usable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"camus net up: {REASON}")


def frames(path) -> collections.Counter:
    with open(path, "rb") as fh:
        return collections.Counter(r.data for r in PcapReader(fh))


SWITCHES = [
    "camus",
    # bmv2 runs the generated fabric program; its multi-message ITCH packets take several
    # ingress passes (resubmission), which is what once made them loop between two switches
    # (compiler/p4/fabric.py keeps the ingress port across passes).
    pytest.param("bmv2", marks=pytest.mark.skipif(bmv2_missing() is not None,
                                                  reason=f"bmv2: {bmv2_missing()}")),
]

def itch_subscriptions(rng, names):
    return subscriptions_text(rng, names, 25 if len(names) < 10 else 30)


def itch_frames(rng, n):
    return [packet(rng, 1000 * i + 1)[0] for i in range(20 * n, 20 * n + 20)]


def kafka_subscriptions(rng, names):
    atoms = [lambda: f"topic_id == {rng.randint(1, 2)}", lambda: f"partition == {rng.randint(0, 1)}",
             lambda: f"slot0 {rng.choice(('<', '>=', '>'))} {rng.choice((100, 500, 900))}",
             lambda: f"slot1 {rng.choice(('<', '>='))} {rng.choice((1000, 30000))}"]
    return "".join(f"{rng.choice(names)}: {' and '.join(rng.choice(atoms)() for _ in range(rng.randint(1, 3)))}\n"
                   for _ in range(12))


def kafka_frames(rng, n):
    """Records as the broker frames them (shim.reframe), some in several fragments; fragments
    of 1,000 bytes keep every frame within the links' 1,500-byte MTU."""
    from shim.reframe import Addressing, Record, packets

    out = []
    for i in range(20 * n, 20 * n + 20):
        slots = [rng.randrange(1000), rng.randrange(65536)] + [0] * 6
        record = Record(i, None, rng.randbytes(rng.choice((10, 300, 2500))))
        out += packets(rng.randint(1, 2), rng.randint(0, 1), i, slots, record,
                       Addressing(src_port=40000 + n), fragment=1000)
    return out


# (spec, hosts, publishers, where, subscriptions, frames): a general graph with a cycle (one
# spanning tree carries it; TR, rounded constants); a k = 4 fat tree (two up ports per edge
# and aggregation switch, so the up-port hash chooses; MR: every packet goes up; exact
# constants); Kafka records (one message a packet, no resubmission) on the fat tree with TR.
NETWORKS = {
    "itch-graph": ("p4/itch/itch.p4", 6, 2, lambda d: ["--graph", str(graph_file(d)), "--alpha", "100"],
                   itch_subscriptions, itch_frames),
    "itch-fattree4-mr": ("p4/itch/itch.p4", 16, 3, lambda d: ["--topology", "fattree:4", "--policy", "mr"],
                         itch_subscriptions, itch_frames),
    "kafka-fattree4-tr": ("p4/kafka/kafka.p4", 16, 2, lambda d: ["--topology", "fattree:4"],
                          kafka_subscriptions, kafka_frames),
}


def graph_file(d):
    graph = d / "g.txt"
    graph.write_text("A B\nB C\nC A\nC D\n" + "".join(f"host h{i} {'ABCD'[i % 4]}\n" for i in range(6)))
    return graph


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("switch", SWITCHES)
def test_net_up_agrees_with_net_run(tmp_path, switch, network):
    spec, hosts, publishers, where, subscriptions, traffic = NETWORKS[network]
    rng = random.Random(21)
    names = [f"h{i}" for i in range(hosts)]
    subs = tmp_path / "subs.txt"
    subs.write_text(subscriptions(rng, names))
    net = tmp_path / "net"
    assert main(["net", "compile", str(ROOT / spec), str(subs), *where(tmp_path), "--out", str(net)]) == 0
    injects = []
    for n, host in enumerate(names[:: hosts // publishers][:publishers]):
        pcap = tmp_path / f"{host}.pcap"
        write_pcap(str(pcap), traffic(rng, n))
        injects += ["--inject", f"{host}={pcap}"]
    assert main(["net", "run", "--net", str(net), *injects, "--out-dir", str(tmp_path / "run")]) == 0
    up = subprocess.run([sys.executable, "-m", "camus", "net", "up", "--net", str(net), *injects,
                         "--out-dir", str(tmp_path / "up"), "--switch", switch],
                        capture_output=True, text=True, timeout=600)
    assert up.returncode == 0, up.stderr
    run_files = {p.name for p in (tmp_path / "run").glob("*.pcap")}
    up_files = {p.name for p in (tmp_path / "up").glob("*.pcap")}
    assert run_files and run_files == up_files
    for name in run_files:
        assert frames(tmp_path / "up" / name) == frames(tmp_path / "run" / name), name


def test_net_up_stays_up_until_net_down(tmp_path):
    subs = tmp_path / "subs.txt"
    subs.write_text("h0: price > 5\n")
    net = tmp_path / "net"
    assert main(["net", "compile", str(ROOT / "p4/itch/itch.p4"), str(subs), "--topology", "fattree:2",
                 "--out", str(net)]) == 0
    up = subprocess.Popen([sys.executable, "-m", "camus", "net", "up", "--net", str(net)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in up.stdout:
            lines.append(line.strip())
            if line.strip() == "ready":
                break
        assert lines[-1] == "ready", (lines, up.stderr.read())
        assert (net / "up.pid").read_text().strip() == str(up.pid)
        assert main(["net", "down", "--net", str(net)]) == 0
        assert up.wait(60) == 0
        assert not (net / "up.pid").exists()
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert main(["net", "down", "--net", str(net)]) == 2  # nothing is up any more
