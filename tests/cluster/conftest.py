"""Fixtures for the cluster tests: one real three-node Apache Kafka cluster per session
(`tests/cluster/kafka_cluster.py`), and camus materialisers as separate processes.

The cluster (the `kafka_cluster` and `cluster` fixtures of tests/conftest.py) is shared by
every test of the session, tests/front_door's too (starting three JVMs costs ~15-25 s on two
cores); each test names its own topics and deployment, and `cluster` restarts any node an
earlier test killed, so every test starts on a whole cluster.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from .instances import Instance

REPO = Path(__file__).resolve().parents[2]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(check, timeout: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


@pytest.fixture
def materialisers():
    started: list[Instance] = []

    def start(bootstrap: str, deployment: str, name: str, extra: list[str] = ()) -> Instance:
        inst = Instance(bootstrap, deployment, name, list(extra))
        started.append(inst)
        return inst

    yield start
    for inst in started:
        inst.stop()
        inst.log.close()


def camus(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The camus command line, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "camus.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def source_with_views(bootstrap: str, deployment: str, source: str, partitions: int,
                      schema: str, views: dict[str, str]) -> None:
    """A source topic in the cluster with camus.schema `schema`, and `views` ({name:
    filter}) of it, made with the command line as a user makes them."""
    from .kafka_io import create_topic

    create_topic(bootstrap, source, partitions)
    done = camus("cluster", "schema", "set", source, schema, "--kafka", bootstrap,
                 "--deployment", deployment)
    assert done.returncode == 0, done.stderr
    for name, text in views.items():
        made = camus("cluster", "view", "create", name, "--source", source, "--filter", text,
                     "--kafka", bootstrap, "--deployment", deployment)
        assert made.returncode == 0, made.stderr


def checksum(rows) -> tuple[int, str]:
    """(count, SHA-256 over the sorted (source partition, source offset, value) rows)."""
    h = hashlib.sha256()
    rows = sorted(rows)
    for p, o, v in rows:
        h.update(b"%d:%d:%d:" % (p, o, len(v or b"")) + (v or b""))
    return len(rows), h.hexdigest()
