"""Records/s across the fabric against one broker, same run (issue 14 item 7).

Baseline: one `camus serve` (embedded switch); a confluent-kafka producer writes `--records`
JSON records (`sel` uniform in 0..99) to a topic, and a consumer of the view `sel < 50` on
the same broker reads them. Fabric: `camus net serve --topology fattree:4` and two brokers,
`camus serve --target fabric://...?host=h0` (the producer's) and `?host=h5` (another pod:
five switches away), the view on h5. Each figure is the time from the first produce to the
consumer holding every matching record, as records produced per second; the ratio is fabric
over one broker. The consumer is subscribed and assigned before the producer starts.
Also printed: the controller's forwarding alone (`Fabric.inject` of the same records'
frames from h0 with h5's subscription, in this process, no sockets), which bounds what
one controller thread carries.

    python bench/fabric_kafka.py                    # 20,000 records
    python bench/fabric_kafka.py --records 50000
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SCHEMA = "sel:u8=$.sel"


def start(cmd: list[str], pattern: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "camus.cli", *cmd], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.search(pattern, proc.stdout.readline())
    if m is None:
        proc.kill()
        raise SystemExit(f"{' '.join(cmd)} did not start")
    return proc, m.group(1)


def create(bootstrap: str, name: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, 1, config=config)]).values():
        f.result(30)


def run(producer_at: str, view_at: str, docs: list[bytes], want: int) -> float:
    c = Consumer({"bootstrap.servers": view_at, "group.id": f"bench-{time.time_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["view"])
    while not c.assignment():
        c.poll(0.1)
    time.sleep(1.5)  # the member's subscription reaches the network
    p = Producer({"bootstrap.servers": producer_at, "linger.ms": 5})
    started = time.perf_counter()
    for d in docs:
        p.produce("source", d)
        p.poll(0)
    p.flush(60)
    got, deadline = 0, time.monotonic() + 120
    while got < want and time.monotonic() < deadline:
        for m in c.consume(1000, 0.2):
            if m.error() is None:
                got += 1
    seconds = time.perf_counter() - started
    c.close()
    if got != want:
        raise SystemExit(f"the view got {got} records of {want}")
    return seconds


def inject_rate(sels: list[int], docs: list[bytes]) -> float:
    """Frames/s `Fabric.inject` forwards from h0 to h5 (the view's filter on h5)."""
    from compiler.spec import load_spec
    from controller.network import Fabric, Network
    from controller.policy import Subscription as HostSubscription
    from controller.topology import fat_tree
    from shim import reframe
    from shim.schema import parse_schema
    from shim.subscriptions import Subscription, rules_for, view_filter

    spec = load_spec(REPO / "p4" / "kafka" / "kafka.p4")
    net = Network(spec, fat_tree(4), [], "tr", 1)
    f = view_filter(spec, parse_schema(SCHEMA), "sel < 50")
    net.add(HostSubscription("h5", rules_for(spec, [Subscription(1, 1, None, f)])[0].filter))
    fabric = Fabric.of(net)
    frames = [reframe.packets(1, 0, i, [s] + [0] * 7, reframe.Record(0, None, d))[0]
              for i, (s, d) in enumerate(zip(sels, docs))]
    started = time.perf_counter()
    for frame in frames:
        fabric.inject("h0", frame)
    return len(frames) / (time.perf_counter() - started)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20000)
    args = ap.parse_args()
    rnd = random.Random(14)
    sels = [rnd.randrange(100) for _ in range(args.records)]
    docs = [json.dumps({"sel": s, "pad": "x" * 60}).encode() for s in sels]
    want = sum(s < 50 for s in sels)
    procs = []
    try:
        single, bs = start(["serve", "--listen", "127.0.0.1:0"], r"listening on ([\d.:]+)")
        procs.append(single)
        create(bs, "source", **{"camus.schema": SCHEMA})
        create(bs, "view", **{"camus.source": "source", "camus.filter": "sel < 50"})
        one = run(bs, bs, docs, want)

        ctl, address = start(["net", "serve", "--topology", "fattree:4"],
                             r"fabric controller on ([\d.:]+)")
        procs.append(ctl)
        hosts = {}
        for h in ("h0", "h5"):
            proc, hosts[h] = start(["serve", "--listen", "127.0.0.1:0", "--target",
                                    f"fabric://{address}?host={h}"], r"listening on ([\d.:]+)")
            procs.append(proc)
            create(hosts[h], "source", **{"camus.schema": SCHEMA})
        create(hosts["h5"], "view", **{"camus.source": "source", "camus.filter": "sel < 50"})
        fabric = run(hosts["h0"], hosts["h5"], docs, want)
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
    print(f"{args.records} records, {want} matching the view, producer and view consumer "
          "(confluent-kafka)")
    print(f"{'path':<44} {'seconds':>8} {'records/s':>10}")
    print(f"{'one broker (baseline)':<44} {one:>8.2f} {args.records / one:>10.0f}")
    print(f"{'fabric: h0 -> 5 switches -> h5 (k=4 fat tree)':<44} {fabric:>8.2f} "
          f"{args.records / fabric:>10.0f}")
    print(f"ratio fabric / one broker (records/s): {one / fabric:.2f}")
    print(f"the controller's forwarding alone (Fabric.inject, h0 -> h5): "
          f"{inject_rate(sels, docs):.0f} frames/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
