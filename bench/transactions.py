"""Transactions' cost at the broker: records/s through a transactional producer against the
same records through an idempotent one that flushes after each group, in the same run.

Starts `camus serve` (this checkout) on a free 127.0.0.1 port with a data dir in a temporary
directory (so every transaction state change is written to
`transactions.json`), then with confluent-kafka produces `--records` records of 100 bytes
in groups of `--per-txn`: the baseline flushes each group (one Produce round trip per
group, like a commit's wait), the transactional run wraps each group in begin/commit
(AddPartitionsToTxn, Produce, EndTxn with its markers). Prints both rates and their ratio.

    python bench/transactions.py                 # 20,000 records, 100 per transaction
    python bench/transactions.py --memory        # no data dir: nothing written to files
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]


def serve(data_dir: str | None) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "camus.cli", "serve", "-q", "--listen",
                             f"127.0.0.1:{port}", *(["--data-dir", data_dir] if data_dir else [])],
                            cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not re.search(r"listening on", line):
        raise SystemExit(f"camus serve did not start: {line!r}")
    return proc, f"127.0.0.1:{port}"


def run(bootstrap: str, topic: str, records: int, per_txn: int, transactional: bool) -> float:
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if transactional:
        conf["transactional.id"] = f"bench-{topic}"
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
    value = b"x" * 100
    # Connections and metadata first, outside the timing, for both.
    if transactional:
        p.begin_transaction()
    p.produce(topic, value, partition=0)
    p.commit_transaction(30) if transactional else p.flush(30)
    t0 = time.perf_counter()
    for start in range(0, records, per_txn):
        if transactional:
            p.begin_transaction()
        for _ in range(min(per_txn, records - start)):
            p.produce(topic, value, partition=0)
        if transactional:
            p.commit_transaction(30)
        else:
            p.flush(30)
    return records / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--per-txn", type=int, default=100)
    ap.add_argument("--memory", action="store_true", help="no data dir (nothing written to files)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        proc, bootstrap = serve(None if args.memory else d)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for f in admin.create_topics([NewTopic("base", 1), NewTopic("txn", 1)]).values():
                f.result(10)
            base = run(bootstrap, "base", args.records, args.per_txn, False)
            txn = run(bootstrap, "txn", args.records, args.per_txn, True)
        finally:
            proc.terminate()
            proc.wait(10)
    where = "in memory" if args.memory else "data dir (state and logs written to files)"
    print(f"{args.records} records, {args.per_txn} per group, {where}")
    print(f"idempotent, flush per group   {base:>10,.0f} records/s   (baseline)")
    print(f"transactional, commit per txn {txn:>10,.0f} records/s   ratio {txn / base:.2f}")


if __name__ == "__main__":
    main()
