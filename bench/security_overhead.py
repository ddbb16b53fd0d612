"""What TLS and SASL cost a client of `camus serve`: produce and consume rates over each
listener of one broker, PLAINTEXT being the baseline measured in the same run (issue 15).

Starts this checkout's `camus serve` (in memory, a throwaway CA and one SCRAM user in a
temporary data dir) with PLAINTEXT, SSL, SASL_PLAINTEXT (SCRAM-SHA-512) and SASL_SSL
(SCRAM-SHA-512) listeners on 127.0.0.1, then for each: produces `--records` records of
`--size` bytes with confluent-kafka (acks=all) and consumes them back, and prints records/s
with the ratio to PLAINTEXT. Also times `--connects` fresh connections per listener up to
their first Metadata answer (TLS handshake + SASL exchange included), against PLAINTEXT's.

    python bench/security_overhead.py [--records 200000] [--size 100] [--connects 20]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start(d: Path):
    from tests.broker.security_helpers import add_user, make_pki
    make_pki(d)
    add_user(d / "data", "bench", "bench-secret", "SCRAM-SHA-512")
    cmd = [sys.executable, "-m", "camus.cli", "serve", "-q", "--data-dir", str(d / "data"),
           "--listen", "127.0.0.1:0", "--listen", "SSL://127.0.0.1:0",
           "--listen", "SASL_PLAINTEXT://127.0.0.1:0", "--listen", "SASL_SSL://127.0.0.1:0",
           "--ssl-cert", str(d / "server.pem"), "--ssl-key", str(d / "server.key")]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    ports = {}
    for _ in range(4):
        line = proc.stdout.readline()
        m = re.search(r"listening on (?:(\w+)://)?[\d.]+:(\d+)", line)
        ports[m.group(1) or "PLAINTEXT"] = int(m.group(2))
    return proc, ports


def client(protocol: str, port: int, d: Path) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol, "log_level": 0}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(d / "ca.pem")
    if "SASL" in protocol:
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                     "sasl.password": "bench-secret"})
    return conf


def produce_consume(conf: dict, topic: str, records: int, size: int) -> tuple[float, float]:
    from confluent_kafka import Consumer, Producer
    p = Producer({**conf, "acks": "all", "linger.ms": 5})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    produced = records / (time.perf_counter() - started)
    c = Consumer({**conf, "group.id": f"bench-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    n, started = 0, time.perf_counter()
    while n < records:
        for m in c.consume(1000, 1.0):
            n += m.error() is None
    consumed = records / (time.perf_counter() - started)
    c.close()
    return produced, consumed


def connect_ms(conf: dict, count: int) -> float:
    from confluent_kafka.admin import AdminClient
    started = time.perf_counter()
    for _ in range(count):
        AdminClient(conf).list_topics(timeout=10)
    return (time.perf_counter() - started) / count * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--connects", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are shown")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        proc, ports = start(d)
        try:
            protocols = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
            runs: dict = {p: [] for p in protocols}
            for p in protocols:  # warm-up: topic creation, first connections
                produce_consume(client(p, ports[p], d), f"warm-{p.lower()}", 1000, args.size)
            for r in range(args.rounds):  # interleaved, so machine load falls on all alike
                for p in protocols:
                    conf = client(p, ports[p], d)
                    runs[p].append((*produce_consume(conf, f"bench-{p.lower()}-{r}", args.records,
                                                     args.size), connect_ms(conf, args.connects)))
            rows = {p: tuple(statistics.median(x[i] for x in runs[p]) for i in range(3))
                    for p in protocols}
            base = rows["PLAINTEXT"]
            print(f"{args.records} records of {args.size} B, acks=all; {args.connects} connections "
                  f"each; medians of {args.rounds} interleaved rounds")
            print(f"{'listener':<16}{'produce rec/s':>15}{'ratio':>7}{'consume rec/s':>15}{'ratio':>7}"
                  f"{'connect ms':>12}{'ratio':>7}")
            for protocol, (prod, cons, conn) in rows.items():
                print(f"{protocol:<16}{prod:>15,.0f}{prod / base[0]:>7.2f}{cons:>15,.0f}"
                      f"{cons / base[1]:>7.2f}{conn:>12.1f}{conn / base[2]:>7.2f}")
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
