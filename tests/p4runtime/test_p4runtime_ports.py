"""Port bindings without gRPC: the in-process API the broker embeds, and binding syntax."""

from __future__ import annotations

import socket
import threading

import pytest

from p4rt.p4info import build_p4info
from p4runtime_helpers import compiled, expected_split, frame, messages, received_split
from switch.device import Device, PipelineConfig
from switch.ports import PortError, Ports, QueuePort, UdpPort, parse_binding, parse_port_option


def running(c, numbers):
    device = Device("native")
    device.install(PipelineConfig(c.pipeline, build_p4info(c.pipeline), b""), c.entries)
    ports = Ports(device)
    queues = {n: ports.add(QueuePort(n)) for n in numbers}
    ports.start()
    return ports, queues


def drain(q, timeout=2.0):
    out = [q.get(timeout=timeout)]
    while not q.empty():
        out.append(q.get_nowait())
    return out


def test_in_process_queues_carry_frames_through_the_pipeline():
    c = compiled()
    ports, queues = running(c, (0, 1, 2, 3, 4, 5))
    try:
        for seed in range(10):
            batch = messages(200 + seed, 8)
            want = expected_split(c, batch)
            queues[0].inject(frame(batch))
            got = [(p, f) for p in want for f in drain(queues[p].output)]
            assert received_split(got) == want
            assert all(queues[p].output.empty() for p in queues)
    finally:
        ports.stop()


def test_copies_for_unbound_ports_are_counted_not_sent():
    c = compiled()
    ports, queues = running(c, (0,))
    try:
        batch = messages(3, 10)
        want = expected_split(c, batch)
        assert want  # some port is selected, and none of them is bound
        ports.forward(frame(batch), 0)
        assert ports.unbound == len(want)
    finally:
        ports.stop()


def test_udp_binding_round_trip():
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))
    peer.settimeout(2)
    port = parse_binding(3, f"udp:127.0.0.1:{peer.getsockname()[1]}")
    try:
        assert isinstance(port, UdpPort) and port.local[0] == "127.0.0.1"
        port.send(b"frame out")
        assert peer.recv(100) == b"frame out"
        peer.sendto(b"frame in", port.local)
        assert port.receive(threading.Event()) == b"frame in"
    finally:
        port.close()
        peer.close()


@pytest.mark.parametrize("text", ["tcp:1.2.3.4:5", "udp:", "udp:localhost", "udp:1.2.3.4:99999", "iface:"])
def test_bad_bindings_are_refused(text):
    with pytest.raises(PortError):
        parse_binding(1, text)


def test_port_options():
    assert parse_port_option("4=iface:veth0") == (4, "iface:veth0")
    assert parse_port_option("udp:127.0.0.1:7000", default_number=0) == (0, "udp:127.0.0.1:7000")
    with pytest.raises(PortError):
        parse_port_option("udp:127.0.0.1:7000")
