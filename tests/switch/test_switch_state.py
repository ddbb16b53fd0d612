"""Stateful rules on the switch (IR 4): both data planes run the state stages exactly as
`compiler.semantics.Evaluator` defines them (docs/stateful.md), and agree with each other
copy for copy, counter for counter and register cell for register cell.

Rules are compiled by `compiler.compile`; what each message must select is worked out from
the Evaluator alone, packet by packet in order (each message of a MoldUDP64 packet its own
packet, at the frame's time or at its declared time field), and compared with the messages
each copy carries. Frames come with timestamps that cross window edges, repeat and go
backwards; some are cut short (dropped whole: no message touches state), some messages are
not subscription messages (other types, too short).
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules
from compiler.errors import CamusError
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Packet
from compiler.spec import parse_spec
from pipeline.model import EntryError
from switch.dataplane import IMPLEMENTATIONS, load
from switch.packet import read_mold, read_udp, udp_frame
from switch_helpers import ITCH_FIELDS, SESSION, itch_frame, itch_values

ROOT = Path(__file__).resolve().parents[2]
ITCH = (ROOT / "p4" / "itch" / "itch.p4").read_text()

# Windows of tens of µs, so that a few frames cross them; slots enough for any rule set here.
ITCH_STATE = """
@pragma query_counter(c, 100, 4096)
@pragma query_counter(ck, 50, 4096, itch_order.stock_locate, 4)
@pragma query_average(itch_order.price, 200, 4096)
@pragma query_meter(mp, packets, 100, 4096, itch_order.stock_locate, 2)
@pragma query_meter(mb, bytes, 100, 4096)
"""
TIME_FIELD = "@pragma query_timestamp(itch_order.timestamp, ns)\n"


def itch_spec(timed: bool, banks: int):
    return parse_spec(ITCH + ITCH_STATE + (TIME_FIELD if timed else "")
                      + f"@pragma query_banks({banks})\n", name="itch")


SPECS = {(timed, banks): itch_spec(timed, banks) for timed in (False, True) for banks in (2, 4)}

SYMBOLS = ["GOOGL", "AAPL", "MSFT"]
PRICES = [0, 1, 49, 50, 51, 100, 4294967295]
OPS = ["==", "!=", "<", "<=", ">", ">="]
# State predicates with constants around what a few packets make of them: a packet per
# 100 µs is 10,000/s, a 36-byte message per 100 µs 360,000 bytes/s.
STATE_ATOMS = {
    "c": [0, 1, 2, 3, 5], "ck": [0, 1, 2, 3],
    "avg(price)": [0, 1, 49, 50, 51, 100, 4294967295],
    "rate(mp)": [0, 9999, 10000, 20000, 30001],
    "rate(mb)": [0, 359999, 360000, 400000, 720000, 1080001],
}
UPDATES = ["count(c)", "count(ck)", "avg(price)", "meter(mp)", "meter(mb)"]

field_atoms = st.one_of(
    st.builds(lambda op, s: f'stock {op} "{s}"', st.sampled_from(["==", "!="]), st.sampled_from(SYMBOLS)),
    st.builds(lambda op, n: f"price {op} {n}", st.sampled_from(OPS), st.sampled_from(PRICES)),
    st.builds(lambda op, n: f"shares {op} {n}", st.sampled_from(OPS), st.sampled_from([0, 100, 101])),
)
state_atoms = st.sampled_from(sorted(STATE_ATOMS)).flatmap(
    lambda name: st.builds(lambda op, x: f"{name} {op} {x}", st.sampled_from(OPS),
                           st.sampled_from(STATE_ATOMS[name])))
atoms = st.one_of(field_atoms, state_atoms, state_atoms)
filters = st.recursive(
    atoms,
    lambda sub: st.one_of(
        st.builds(lambda a, b: f"({a} and {b})", sub, sub),
        st.builds(lambda a, b: f"({a} or {b})", sub, sub),
        st.builds(lambda a: f"not {a}", sub),
    ),
    max_leaves=3,
)


@st.composite
def rule_lines(draw):
    ports = draw(st.sets(st.integers(1, 5), max_size=2))
    updates = draw(st.lists(st.sampled_from(UPDATES), unique=True, max_size=2))
    if not ports and not updates:
        ports = {1}
    actions = ([f"fwd({', '.join(map(str, sorted(ports)))})"] if ports else []) + updates
    return f"{draw(filters)} : {', '.join(actions)}"


rule_sets = st.lists(rule_lines(), min_size=1, max_size=4)


def order(stock: str, price: int, locate: int = 0, ts_ns: int = 0, mtype: bytes = b"A",
          shares: int = 100) -> bytes:
    """An ITCH Add Order ('F' carries 4 more bytes, so a bytes meter sees 40)."""
    msg = (mtype + struct.pack("!HH", locate, 0) + ts_ns.to_bytes(6, "big") + struct.pack("!Q", 1)
           + b"B" + struct.pack("!I", shares) + stock.encode().ljust(8) + struct.pack("!I", price))
    return msg + b"MPID" if mtype == b"F" else msg


# Declared-time messages carry ns timestamps around the same windows as the frames' µs.
messages = st.one_of(
    st.builds(order, st.sampled_from(SYMBOLS), st.sampled_from(PRICES), st.integers(0, 3),
              st.sampled_from([0, 49_999, 50_000, 99_999, 100_000, 250_000, 10 ** 12]),
              st.sampled_from([b"A", b"A", b"F"]), st.sampled_from([0, 100, 101])),
    st.just(b"D" + bytes(18)),  # Order Delete: never a subscription message
    st.builds(lambda m: m[:30], st.builds(order, st.sampled_from(SYMBOLS), st.just(60))),  # short 'A'
)
# Frame times: steps that stay in a window, reach its edge or jump past it, and go back.
steps = st.sampled_from([0, 1, 49, 50, 51, 99, 100, 101, 250, -60, -400, 10 ** 9])


@st.composite
def timed_frames(draw, max_frames: int = 8):
    out, ts = [], draw(st.sampled_from([0, 99, 1000]))
    for _ in range(draw(st.integers(1, max_frames))):
        ts = max(0, ts + draw(steps))
        msgs = draw(st.lists(messages, max_size=4))
        seq = draw(st.integers(0, 2 ** 64 - 1))
        frame = itch_frame(msgs, seq=seq)
        cut = draw(st.one_of(st.none(), st.none(), st.none(), st.integers(0, len(frame) - 1)))
        out.append((ts, msgs, seq, frame if cut is None else frame[:cut]))
    return out


def compiled(spec, lines: list[str]):
    """The rule set and its compiled tables; hypothesis looks elsewhere when the compiler
    refuses it (more rules in one scope than banks, too many region combinations)."""
    rules = parse_rules("\n".join(lines), spec)
    try:
        c = compile_rules(spec, rules)
    except CamusError as exc:
        assume(False, f"refused: {exc}")
        raise
    return rules, c


def evaluator_ports(ev: Evaluator, spec, msgs: list[bytes], ts: int) -> list[set[int]]:
    """Each message's port set: subscription messages through the Evaluator, in order."""
    out = []
    for m in msgs:
        if len(m) < 36 or m[:1] not in (b"A", b"F"):
            out.append(set())
            continue
        out.append(ev.packet(Packet(ts, itch_values(m), len(m))))
    return out


