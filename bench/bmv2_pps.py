"""bmv2's packets per second beside camus's software switch, on the same frames, through
the same plumbing, in the same run (issue 23 item 5).

Targets, each fed the same tagged frames into port 0 and read back on every port
(tests/p4/bmv2_harness.py: a private network namespace, veth pairs, AF_PACKET, P4Runtime
programming by camus's controller; frames sent with a sliding window of `--inflight`
predicted copies, so no egress queue overflows):

* `bmv2`: `simple_switch_grpc` running p4c's compile of the static program for the spec;
* `switch-veth` (the baseline): `camus switch serve --impl native` behind the same veths;
* `in-process` (context, no I/O): the native data plane's `process_packed` on the same
  frames, what the switch does per packet without ports.

Workloads (golden rules of tests/golden/p4, on the static program of each spec):
`itch` MoldUDP64 packets of 1 to 4 Add Orders (GOOGL, MSFT, AAPL, IBM, and a symbol no
rule names), so some are unicast, some replicated through the group and pruned per copy, and
packets with several subscription messages take a resubmitted pass each on bmv2; `kafka`
one record per packet (~200 bytes); `ip` plain UDP to a port no application owns, routed by
`ipv4_lpm`. Every copy is also checked byte for byte against the Python reference (a
mismatch or a missing copy is reported and fails the run). Rates: input packets per second
from the first send to the last copy; ratio bmv2 / switch-veth.

    python bench/bmv2_pps.py                      # 3,000 packets per workload
    python bench/bmv2_pps.py --packets 10000 --workloads itch
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compiler.compile import compile_files  # noqa: E402
from switch.dataplane import load  # noqa: E402
from switch.native_dataplane import pack  # noqa: E402
from switch.packet import mold_payload, udp_frame  # noqa: E402
from tests.p4.bmv2_harness import Device, by_tag, tag  # noqa: E402

SPECS = {"itch": "p4/itch/itch.p4", "kafka": "p4/kafka/kafka.p4", "ip": "p4/kafka/kafka.p4"}
ROUTE = {"table": "ipv4_lpm", "match": {"ipv4.dst_addr": {"lpm": [0xE8000000, 8]}},
         "action": "fwd", "params": {"port": 5}}
STOCKS = [b"GOOGL", b"MSFT", b"AAPL", b"IBM", b"ZZZZ"]


def add_order(rng: random.Random) -> bytes:
    return b"A" + bytes(10) + struct.pack("!QcI8sI", rng.randrange(1 << 32), rng.choice(b"BS").to_bytes(1, "big"),
                                          rng.choice([1, 100, 10000, 20000]), rng.choice(STOCKS).ljust(8),
                                          rng.choice([1, 500, 1500001, 4000000]))


def workload(name: str, n: int, rng: random.Random) -> tuple[object, dict, list[bytes]]:
    golden = "itch" if name == "itch" else "kafka"
    c = compile_files(ROOT / SPECS[name], ROOT / "tests/golden/p4" / golden / "rules.txt", static=True)
    entries = {**c.entries, "table_entries": c.entries["table_entries"] + [ROUTE]}
    frames = []
    for i in range(n):
        if name == "itch":
            blocks = [add_order(rng) for _ in range(rng.randint(1, 4))]
            frame = udp_frame(mold_payload(b"SESSION001", i, blocks), dst_port=1234)
        elif name == "kafka":
            payload = struct.pack("!II", rng.choice([1, 2, 3]), rng.randrange(4)) + rng.randbytes(80) + rng.randbytes(100)
            frame = udp_frame(payload, dst_port=9094)
        else:
            frame = udp_frame(rng.randbytes(100), dst_port=4444)
        frames.append(tag(frame, i % 0xFFFF + 1))
    return c, entries, frames


def measure(device: Device, c, entries: dict, frames: list[bytes], want: dict, expected: list[int],
            inflight: int) -> tuple[float, int, int]:
    """(packets/s, copies back, copies wrong or missing) for one run of `frames`."""
    device.program(c.pipeline, entries)
    device.wire.exchange(frames[:50], expected[:50])  # warm up (and let the program settle)
    copies, took = device.wire.stream(frames, expected, inflight)
    got = by_tag(copies)
    wrong = sum(got.get(t) != ports for t, ports in want.items()) + len(set(got) - set(want))
    return len(frames) / took, len(copies), wrong


def in_process(c, entries: dict, frames: list[bytes]) -> float:
    dp = load(c.pipeline, entries, impl="native")
    buf, lengths = pack(frames)
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        dp.process_packed(buf, lengths, 0)
        best = max(best, len(frames) / (time.perf_counter() - t0))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=3000)
    ap.add_argument("--workloads", default="itch,kafka,ip")
    ap.add_argument("--inflight", type=int, default=48, help="predicted copies owed before sending waits")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--targets", default="switch-veth,bmv2", help="switch-veth (the baseline), bmv2")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bmv2-pps-"))
    targets = args.targets.split(",")
    devices = {t: Device("switch" if t == "switch-veth" else t, work / t) for t in targets}
    failed = False
    try:
        print(f"{args.packets} packets per workload, {args.inflight} copies in flight at most")
        for name in args.workloads.split(","):
            c, entries, frames = workload(name, args.packets, random.Random(args.seed))
            ref = load(c.pipeline, entries, impl="python")
            outs = [ref.process(f, 0) for f in frames]
            expected = [len(o) for o in outs]
            want = by_tag([x for o in outs for x in o])
            rates = {}
            for target, device in devices.items():
                pps, back, wrong = measure(device, c, entries, frames, want, expected, args.inflight)
                rates[target] = pps
                failed |= wrong > 0
                print(f"{name:>6} {target:>12}: {pps:>10,.0f} packets/s  copies {back} of {sum(expected)}"
                      f"{f'  WRONG OR MISSING: {wrong} frames' if wrong else ''}")
            print(f"{name:>6} {'in-process':>12}: {in_process(c, entries, frames):>10,.0f} packets/s "
                  f"(native process_packed, no I/O)")
            if len(rates) == 2:
                print(f"{name:>6} ratio bmv2 / switch-veth: {rates['bmv2'] / rates['switch-veth']:.3f} "
                      f"({sum(expected) / len(frames):.2f} copies per packet)")
    finally:
        for device in devices.values():
            device.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
