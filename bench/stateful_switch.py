"""Software switch with 10,000 stateful rules against the same rules without state (issue 25).

One run, one stream, two compiled rule sets:

* stateful: 10,000 rules `stock == S and price > P and STATE : fwd(H)`, STATE one of a
  window counter (`cnt > K`), a windowed average (`avg(price) > X`) and a rate meter
  (`rate(orders) >= R`), in turn; four rules per symbol (2,500 symbols), so a message is in
  the scope of up to four rules, each bound in its own bank;
* stateless: the same 10,000 rules with the state predicate taken out.

Both compile with the field order stock, price (see FIELD_ORDER).

The stream is ITCH Add Orders (symbols Zipf(1) over the 2,500, prices uniform 1..1000) in
MoldUDP64 packets of 30, one packet every 5 µs of stream time (windows of 1 ms, so counters,
averages and meters cross their thresholds and windows end while the stream runs). Both
pipelines run in the native data plane, single-threaded, timed in alternating rounds; the
figure is the ratio of their message rates, for the table walk with the state stages
(`classify_packed`: parse, walk, state, decision) and for full forwarding (`process_packed`:
copies, pruning, egress). The goal (issue 25) is a ratio of at least 0.5.

Run: `python bench/stateful_switch.py` (`--quick` for a smoke run with 1,000 rules).
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Measure this checkout's switch and compiler (bench/ is first on the path when run as a
# script; an installed camus could be another worktree's).
sys.path.insert(0, str(ROOT))

from bench.switch_itch import add_order, interleaved  # noqa: E402
from compiler.compile import compile_text  # noqa: E402
from switch.dataplane import load  # noqa: E402
from switch.native_dataplane import pack, pack_times  # noqa: E402
from switch.packet import mold_payload, udp_frame  # noqa: E402

SPEC = (ROOT / "p4" / "itch" / "itch.p4").read_text() + """
@pragma query_counter(cnt, 1000, 16384)
@pragma query_average(itch_order.price, 1000, 16384)
@pragma query_meter(orders, packets, 1000, 16384)
"""
HOSTS = 200
RULES_PER_SYMBOL = 4
SESSION = b"BENCH00001"
PACKET_GAP_US = 5
# Both rule sets walk stock, then price. Left to its heuristic, the compiler puts price first
# for both, and the stateful set's stock stage then holds about two million entries (a state
# per price interval and symbol set, each split by the contexts' pseudo-rules): the figure
# would measure that table's cache misses, not the state stages.
FIELD_ORDER = ["itch_order.stock", "itch_order.price"]

def rule_sets(rng: random.Random, n: int) -> tuple[list[str], list[str], list[str]]:
    """(stateful rules, the same without state, symbols)."""
    symbols = [f"S{i:05d}" for i in range((n + RULES_PER_SYMBOL - 1) // RULES_PER_SYMBOL)]
    stateful, stateless = [], []
    for i in range(n):
        head = f'stock == "{symbols[i // RULES_PER_SYMBOL]}" and price > {rng.randint(1, 999)}'
        state = (f"cnt > {rng.randint(1, 6)}", f"avg(price) > {rng.randint(200, 800)}",
                 f"rate(orders) >= {rng.randint(1, 6) * 1000}")[i % 3]
        port = rng.randint(1, HOSTS)
        stateful.append(f"{head} and {state} : fwd({port})")
        stateless.append(f"{head} : fwd({port})")
    return stateful, stateless, symbols


def stream(rng: random.Random, symbols: list[str], n_packets: int, per_packet: int):
    """MoldUDP64 frames, their times (µs) and the message count."""
    weights = [1 / (k + 1) for k in range(len(symbols))]
    frames, times, seq = [], [], 1
    for k in range(n_packets):
        msgs = [add_order(s, rng.randint(1, 1000), seq + i)
                for i, s in enumerate(rng.choices(symbols, weights=weights, k=per_packet))]
        frames.append(udp_frame(mold_payload(SESSION, seq, msgs), dst_port=1234))
        times.append(k * PACKET_GAP_US)
        seq += per_packet
    return frames, times, n_packets * per_packet


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", type=int, default=10_000)
    ap.add_argument("--packets", type=int, default=4096, help="packets in the replayed stream")
    ap.add_argument("--per-packet", type=int, default=30, help="Add Orders per packet")
    ap.add_argument("--seconds", type=float, default=6.0, help="CPU seconds per figure, all rounds")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1,000 rules, short timings")
    args = ap.parse_args(argv)
    if args.quick:
        args.rules, args.packets, args.seconds = 1000, 512, 0.5
    rng = random.Random(args.seed)
    stateful_rules, stateless_rules, symbols = rule_sets(rng, args.rules)
    frames, times, n_messages = stream(rng, symbols, args.packets, args.per_packet)
    buf, lengths = pack(frames)
    ts = pack_times(times)

    planes, facts = {}, {}
    for name, rules in (("stateful", stateful_rules), ("stateless", stateless_rules)):
        started = time.perf_counter()
        c = compile_text(SPEC, "\n".join(rules), FIELD_ORDER, name="itch")
        compile_s = time.perf_counter() - started
        dp = load(c.pipeline, c.entries, impl="native")
        codes, _ = dp.classify_packed(buf, lengths, 0, ts)
        selected = sum(1 for (v,) in struct.iter_unpack("<Q", codes) if v) / n_messages
        _, records = dp.process_packed(buf, lengths, 0, ts)
        planes[name] = dp
        facts[name] = (compile_s, c.stats["entries"]["total"], selected, len(records) // 16)

    print(f"{args.rules} rules, {len(symbols)} symbols x {RULES_PER_SYMBOL}; {n_messages} Add Orders in "
          f"{len(frames)} MoldUDP64 packets of {args.per_packet}, one per {PACKET_GAP_US} µs, replayed")
    for name, (compile_s, entries, selected, copies) in facts.items():
        print(f"  {name:>9}: {entries} entries, compiled in {compile_s:.1f} s; {selected:.1%} of messages "
              f"select a port; {copies / len(frames):.1f} copies per packet")
    for label, method in (("walk + state (classify_packed)", "classify_packed"),
                          ("forwarding (process_packed)", "process_packed")):
        calls = {name: (lambda dp=dp, m=method: getattr(dp, m)(buf, lengths, 0, ts))
                 for name, dp in planes.items()}
        rates = interleaved(calls, n_messages, args.seconds)
        print(f"{label}:")
        print(f"  stateless : {rates['stateless'] / 1e6:7.2f} M messages/s per core")
        print(f"  stateful  : {rates['stateful'] / 1e6:7.2f} M messages/s per core"
              f"   = {rates['stateful'] / rates['stateless']:.2f} x the stateless rate (goal >= 0.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
