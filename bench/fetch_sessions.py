"""What incremental fetch sessions (KIP-227) save an idle consumer of many partitions.

Starts this checkout's `camus serve` (in memory) on a free 127.0.0.1 port, creates one
topic of `--partitions` partitions holding one record each, then polls it `--polls` times
with nothing new to read, as a caught-up consumer does, two ways in the same run:

* baseline: sessionless full Fetches (session_id 0, epoch -1), every partition named in
  every request and answered in every response (what every Fetch was before issue 17,
  and what librdkafka still sends);
* sessions: one full Fetch opening a session, then incremental Fetches naming no
  partition, answered with none (kafka-python 3 and the Java consumer).

It prints bytes sent and received and the median round trip per poll, and the ratios.

    python bench/fetch_sessions.py [--partitions 1000] [--polls 200]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kio.index import load_request_schema  # noqa: E402

from shim.protocol import build  # noqa: E402
from tests.protocol.protocol_helpers import decode_response, encode_request  # noqa: E402


def call(s: socket.socket, key: int, version: int, **fields) -> tuple[object, int, int]:
    data = encode_request(key, version, build(load_request_schema(key, version), **fields))
    s.sendall(data)
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    body = b""
    while len(body) < size:
        body += s.recv(size - len(body))
    return decode_response(key, version, struct.pack(">i", size) + body)[1], len(data), size + 4


def fetch(s, topic, session_id, epoch, partitions):
    return call(s, 1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20,
                isolation_level=0, session_id=session_id, session_epoch=epoch,
                topics=[{"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": 1,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20} for p in partitions]}] if partitions else [],
                forgotten_topics_data=[], rack_id="")


def polls(s, topic, n, partitions, sessions: bool) -> tuple[float, float, float]:
    sent = received = 0
    times = []
    session_id, epoch = 0, 0 if sessions else -1
    resp, _, _ = fetch(s, topic, session_id, epoch, partitions)  # the first, full fetch
    if sessions:
        session_id, epoch = resp.session_id, 1
        assert session_id != 0
    for _ in range(n):
        started = time.perf_counter()
        resp, out, back = fetch(s, topic, session_id, epoch, [] if sessions else partitions)
        times.append(time.perf_counter() - started)
        assert resp.error_code == 0
        sent, received = sent + out, received + back
        if sessions:
            epoch += 1
    return sent / n, received / n, statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--polls", type=int, default=200)
    args = ap.parse_args()
    proc = subprocess.Popen([sys.executable, "-m", "camus.cli", "serve", "--listen",
                             "127.0.0.1:0", "-q"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        port = int(re.search(r":(\d+)", proc.stdout.readline()).group(1))
        s = socket.create_connection(("127.0.0.1", port))
        topic, parts = "sessions", list(range(args.partitions))
        call(s, 19, 7, topics=[{"name": topic, "num_partitions": args.partitions,
                                "replication_factor": 1, "assignments": [], "configs": []}],
             timeout=30000, validate_only=False)
        from shim.protocol.records import Record, encode_batch
        batch = encode_batch([Record(0, int(time.time() * 1000), None, b"x")], base_offset=0)
        call(s, 0, 9, transactional_id=None, acks=1, timeout=5000, topic_data=[
            {"name": topic, "partition_data": [{"index": p, "records": batch} for p in parts]}])
        base = polls(s, topic, args.polls, parts, sessions=False)
        sess = polls(s, topic, args.polls, parts, sessions=True)
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"{args.partitions} partitions, {args.polls} idle polls each (median round trip)")
    print(f"{'':22}{'bytes sent':>12}{'bytes received':>16}{'ms / poll':>11}")
    print(f"{'baseline: sessionless':22}{base[0]:12.0f}{base[1]:16.0f}{base[2]:11.2f}")
    print(f"{'incremental session':22}{sess[0]:12.0f}{sess[1]:16.0f}{sess[2]:11.2f}")
    print(f"{'ratio (baseline/session)':22}{base[0] / sess[0]:10.0f}x{base[1] / sess[1]:15.0f}x"
          f"{base[2] / sess[2]:10.1f}x")


if __name__ == "__main__":
    main()
