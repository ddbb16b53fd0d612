"""`python -m controller.host_io no-offload` on real interfaces: a veth pair in a namespace
of the test's own (root), whose offloads a veth starts with on, read back by the same
SIOCETHTOOL calls libpcap makes to size its ring."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest

from controller.host_io import ETH_FLAG_LRO, ETHTOOL_GFLAGS, ETHTOOL_OFFLOADS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="needs root and iproute2 (a namespace and a veth pair)")

PROBE = """
import socket, sys
from controller.host_io import _ethtool, ETHTOOL_OFFLOADS, ETHTOOL_GFLAGS, ETH_FLAG_LRO
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    for iface in sys.argv[1:]:
        on = [n for n, (get, _) in ETHTOOL_OFFLOADS.items() if _ethtool(s, iface, get)]
        if _ethtool(s, iface, ETHTOOL_GFLAGS) & ETH_FLAG_LRO:
            on.append("lro")
        print(iface, ",".join(on) or "-")
"""


@pytest.fixture
def namespace():
    name = f"camus-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def run_in(ns: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    return subprocess.run(["ip", "netns", "exec", ns, sys.executable, *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=60)


def offloads(ns: str, *ifaces: str) -> dict[str, str]:
    done = run_in(ns, "-c", PROBE, *ifaces)
    assert done.returncode == 0, done.stderr
    return dict(line.split() for line in done.stdout.splitlines())


def test_no_offload_turns_off_what_libpcap_looks_at(namespace):
    subprocess.run(["ip", "-n", namespace, "link", "add", "va", "type", "veth", "peer", "name", "vb"],
                   check=True)
    before = offloads(namespace, "va", "vb")
    assert before["va"] != "-", "a new veth has segmentation offloads on (what made the ring small)"
    done = run_in(namespace, "-m", "controller.host_io", "no-offload", "va")
    assert done.returncode == 0, done.stderr
    assert offloads(namespace, "va", "vb") == {"va": "-", "vb": before["vb"]}  # its peer untouched


def test_no_offload_on_a_missing_interface_fails_and_says_which(namespace):
    done = run_in(namespace, "-m", "controller.host_io", "no-offload", "nosuch0")
    assert done.returncode != 0 and "nosuch0" in done.stderr


def test_the_ethtool_commands_are_linuxs():
    # linux/ethtool.h: ETHTOOL_GTSO 0x1e, STSO 0x1f, GGSO 0x23, SGSO 0x24, GGRO 0x2b, SGRO 0x2c,
    # GFLAGS 0x25; ETH_FLAG_LRO bit 15. A wrong number would set some other feature.
    assert ETHTOOL_OFFLOADS == {"tso": (0x1E, 0x1F), "gso": (0x23, 0x24), "gro": (0x2B, 0x2C)}
    assert (ETHTOOL_GFLAGS, ETH_FLAG_LRO) == (0x25, 1 << 15)
