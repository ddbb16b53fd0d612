"""`camus switch serve` over UDP sockets on 127.0.0.1, changed live by `camus controller push`.

The switch runs as a real subprocess: frames go in as UDP payloads to its ingress socket,
copies come out as UDP payloads to one socket per switch port, and each port's messages must
be what `compiler.semantics.evaluate` selects. Then the controller pushes changed rules over
P4Runtime and the same traffic follows the new rules, without restarting the switch.
"""

from __future__ import annotations

import re
import select
import signal
import socket
import subprocess
import time

from p4runtime_helpers import (
    RULES,
    camus,
    compiled,
    expected_split,
    frame,
    messages,
    read_until_ready,
    received_split,
    write_dir,
)

PORTS = (1, 2, 3, 4, 5)
CHANGED = RULES.replace('stock == "GOOGL" : fwd(1)', 'stock == "GOOGL" : fwd(3)')


def collect(socks: dict[int, socket.socket], expected_copies: int, quiet: float = 0.3) -> list[tuple[int, bytes]]:
    """Every datagram the port sockets receive until `expected_copies` came and `quiet` s pass."""
    got, deadline = [], time.monotonic() + 10
    by_fd = {s.fileno(): (p, s) for p, s in socks.items()}
    while time.monotonic() < deadline:
        wait = quiet if len(got) >= expected_copies else 0.5
        ready, _, _ = select.select(list(by_fd), [], [], wait)
        if not ready:
            if len(got) >= expected_copies:
                break
            continue
        for fd in ready:
            port, s = by_fd[fd]
            got.append((port, s.recv(65535)))
    return got


def exchange(ingress, socks, c, seeds) -> None:
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for seed in seeds:
            batch = messages(seed, 1 + seed % 10)
            want = expected_split(c, batch)
            sender.sendto(frame(batch, seq=seed * 100), ingress)
            assert received_split(collect(socks, len(want))) == want, f"seed {seed}"
    finally:
        sender.close()


def test_serve_over_udp_then_push_changes_live(tmp_path):
    old, new = compiled(), compiled(CHANGED)
    old_dir, new_dir = write_dir(old, tmp_path / "old"), write_dir(new, tmp_path / "new")
    socks = {}
    for p in PORTS:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks[p] = s
    args = ["switch", "serve", "--pipeline", str(old_dir), "--p4runtime", "127.0.0.1:0",
            "--ingress", "udp:127.0.0.1:0"]
    for p, s in socks.items():
        args += ["--port", f"{p}=udp:127.0.0.1:{s.getsockname()[1]}"]
    proc = subprocess.Popen(camus(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = read_until_ready(proc)
        p4rt = re.search(r"^p4runtime (\S+)", "\n".join(lines), re.M).group(1)
        host, port = re.search(r"^port 0: udp (\S+):(\d+)$", "\n".join(lines), re.M).groups()
        ingress = (host, int(port))

        exchange(ingress, socks, old, range(8))  # entries.json loaded at start

        push = subprocess.run(camus("controller", "push", "--target", p4rt, "--pipeline", str(new_dir),
                                    "--timeout", "10"), capture_output=True, text=True, timeout=60)
        assert push.returncode == 0, push.stderr
        # The switch already runs this pipeline (same cookie): only entries were written.
        assert "pipeline set" not in push.stdout
        exchange(ingress, socks, new, range(8, 16))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        print(out, err)  # shown by pytest if the test failed
        for s in socks.values():
            s.close()
    assert proc.returncode == 0, err
    assert "rx" in out and "unbound egress copies: 0" in out
