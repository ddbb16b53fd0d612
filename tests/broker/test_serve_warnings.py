"""`camus serve` says at start-up when it was given settings that do nothing (issue 24)."""

from __future__ import annotations

import json

from tests.broker.conftest import Server

IDLE = "given without an authorizer"


def started_with(extra: list[str]) -> str:
    s = Server(None, extra)
    s.stop()
    return s.stderr()


def test_super_users_without_an_authorizer_get_one_warning_line(tmp_path):
    log = started_with(["--super-users", "User:admin"])
    lines = [line for line in log.splitlines() if IDLE in line]
    assert len(lines) == 1 and "WARNING" in lines[0] and "--super-users" in lines[0]
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"super.users": "User:admin"}))
    assert IDLE in started_with(["--config", str(config)])
    assert IDLE not in started_with(["--super-users", "User:admin", "--authorizer"])
    assert IDLE not in started_with([])
