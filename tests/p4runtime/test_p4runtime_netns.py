"""Two hosts in their own network namespaces exchange subscribed packets through the switch.

Three namespaces are created for the test: h1 and h2 (one veth each, 10.77.0.1/24 and
10.77.0.2/24) and sw, which holds the other veth ends and runs `camus switch serve` bound to
them as ports 1 and 2. Each host sends a MoldUDP64 batch addressed to the other; the other
receives, on an ordinary UDP socket, only the messages the rules forward to its port. All
traffic stays inside these namespaces, which are deleted afterwards (their veths with them).
Skipped unless root and `ip netns` work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from p4runtime_helpers import ITCH_UDP_PORT, add_order, camus, compiled, read_until_ready, write_dir
from switch.packet import ipv4_address, mold_payload, read_mold, udp_frame

HOST = str(Path(__file__).with_name("netns_host.py"))
RULES = 'stock == "GOOGL" : fwd(2)\nstock == "MSFT" : fwd(1)\n'
TAG = str(os.getpid() % 100000)
NS = {name: f"camus-{name}-{TAG}" for name in ("h1", "h2", "sw")}
VETH = {"h1": (f"cm1s{TAG}", f"cm1h{TAG}"), "h2": (f"cm2s{TAG}", f"cm2h{TAG}")}  # (switch end, host end)
ADDR = {"h1": "10.77.0.1", "h2": "10.77.0.2"}


def ip(*args: str, ns: str | None = None) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=20).stdout


def netns_usable() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"camus-probe-{TAG}"
    ok = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ok


pytestmark = pytest.mark.skipif(not netns_usable(), reason="needs root and a working `ip netns`")


@pytest.fixture
def namespaces():
    try:
        for ns in NS.values():
            ip("ip", "netns", "add", ns)
        for host, (sw_end, host_end) in VETH.items():
            ip("ip", "link", "add", sw_end, "netns", NS["sw"], "type", "veth",
               "peer", "name", host_end, "netns", NS[host])
            ip("ip", "link", "set", sw_end, "up", ns=NS["sw"])
            ip("ip", "addr", "add", f"{ADDR[host]}/24", "dev", host_end, ns=NS[host])
            ip("ip", "link", "set", host_end, "up", ns=NS[host])
        for ns in NS.values():
            ip("ip", "link", "set", "lo", "up", ns=ns)
        yield {host: ip("cat", f"/sys/class/net/{VETH[host][1]}/address", ns=NS[host]).strip()
               for host in VETH}
    finally:
        for ns in NS.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def send_and_receive(src: str, dst: str, macs: dict, batch: list[bytes]) -> list[bytes]:
    """`src` sends `batch` to `dst`; the messages `dst`'s UDP socket receives."""
    receiver = subprocess.Popen(["ip", "netns", "exec", NS[dst], sys.executable, HOST, "recv",
                                 str(ITCH_UDP_PORT), "1", "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout.readline().strip() == "bound"
        frame = udp_frame(mold_payload(b"NETNSTEST1", 1, batch), dst_port=ITCH_UDP_PORT,
                          src_ip=ipv4_address(ADDR[src]), dst_ip=ipv4_address(ADDR[dst]),
                          src_mac=bytes.fromhex(macs[src].replace(":", "")),
                          dst_mac=bytes.fromhex(macs[dst].replace(":", "")))
        ip(sys.executable, HOST, "send", VETH[src][1], frame.hex(), ns=NS[src])
        out, _ = receiver.communicate(timeout=10)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    messages = []
    for line in out.split():
        messages += [b for b in read_mold(bytes.fromhex(line))[2] if b]
    return messages


def test_hosts_in_namespaces_exchange_subscribed_packets(namespaces, tmp_path):
    d = write_dir(compiled(RULES), tmp_path / "cfg")
    serve = subprocess.Popen(
        ["ip", "netns", "exec", NS["sw"], *camus("switch", "serve", "--pipeline", str(d), "--p4runtime", "none",
                                                  "--port", f"1=iface:{VETH['h1'][0]}",
                                                  "--port", f"2=iface:{VETH['h2'][0]}")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        read_until_ready(serve)
        googl, msft, ibm = add_order("GOOGL", 10, 5), add_order("MSFT", 20, 6), add_order("IBM", 30, 7)
        assert send_and_receive("h1", "h2", namespaces, [ibm, googl, msft]) == [googl]
        assert send_and_receive("h2", "h1", namespaces, [msft, ibm, googl]) == [msft]
        assert send_and_receive("h1", "h2", namespaces, [ibm]) == []
    finally:
        serve.terminate()
        try:
            serve.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.communicate()
