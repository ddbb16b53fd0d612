"""Fixtures for the broker tests: `camus serve` as a subprocess on an ephemeral 127.0.0.1 port.

`camus_server(data_dir=None)` starts the real command line (`python -m camus.cli serve
--listen 127.0.0.1:0`), reads the port it prints, and stops it with SIGTERM (SIGKILL after
10 s). Every test gets a fresh broker unless it shares the module-scoped `broker`.

`CAMUS_TEST_TARGET=SPEC` runs every broker these fixtures start on that target (`camus serve
--target SPEC`) unless a test names its own: e.g. `switch` puts `camus switch serve` in the
loop, reached over P4Runtime and UDP (docs/remote-target.md).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEST_TARGET = os.environ.get("CAMUS_TEST_TARGET") or None


class Server:
    def __init__(self, data_dir: Path | None = None, extra: list[str] | None = None,
                 prefix: list[str] | None = None) -> None:
        # `prefix` runs the command through another, e.g. nsenter into a mount namespace.
        cmd = [*(prefix or []), sys.executable, "-m", "camus.cli", "serve", "--listen", "127.0.0.1:0"]
        if data_dir is not None:
            cmd += ["--data-dir", str(data_dir)]
        cmd += extra or []
        if TEST_TARGET and not {"--target", "--switch"} & set(cmd):
            cmd += ["--target", TEST_TARGET]
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"camus-serve-{uuid.uuid4().hex}.log"
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()  # "camus: listening on HOST:PORT", or EOF on failure
        m = re.search(r"listening on ([\d.]+):(\d+)", line)
        if m is None:
            self.stop()
            raise RuntimeError(f"camus serve did not start: {line!r}\n{self.log_path.read_text()}")
        self.port = int(m.group(2))
        self.bootstrap = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            if os.environ.get("CAMUS_DUMP_STACKS"):
                self.proc.send_signal(signal.SIGUSR1)  # stacks into the log, to explain a hang
                time.sleep(0.2)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

    def stderr(self) -> str:
        return self.log_path.read_text()


@pytest.fixture
def camus_server():
    started: list[Server] = []

    def start(data_dir: Path | None = None, extra: list[str] | None = None,
              prefix: list[str] | None = None) -> Server:
        s = Server(data_dir, extra, prefix)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="module")
def broker():
    s = Server(extra=["-v"] if os.environ.get("CAMUS_VERBOSE") else None)
    yield s
    s.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(predicate, timeout: float = 15.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


class InProcess:
    """`shim.server.serve` on a thread of this process, so tests can look at the broker's
    switch and groups; reading that state from the test thread is racy, so tests poll."""

    def __init__(self, **config) -> None:
        import asyncio
        import threading

        from shim.broker import Config
        from shim.server import serve

        if TEST_TARGET:
            config.setdefault("target", TEST_TARGET)
        self.loop = asyncio.new_event_loop()
        self.broker = None
        self.stop_event = None
        started = threading.Event()

        def ready(broker):
            self.broker = broker
            started.set()

        async def main():
            self.stop_event = asyncio.Event()
            await serve(Config(port=0, **config), on_ready=ready, stop=self.stop_event)

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),),
                                       daemon=True)
        self.thread.start()
        assert started.wait(15), "in-process broker did not start"
        self.bootstrap = f"127.0.0.1:{self.broker.config.port}"

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


@pytest.fixture
def inprocess():
    s = InProcess()
    yield s
    s.stop()
