"""`camus topic create|delete|list` against `camus serve`: camus.* configs that Kafka's own
kafka-topics refuses on the client side, and the broker's messages for bad ones."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO, unique


def camus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "camus.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_topic_cli_creates_views_and_reports_bad_filters(broker):
    src, view = unique("cli"), unique("cli-view")
    b = ["--bootstrap-server", broker.bootstrap]
    out = camus("topic", "create", src, *b, "--partitions", "3",
                "--config", "camus.schema=stock:str8=$.stock,price:u32=$.price")
    assert out.returncode == 0, out.stderr
    out = camus("topic", "create", view, *b, "--config", f"camus.source={src}",
                "--config", "camus.filter=price > 100 and stock == \"GOOGL\"")
    assert out.returncode == 0, out.stderr
    bad = camus("topic", "create", unique("bad"), *b, "--config", f"camus.source={src}",
                "--config", "camus.filter=price >")
    assert bad.returncode == 1 and "camus.filter:1:8: unexpected end" in bad.stderr
    assert "(invalid_config)" in bad.stderr
    listed = {row[0]: row[1:] for row in (line.split("\t") for line in
                                          camus("topic", "list", *b).stdout.splitlines())}
    assert listed[src][0] == "3" and listed[view][0] == "3"
    refused = camus("topic", "delete", src, *b)
    assert refused.returncode == 1 and "(policy_violation)" in refused.stderr
    assert camus("topic", "delete", view, *b).returncode == 0
    assert camus("topic", "delete", src, *b).returncode == 0
    assert camus("topic", "create", "x", *b, "--config", "novalue").returncode == 2
