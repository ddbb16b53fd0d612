"""Starting the demo's processes and reading what they print before `ready`."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start(module: str, args: list[str], stdin: bool = False) -> subprocess.Popen:
    """`python -m module args` with this checkout first on the path; stdout piped (the lines
    before `ready`), stderr inherited so that a failure shows."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, text=True,
                            cwd=ROOT, env=env)


def read_line(proc: subprocess.Popen, timeout: float, what: str) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if not line:
        raise RuntimeError(f"{what}: no answer within {timeout:.0f} s (exit code {proc.poll()})")
    return line.rstrip("\n")


def read_until_ready(proc: subprocess.Popen, timeout: float, what: str) -> list[str]:
    """The lines `proc` prints up to `ready` (RuntimeError if it exits or takes longer)."""
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while True:
        line = read_line(proc, max(0.0, deadline - time.monotonic()), what)
        if line == "ready":
            return lines
        lines.append(line)


def field(lines: list[str], name: str) -> str:
    """The rest of the line `name ...`."""
    for line in lines:
        if line.startswith(name + " "):
            return line[len(name) + 1:]
    raise RuntimeError(f"no '{name}' line in {lines}")


def stop(proc: subprocess.Popen, timeout: float = 15.0) -> int:
    """SIGTERM and wait (SIGKILL after `timeout`); the exit code."""
    if proc.poll() is None:
        proc.terminate()
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    for f in (proc.stdout, proc.stdin):
        if f is not None:
            f.close()
    return code