def copied_ports(copies, seq: int, n: int) -> list[set[int]]:
    """Which ports each of the frame's n messages went to, read from the copies."""
    out: list[set[int]] = [set() for _ in range(n)]
    for port, frame in copies:
        v = read_udp(frame)
        assert v.ip_checksum_ok and v.udp_checksum == 0
        session, first, blocks = read_mold(v.payload)
        assert session == SESSION
        for k, block in enumerate(blocks):
            if block:
                out[(first - seq + k) % 2 ** 64].add(port)
    return out


def cells(dp, pipeline) -> dict[str, list]:
    """Every register cell of the pipeline: what the two data planes must agree on."""
    return {r: dp.read_cells(r) for app in pipeline.applications if app.state
            for var in app.state.vars for r in var.registers}


def run_both(c, rules, spec, frames):
    """Every frame through both data planes and the Evaluator; they must agree throughout."""
    planes = {impl: load(c.pipeline, c.entries, impl=impl) for impl in IMPLEMENTATIONS}
    ev = Evaluator(rules)
    for ts, msgs, seq, frame in frames:
        outs = {impl: dp.process(frame, 0, ts) for impl, dp in planes.items()}
        assert outs["native"] == outs["python"]
        if len(frame) < len(itch_frame(msgs, seq=seq)):
            assert outs["native"] == []  # cut short: dropped, no message seen
            continue
        assert copied_ports(outs["native"], seq, len(msgs)) == evaluator_ports(ev, spec, msgs, ts)
    assert planes["native"].counters() == planes["python"].counters()
    assert cells(planes["native"], c.pipeline) == cells(planes["python"], c.pipeline)
    return planes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])
@given(lines=rule_sets, frames=timed_frames(), timed=st.booleans(), banks=st.sampled_from([2, 4]))
def test_stateful_rules_select_what_the_evaluator_selects(lines, frames, timed, banks):
    spec = SPECS[timed, banks]
    rules, c = compiled(spec, lines)
    run_both(c, rules, spec, frames)
