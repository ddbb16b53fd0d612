"""The Python reference switch running stateful rules (docs/pipeline-ir.md, "State") on real
frames: MoldUDP64 packets of several ITCH messages, each message a packet of its own for
state, in order, against the reference evaluator message by message. The spec is the ITCH
spec with the paper's Fig. 4 counter and the slides' average."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Packet
from compiler.spec import parse_spec
from switch.dataplane import load
from switch.packet import read_mold, read_udp

from switch_helpers import itch_frame, itch_values

ROOT = Path(__file__).resolve().parents[2]
ITCH = (ROOT / "p4" / "itch" / "itch.p4").read_text()
STATE = """
@pragma query_counter(my_counter, 100, 1024)
@pragma query_average(itch_order.price, 1000, 64, itch_order.stock_locate, 4)
@pragma query_meter(orders, bytes, 500, 64)
"""
STOCKS = ["GOOGL", "MSFT", "AAPL"]
RULES = [
    'stock == "GOOGL" and avg(price) > 50 : fwd(1)',  # the slides' rule
    "my_counter > 3 : fwd(2)",
    'stock == "MSFT" and my_counter < 2 : fwd(3), count(my_counter)',
    "price < 40 or rate(orders) >= 100000 : fwd(4)",
    'stock != "AAPL" and not (avg(price) <= 20) : fwd(5)',
    "shares > 500 : fwd(6)",
    "rate(orders) < 72000 and price > 60 : fwd(2), meter(orders)",
]


def message(stock: str, price: int, shares: int, locate: int, ts_ns: int) -> bytes:
    """An ITCH Add Order with its fields and timestamp (ns, 48 bits)."""
    return (b"A" + struct.pack("!HH", locate, 0) + ts_ns.to_bytes(6, "big")
            + struct.pack("!Q", 1) + b"B" + struct.pack("!I", shares)
            + stock.encode().ljust(8) + struct.pack("!I", price))


def delivered(out, n: int) -> dict[int, list[int]]:
    """port -> indexes of the messages its copy holds (zero-length blocks are pruned ones)."""
    got = {}
    for port, frame in out:
        _, seq, blocks = read_mold(read_udp(frame).payload)
        got[port] = [seq - 100 + i for i, b in enumerate(blocks) if b]
    return got


def run_frames(spec_text: str, rules_text: list[str], frames, timed: bool):
    spec = parse_spec(spec_text, name="itch")
    rules = parse_rules("\n".join(rules_text), spec)
    c = compile_rules(spec, rules)
    dp = load(c.pipeline, c.entries, impl="python")
    ev = Evaluator(rules)
    for ts_us, msgs in frames:
        want: dict[int, list[int]] = {}
        for i, m in enumerate(msgs):
            for p in ev.packet(Packet(0 if timed else ts_us, itch_values(m), len(m))):
                want.setdefault(p, []).append(i)
        got = delivered(dp.process(itch_frame(msgs), 0, None if timed else ts_us), len(msgs))
        yield want, got


def random_frames(rng: random.Random, n: int):
    ts, frames = rng.randint(0, 2000), []
    for _ in range(n):
        ts = max(0, ts + rng.choice([0, 3, 40, 99, 100, 250, 1000, -120]))
        msgs = [message(rng.choice(STOCKS), rng.choice([10, 30, 50, 51, 70, 200]),
                        rng.choice([100, 600]), rng.randint(0, 7),
                        max(0, ts * 1000 + rng.randint(-300_000, 300_000)))
                for _ in range(rng.randint(1, 4))]
        frames.append((ts, msgs))
    return frames


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), timed=st.booleans())
def test_reference_switch_equals_evaluator(seed, timed):
    # timed: the messages' own ITCH timestamps (ns) are their time (query_timestamp); else
    # the frame's time, given to the switch as a pcap's record time would be
    rng = random.Random(seed)
    spec = ITCH + STATE + ("@pragma query_timestamp(itch_order.timestamp, ns)\n" if timed else "")
    rules = rng.sample(RULES, rng.randint(1, len(RULES)))
    for want, got in run_frames(spec, rules, random_frames(rng, 25), timed):
        assert got == want


def test_fig4_counter_and_the_slides_average():
    # Fig. 4's counter (100 µs windows) and the slides' `avg(price) > 50`, by hand
    spec = ITCH + STATE
    frames = [(0, [message("GOOGL", 40, 1, 0, 0)]),            # avg 40
              (10, [message("GOOGL", 70, 1, 0, 0)]),           # avg 55 > 50: port 1
              (20, [message("GOOGL", 30, 1, 0, 0),             # avg 46.6
                    message("GOOGL", 80, 1, 0, 0)]),           # avg 55: port 1, and the
              (1000, [message("GOOGL", 50, 1, 0, 0)])]         # 4th of the window: port 2
    results = list(run_frames(spec, [RULES[0], RULES[1]], frames, False))
    assert [got for _, got in results] == [{}, {1: [0]}, {1: [1], 2: [1]}, {}]
    assert all(want == got for want, got in results)
    # my_counter > 3 fires from the 4th message of a 100 µs window, messages of one frame
    # counted in order
    frames = [(0, [message("MSFT", 1, 1, 0, 0)] * 5), (99, [message("MSFT", 1, 1, 0, 0)]),
              (100, [message("MSFT", 1, 1, 0, 0)] * 4)]
    results = list(run_frames(spec, [RULES[1]], frames, False))
    assert [got for _, got in results] == [{2: [3, 4]}, {2: [0]}, {2: [3]}]


def test_registers_hold_the_documented_cells():
    spec = parse_spec(ITCH + STATE, name="itch")
    rules = parse_rules("my_counter > 3 : fwd(2)", spec)
    c = compile_rules(spec, rules)
    dp = load(c.pipeline, c.entries, impl="python")
    dp.process(itch_frame([message("MSFT", 1, 1, 0, 0)] * 3), 0, 250)
    inst, = c.entries["state_instances"]
    register = f"itch_my_counter_r{inst['bank']}"
    assert dp.read_cell(register, inst["base"]) == 2 << 32 | 3  # window 2, n = 3
    dp.reset_cells((register, inst["base"], 1))
    assert dp.read_cell(register, inst["base"]) == 0


def test_camus_switch_run_times_frames_by_their_pcap_records(tmp_path):
    # a pcap's record times are the frames' times: the counter's windows follow them
    import os
    import subprocess
    import sys

    from compiler.compile import write_outputs
    from switch.pcap import Record, read_pcap, write_pcap

    spec = parse_spec(ITCH + STATE, name="itch")
    rules = parse_rules("my_counter > 1 : fwd(2)", spec)
    write_outputs(compile_rules(spec, rules), tmp_path / "out")
    times = [(0, 10), (0, 50), (0, 99), (0, 100), (0, 150), (1, 0), (1, 30)]  # (s, µs)
    frames = [Record(s, us, itch_frame([message("MSFT", 1, 1, 0, 0)], seq=100 + i))
              for i, (s, us) in enumerate(times)]
    write_pcap(str(tmp_path / "in.pcap"), frames)
    r = subprocess.run([sys.executable, "-m", "camus", "switch", "run", "--pipeline",
                        str(tmp_path / "out"), "--pcap-in", str(tmp_path / "in.pcap"),
                        "--out-dir", str(tmp_path / "pcaps"), "--impl", "python"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    ev = Evaluator(rules)
    want = [i for i, (s, us) in enumerate(times)
            if ev.packet(Packet(s * 1_000_000 + us, itch_values(message("MSFT", 1, 1, 0, 0))))]
    got = [read_mold(read_udp(rec.data).payload)[1] - 100
           for rec in read_pcap(str(tmp_path / "pcaps" / "port-2.pcap"))]
    assert got == want == [1, 2, 4, 6]
