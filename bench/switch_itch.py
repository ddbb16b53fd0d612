"""Software switch on ITCH 5.0 over MoldUDP64: classification and forwarding rates (issue 6).

Two figures, each printed beside a baseline measured in the same run, single-threaded (so
"per core"):

* Classification: 100,000 rules `stock == S and price > P : fwd(H)` (S among 100 symbols,
  P uniform in 1..999, H among 200 ports, fixed seed) compiled by `compiler.compile`; a
  stream of Add Order messages (symbols Zipf(1) over the 100, prices uniform 1..1000) packed
  into MoldUDP64 packets, through the native parse + table walk to the leaf action (port or
  multicast group) in batches, without replication (`classify_packed`). Ratios: the same
  stream against 10 rules of the same form, and a naive baseline that checks every rule for
  every message (pure Python, on a sample, extrapolated).
* Forwarding: 200 hosts each subscribing to 5 random symbols (`stock == S`, half of the
  rules also `price > P`); MoldUDP64 packets of 1-12 messages; full replication, per-port
  pruning and egress rewrite in the native data plane (`process_packed`) against the
  pure-Python reference on the same stream.

Run: `python bench/switch_itch.py` (add `--quick` for a smoke run with fewer rules).
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Measure this checkout's switch and compiler: run as a script, the bench/ directory is first
# on the path, and `switch` would otherwise come from wherever camus is installed (an editable
# install of another worktree, say).
sys.path.insert(0, str(ROOT))

from compiler.compile import compile_text  # noqa: E402
from switch.dataplane import load  # noqa: E402
from switch.native_dataplane import pack  # noqa: E402
from switch.packet import mold_payload, udp_frame  # noqa: E402

SPEC = (ROOT / "p4" / "itch" / "itch.p4").read_text()
SYMBOLS = [f"SYM{i:03d}" for i in range(100)]
HOSTS = 200
SESSION = b"BENCH00001"


def add_order(stock: str, price: int, ref: int) -> bytes:
    return (b"A" + struct.pack("!HH", 1, 0) + (34200 * 10 ** 9).to_bytes(6, "big") + struct.pack("!Q", ref)
            + b"B" + struct.pack("!I", 100) + stock.encode().ljust(8) + struct.pack("!I", price))


def zipf_symbols(rng: random.Random, n: int) -> list[str]:
    return rng.choices(SYMBOLS, weights=[1 / (k + 1) for k in range(len(SYMBOLS))], k=n)


def packets(rng: random.Random, n_packets: int, sizes: tuple[int, int]) -> tuple[list[bytes], int]:
    """MoldUDP64 frames of Add Orders; returns the frames and their message count."""
    frames, seq, total = [], 1, 0
    for _ in range(n_packets):
        k = rng.randint(*sizes)
        msgs = [add_order(s, rng.randint(1, 1000), seq + i) for i, s in enumerate(zipf_symbols(rng, k))]
        frames.append(udp_frame(mold_payload(SESSION, seq, msgs), dst_port=1234))
        seq += k
        total += k
    return frames, total


def classification_rules(rng: random.Random, n: int) -> list[tuple[str, int, int]]:
    return [(rng.choice(SYMBOLS), rng.randint(1, 999), rng.randint(1, HOSTS)) for _ in range(n)]


def rules_text(rules: list[tuple[str, int, int]]) -> str:
    return "\n".join(f'stock == "{s}" and price > {p} : fwd({h})' for s, p, h in rules)


# Rates are per core: CPU time of this (single-threaded) process, so that other work on a
# shared machine does not show up as a slower switch.
clock = time.process_time


def timed(fn, min_seconds: float) -> tuple[int, float]:
    """Call fn() until min_seconds of CPU time have passed; (calls, seconds)."""
    calls, start = 0, clock()
    while True:
        fn()
        calls += 1
        elapsed = clock() - start
        if elapsed >= min_seconds:
            return calls, elapsed


def classifier(rules, buf: bytes, lengths: bytes, n_messages: int):
    """A compiled native data plane for `rules`, its classify call, and facts to print."""
    started = time.perf_counter()
    c = compile_text(SPEC, rules_text(rules), name="itch")
    compile_s = time.perf_counter() - started
    dp = load(c.pipeline, c.entries, impl="native")
    codes, _ = dp.classify_packed(buf, lengths, 0)
    selected = sum(1 for (v,) in struct.iter_unpack("<Q", codes) if v)
    return (lambda: dp.classify_packed(buf, lengths, 0)), {
        "compile_s": compile_s, "entries": c.stats["entries"]["total"], "groups": c.stats["multicast_groups"],
        "selected": selected / n_messages}


def interleaved(calls: dict, per_call: int, seconds: float, rounds: int = 7) -> dict:
    """Median rate of each call, timed in alternating rounds so that load on a shared machine
    falls on all of them alike (the ratio between them is the figure that matters)."""
    rates: dict = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            n, elapsed = timed(fn, seconds / rounds)
            rates[name].append(n * per_call / elapsed)
    return {name: sorted(r)[len(r) // 2] for name, r in rates.items()}


def naive_rate(rules, frames: list[bytes], sample: int) -> float:
    """Every rule checked against every message: the cost without a compiled decision structure."""
    keyed = [(s.encode().ljust(8), p, h) for s, p, h in rules]
    msgs = []
    for f in frames:
        pos = 14 + 20 + 8 + 20
        while pos + 2 <= len(f) and len(msgs) < sample:
            n, = struct.unpack_from("!H", f, pos)
            msgs.append(f[pos + 2: pos + 2 + n])
            pos += 2 + n
    started = clock()
    for m in msgs:
        stock, price = m[24:32], int.from_bytes(m[32:36], "big")
        {h for s, p, h in keyed if s == stock and price > p}
    return len(msgs) / (clock() - started)


def figure_classification(args, rng: random.Random) -> None:
    frames, n_messages = packets(rng, args.packets, (args.per_packet, args.per_packet))
    buf, lengths = pack(frames)
    rules = classification_rules(rng, args.rules)
    big_fn, info = classifier(rules, buf, lengths, n_messages)
    small_fn, _ = classifier(rules[:10], buf, lengths, n_messages)
    rates = interleaved({"big": big_fn, "small": small_fn}, n_messages, 2 * args.seconds)
    big, small = rates["big"], rates["small"]
    naive = naive_rate(rules, frames, args.naive_sample)
    print(f"classification ({args.rules} rules -> {info['entries']} entries, {info['groups']} groups, "
          f"compiled in {info['compile_s']:.1f} s; {n_messages} Add Orders in {len(frames)} MoldUDP64 packets "
          f"of {args.per_packet}, replayed; {info['selected']:.0%} of messages select a port)")
    label = f"{args.rules} rules"
    print(f"  native classify, {label:>12} : {big / 1e6:8.2f} M messages/s per core"
          f"   = {big / small:.2f} x the 10-rule figure")
    print(f"  native classify, {'10 rules':>12} : {small / 1e6:8.2f} M messages/s per core")
    print(f"  naive, every rule per message (Python, {args.naive_sample}-message sample): {naive:,.0f} messages/s"
          f"   native is {big / naive:,.0f}x faster")


def figure_forwarding(args, rng: random.Random) -> None:
    lines = []
    for h in range(1, HOSTS + 1):
        for s in rng.sample(SYMBOLS, 5):
            lines.append(f'stock == "{s}"' + (f" and price > {rng.randint(1, 999)}" if rng.random() < 0.5 else "")
                         + f" : fwd({h})")
    c = compile_text(SPEC, "\n".join(lines), name="itch")
    frames, n_messages = packets(rng, args.packets, (1, 12))
    buf, lengths = pack(frames)
    native = load(c.pipeline, c.entries, impl="native")
    _, records = native.process_packed(buf, lengths, 0)
    out_packets = len(records) // 16
    calls, elapsed = timed(lambda: native.process_packed(buf, lengths, 0), args.seconds)
    msg_rate, pkt_rate = calls * n_messages / elapsed, calls * len(frames) / elapsed

    reference = load(c.pipeline, c.entries, impl="python")
    sample = frames[: args.reference_sample]
    sample_msgs = sum(struct.unpack_from("!H", f, 14 + 20 + 8 + 18)[0] for f in sample)
    started = clock()
    for f in sample:
        reference.process(f, 0)
    ref_rate = sample_msgs / (clock() - started)
    print(f"forwarding ({len(lines)} rules: {HOSTS} hosts x 5 symbols, half with a price bound; "
          f"{n_messages} messages in {len(frames)} packets of 1-12; {out_packets / len(frames):.1f} copies per packet)")
    print(f"  native      : {msg_rate / 1e6:6.2f} M input messages/s, {pkt_rate / 1e6:6.3f} M input packets/s, "
          f"{pkt_rate * out_packets / len(frames) / 1e6:6.2f} M output packets/s per core")
    print(f"  reference   : {ref_rate / 1e6:6.3f} M input messages/s ({len(sample)}-packet sample)"
          f"   native is {msg_rate / ref_rate:,.0f}x the pure-Python reference")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--packets", type=int, default=8192, help="packets in each replayed stream")
    ap.add_argument("--per-packet", type=int, default=30, help="Add Orders per packet (classification)")
    ap.add_argument("--seconds", type=float, default=3.0, help="minimum timing per native figure")
    ap.add_argument("--naive-sample", type=int, default=200)
    ap.add_argument("--reference-sample", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--quick", action="store_true", help="small smoke run (1,000 rules, short timings)")
    args = ap.parse_args(argv)
    if args.quick:
        args.rules, args.packets, args.seconds, args.naive_sample, args.reference_sample = 1000, 512, 0.2, 50, 200
    figure_classification(args, random.Random(args.seed))
    figure_forwarding(args, random.Random(args.seed + 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
