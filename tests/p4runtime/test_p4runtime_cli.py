"""`camus controller push` exit codes and messages when the target cannot be programmed."""

from __future__ import annotations

import socket

from camus.cli import main
from controller.p4runtime_client import P4RuntimeClient
from p4runtime_helpers import compiled, write_dir
from switch.device import Device
from switch.p4runtime_server import serve


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_target_fails_fast(tmp_path, capsys):
    d = write_dir(compiled(), tmp_path / "cfg")
    rc = main(["controller", "push", "--target", f"127.0.0.1:{closed_port()}", "--pipeline", str(d),
               "--timeout", "1"])
    assert rc == 1
    assert "not reachable" in capsys.readouterr().err


def test_p4info_needs_a_device_config(tmp_path, capsys):
    d = write_dir(compiled(), tmp_path / "cfg")
    assert main(["controller", "push", "--pipeline", str(d), "--p4info", str(d / "pipeline.json")]) == 2
    assert "go together" in capsys.readouterr().err


def test_a_lower_election_id_is_not_primary(tmp_path, capsys):
    d = write_dir(compiled(), tmp_path / "cfg")
    server, port = serve(Device("python"), "127.0.0.1:0", max_workers=4)
    primary = P4RuntimeClient(f"127.0.0.1:{port}", election_id=100, timeout=5)
    try:
        primary.arbitrate()
        rc = main(["controller", "push", "--target", f"127.0.0.1:{port}", "--pipeline", str(d),
                   "--election-id", "7", "--timeout", "5"])
        assert rc == 1
        assert "not primary" in capsys.readouterr().err
        rc = main(["controller", "push", "--target", f"127.0.0.1:{port}", "--pipeline", str(d),
                   "--election-id", "101", "--timeout", "5"])
        assert rc == 0
        assert "pipeline set" in capsys.readouterr().out
    finally:
        primary.close()
        server.stop(0).wait(5)
