"""Random ITCH subscriptions and packets, and the brute-force expectation for a network.

The expectation is computed from the subscriptions alone (`compiler.semantics.holds`), never
from filter sets or compiled tables: host h must receive, for a packet a publisher sent, one
copy holding exactly the Add Orders that one of h's subscriptions matches (each at its
MoldUDP64 sequence number), and nothing if none matches or if h sent it.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import strategies as st

from compiler.semantics import holds
from compiler.spec import load_spec
from switch.packet import read_mold, read_udp
from tests.switch.switch_helpers import add_order, itch_frame, itch_values

ROOT = Path(__file__).resolve().parents[2]
ITCH = load_spec(ROOT / "p4" / "itch" / "itch.p4")
STOCKS = ("GOOGL", "MSFT", "AAPL", "IBM")
PRICES = (0, 1, 99, 100, 101, 250, 999, 1000, 1001, 4999, 5000)


def atom(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.35:
        return f'stock {rng.choice(("==", "!="))} "{rng.choice(STOCKS)}"'
    if r < 0.8:
        return f"price {rng.choice(('<', '<=', '>', '>=', '==', '!='))} {rng.choice(PRICES)}"
    if r < 0.9:
        return f"shares {rng.choice(('<', '>='))} {rng.choice((10, 100, 500))}"
    return f'buy_sell_indicator == "{rng.choice("BS")}"'


def filter_text(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth < 2 and r < 0.3:
        op = rng.choice((" and ", " or "))
        return "(" + op.join(filter_text(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"
    if depth < 2 and r < 0.38:
        return "not " + filter_text(rng, depth + 1)
    return atom(rng)


def subscriptions_text(rng: random.Random, hosts: list[str], n: int) -> str:
    return "".join(f"{rng.choice(hosts)}: {filter_text(rng)}\n" for _ in range(n))


def message(rng: random.Random) -> bytes:
    price = rng.choice(PRICES) + rng.choice((-1, 0, 1, 7))
    return add_order(rng.choice(STOCKS), max(price, 0), rng.choice((9, 10, 100, 500, 600)),
                     ref=rng.randint(1, 1 << 30), side=rng.choice((b"B", b"S")),
                     mtype=rng.choice((b"A", b"A", b"A", b"F")))


def packet(rng: random.Random, seq: int) -> tuple[bytes, list[bytes]]:
    msgs = [message(rng) for _ in range(rng.randint(1, 4))]
    return itch_frame(msgs, seq=seq), msgs


def kept(frame: bytes) -> list[tuple[int, bytes]]:
    """(sequence number, message) of every message a copy holds (zero-length gaps skipped)."""
    _, seq, blocks = read_mold(read_udp(frame).payload)
    return [(seq + i, b) for i, b in enumerate(blocks) if b]


def expected(filters_of: dict, sender: str, seq: int, msgs: list[bytes],
             reachable=lambda a, b: True) -> dict[str, list[list[tuple[int, bytes]]]]:
    """Per host, the copies it must receive (a list of one copy, or nothing)."""
    out = {}
    for h, filters in filters_of.items():
        if h == sender or not reachable(sender, h):
            continue
        want = [(seq + i, m) for i, m in enumerate(msgs)
                if any(holds(f, itch_values(m)) for f in filters)]
        if want:
            out[h] = [want]
    return out


def received(deliveries) -> dict[str, list[list[tuple[int, bytes]]]]:
    out: dict[str, list] = {}
    for h, frame in deliveries:
        out.setdefault(h, []).append(kept(frame))
    return out


seeds = st.integers(min_value=0, max_value=2**32 - 1)
