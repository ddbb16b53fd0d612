"""Starting the demo's processes and reading what they print before `ready`."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def start(module: str, args: list[str], stdin: bool = False) -> subprocess.Popen:
    """`python -m module args` with this checkout first on the path; stdout piped (the lines
    before `ready`), stderr inherited so that a failure shows."""
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, text=True,
                            cwd=ROOT, env=python_env())
    follow(proc)
    return proc


def follow(proc: subprocess.Popen) -> None:
    """Read `proc`'s stdout on a thread, line by line, into `proc.lines` (a queue; None at
    its end): a timed wait for a line then never blocks on a half-read buffer."""
    proc.lines = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            proc.lines.put(line.rstrip("\n"))
        proc.lines.put(None)

    threading.Thread(target=pump, name=f"stdout-{proc.pid}", daemon=True).start()


def read_line(proc: subprocess.Popen, timeout: float, what: str, before: list[str] = ()) -> str:
    """The next line `proc` prints; RuntimeError, with what it printed `before`, if it ends
    or says nothing for `timeout` seconds."""
    try:
        line = proc.lines.get(timeout=timeout)
    except queue.Empty:
        raise RuntimeError(f"{what}: nothing within {timeout:.0f} s") from None
    if line is None:
        try:
            code = proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        said = " | ".join(list(before)[-5:])
        raise RuntimeError(f"{what} exited (code {code})" + (f": {said}" if said else ""))
    return line


def read_until_ready(proc: subprocess.Popen, timeout: float, what: str) -> list[str]:
    """The lines `proc` prints up to `ready` (RuntimeError if it exits or takes longer)."""
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while True:
        line = read_line(proc, max(0.0, deadline - time.monotonic()), what, lines)
        if line == "ready":
            return lines
        lines.append(line)


def iter_lines(proc: subprocess.Popen, timeout: float = 5.0):
    """The lines `proc` printed that nobody read yet, up to its end (after it exited)."""
    while True:
        try:
            line = proc.lines.get(timeout=timeout)
        except queue.Empty:
            return
        if line is None:
            return
        yield line


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
    if proc.stdin is not None:
        proc.stdin.close()
    return code
