"""`camus serve` under resource attacks: its memory (RSS) and whether a normal client is still
served, attack by attack (issue 13, item 5).

Starts this checkout's `camus serve` on a free 127.0.0.1 port (in memory, or `--data-dir`),
then, one after another:

* idle sockets: opens `--idle` TCP connections that never send a byte, then times one
  ordinary produce + metadata round trip from a new client;
* big frames: `--frames` connections each announce a 100 MiB request and send the first
  `--frame-mib` MiB of it, without finishing;
* greedy fetch: a consumer asks for 2 GiB per fetch and 1 GB per partition from a topic holding
  `--fetch-mib` MiB;
* many partitions: one CreateTopics for 100,000 partitions;
* ListOffsets by time on a partition of `--batches` records in batches of 5: time per lookup.

After each it prints the broker's RSS (from /proc) and what the client saw. All traffic
stays on 127.0.0.1; every attack is bounded in count and time and ends by itself. Compare
two checkouts by running each one's copy of this script.

    python bench/broker_limits.py
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start(data_dir: str | None) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "camus.cli", "serve", "--listen", "127.0.0.1:0"]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"listening on ([\d.]+:\d+)", proc.stdout.readline())
    if m is None:
        proc.kill()
        raise SystemExit("camus serve did not start")
    return proc, m.group(1)


def client_round_trip(bootstrap: str, timeout: float = 20.0) -> str:
    """Seconds for a new client to produce one record and read metadata, or why it failed."""
    from confluent_kafka import Producer

    t0 = time.monotonic()
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": int(timeout * 1000),
                  "socket.connection.setup.timeout.ms": int(timeout * 1000)})
    failed: list[str] = []
    p.produce("probe", b"x", on_delivery=lambda err, _m: err and failed.append(str(err)))
    left = p.flush(timeout)
    if left or failed:
        return f"FAILED ({failed[0] if failed else 'no answer'})"
    p.list_topics(timeout=timeout)
    return f"{time.monotonic() - t0:.2f} s"


def idle_sockets(host: str, port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        try:
            out.append(socket.create_connection((host, port), timeout=5))
        except OSError:
            break
    return out


def big_frames(host: str, port: int, n: int, mib: int, seconds: float = 10.0) -> list[socket.socket]:
    """n connections, each announcing a 100 MiB request and sending `mib` MiB of it."""
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port), timeout=5)
        s.setblocking(False)
        s.send(struct.pack(">i", 100 << 20))
        socks.append([s, mib << 20])
    chunk = b"\0" * (1 << 16)
    deadline = time.monotonic() + seconds
    while any(left > 0 for _, left in socks) and time.monotonic() < deadline:
        for entry in socks:
            s, left = entry
            if left <= 0:
                continue
            try:
                entry[1] -= s.send(chunk[:left])
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                entry[1] = 0
        time.sleep(0.001)
    return [s for s, _ in socks]


def greedy_fetch(bootstrap: str, proc: subprocess.Popen, mib: int) -> str:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20})
    value = b"v" * 1000
    for _ in range(mib * 1024):
        while True:
            try:
                p.produce("greedy", value, partition=0)
                break
            except BufferError:
                p.poll(0.1)
    p.flush(120)
    peak = rss_mib(proc.pid)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "greedy",
                  "fetch.max.bytes": 2147483135, "max.partition.fetch.bytes": 1_000_000_000,
                  "receive.message.max.bytes": 2147483647, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    c.assign([TopicPartition("greedy", 0, 0)])
    got, deadline = 0, time.monotonic() + 120
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        peak = max(peak, rss_mib(proc.pid))
        if m is None:
            continue
        if m.error():
            break
        got += 1
    c.close()
    return f"read {got} records; broker RSS peak {peak:.0f} MiB"


def many_partitions(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    t0 = time.monotonic()
    try:
        admin.create_topics([NewTopic("wide", 100_000)], request_timeout=120)["wide"].result(180)
        return f"created in {time.monotonic() - t0:.1f} s"
    except Exception as exc:  # the refusal is the wanted outcome
        return f"refused in {time.monotonic() - t0:.2f} s: {exc}"


def offsets_by_time(bootstrap: str, batches: int) -> str:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    t_mid = None
    for i in range(batches):
        while True:
            try:
                p.produce("timed", b"t", partition=0, timestamp=1_700_000_000_000 + i)
                break
            except BufferError:
                p.poll(0.05)
        if i % 5 == 0:
            p.flush(30)  # many small batches
        if i == batches * 9 // 10:
            t_mid = 1_700_000_000_000 + i
    p.flush(60)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "timed"})
    t0 = time.monotonic()
    rounds = 5
    for _ in range(rounds):
        (tp,) = c.offsets_for_times([TopicPartition("timed", 0, t_mid)], timeout=60)
    took = (time.monotonic() - t0) / rounds
    c.close()
    return f"offset {tp.offset} for a timestamp 90 % in: {took * 1000:.1f} ms per lookup"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=int, default=1100)
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--frame-mib", type=int, default=40)
    ap.add_argument("--fetch-mib", type=int, default=150)
    ap.add_argument("--batches", type=int, default=20_000, help="records, in batches of 5")
    ap.add_argument("--data-dir", action="store_true", help="run the broker on a temporary data dir")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, bootstrap = start(tmp if args.data_dir else None)
        host, port = bootstrap.split(":")
        try:
            print(f"checkout {ROOT}; broker RSS at start {rss_mib(proc.pid):.0f} MiB")
            held = idle_sockets(host, int(port), args.idle)
            print(f"{len(held)} idle sockets: RSS {rss_mib(proc.pid):.0f} MiB; "
                  f"a new client: {client_round_trip(bootstrap)}")
            for s in held:
                s.close()
            held = big_frames(host, int(port), args.frames, args.frame_mib)
            time.sleep(1)
            print(f"{args.frames} x {args.frame_mib} MiB of unfinished 100 MiB requests: "
                  f"RSS {rss_mib(proc.pid):.0f} MiB; a new client: {client_round_trip(bootstrap)}")
            for s in held:
                s.close()
            print(f"greedy fetch of {args.fetch_mib} MiB: {greedy_fetch(bootstrap, proc, args.fetch_mib)}")
            print(f"CreateTopics with 100,000 partitions: {many_partitions(bootstrap)}; "
                  f"RSS {rss_mib(proc.pid):.0f} MiB")
            print(f"ListOffsets by time over {args.batches} records: "
                  f"{offsets_by_time(bootstrap, args.batches)}")
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
