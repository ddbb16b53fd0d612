"""Can a stranger tell a user name exists from outside? What PLAIN's failure takes for a known
user (wrong password) and for an unknown name, and what SCRAM's first server message says for
each (issue 24, item 7). A benchmark, not a test: wall-clock on a shared machine is noisy, so
the known/unknown ratio of medians over interleaved rounds is the figure to read.

Starts `camus serve` from the checkout given (default: this one) with a SASL_PLAINTEXT
listener, `connection.failed.authentication.delay.ms` 0 (so the failure is answered at once)
and one user, alice, at `--iterations`; then, `--rounds` times each, alternating, sends a
PLAIN SaslAuthenticate for alice with a wrong password and for `nobody`, timing the answer.

    python bench/sasl_enumeration.py [--rounds 200] [--iterations 16384] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start(checkout: Path, d: Path, iterations: int):
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run([sys.executable, "-m", "camus.cli", "user", "add", "alice", "--data-dir",
                    str(d), "--iterations", str(iterations)], input="alice-secret\n", text=True,
                   cwd=checkout, env=env, check=True, capture_output=True)
    config = d.parent / "bench.json"
    config.write_text(json.dumps({"connection.failed.authentication.delay.ms": 0}))
    proc = subprocess.Popen([sys.executable, "-m", "camus.cli", "serve", "-q", "--data-dir", str(d),
                             "--listen", "127.0.0.1:0", "--listen", "SASL_PLAINTEXT://127.0.0.1:0",
                             "--config", str(config)],
                            cwd=checkout, env=env, stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    return proc, int(re.search(r":(\d+)$", proc.stdout.readline().strip()).group(1))


def plain_failure_seconds(port: int, user: str) -> float:
    from tests.broker.test_bad_input import read_frame, request

    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(17, 1, mechanism="PLAIN"))
    read_frame(s)
    token = request(36, 2, auth_bytes=f"\0{user}\0wrong".encode())
    started = time.perf_counter()
    s.sendall(token)
    read_frame(s)
    took = time.perf_counter() - started
    s.close()
    return took


def scram_first(port: int, user: str) -> str:
    from tests.broker.test_bad_input import read_frame, request
    from tests.protocol.protocol_helpers import decode_response

    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(17, 1, mechanism="SCRAM-SHA-256"))
    read_frame(s)
    s.sendall(request(36, 2, auth_bytes=f"n,,n={user},r=benchnonce".encode()))
    answer = decode_response(36, 2, read_frame(s))[1].auth_bytes.decode()
    s.close()
    return re.sub(r"r=[^,]*", "r=…", answer)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--iterations", type=int, default=16384)
    ap.add_argument("--checkout", type=Path, default=ROOT)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start(args.checkout, Path(tmp) / "data", args.iterations)
        try:
            times = {"alice": [], "nobody": []}
            for _ in range(args.rounds):
                for user in times:
                    times[user].append(plain_failure_seconds(port, user))
            known, unknown = (statistics.median(times[u]) * 1000 for u in ("alice", "nobody"))
            print(f"PLAIN failure, median of {args.rounds}: known {known:.2f} ms, "
                  f"unknown {unknown:.2f} ms, unknown/known {unknown / known:.2f}")
            for user in ("alice", "nobody"):
                print(f"SCRAM-SHA-256 server-first for {user}: {scram_first(port, user)}")
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
