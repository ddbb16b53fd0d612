"""`camus cluster materialise` as a child process: a real camus instance that a test (or a
benchmark) can kill -9, pause or stop."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class Instance:
    """`camus cluster materialise` as a child process (a real, separately killable camus)."""

    def __init__(self, bootstrap: str, deployment: str, name: str, extra: list[str] = ()):
        self.name = name
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"camus-materialise-{uuid.uuid4().hex}.log"
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "camus.cli", "cluster", "materialise", "--kafka", bootstrap,
             "--deployment", deployment, "--instance", name, *extra],
            cwd=REPO, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if not re.search(r"materialising the views of deployment", line):
            self.kill()
            raise RuntimeError(f"materialiser {name} did not start: {line!r}\n{self.stderr()}")

    def kill(self) -> None:
        """kill -9: no transaction finished, no group left."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def stderr(self) -> str:
        return self.log_path.read_text(errors="replace")
