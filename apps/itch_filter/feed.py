"""A synthetic trading day in ITCH 5.0, and its packing into MoldUDP64 packets.

`synthetic_day(n, seed)` yields exactly `n` messages: the start-of-messages system event, one
stock directory (`R`) message per symbol (stock locate = rank), start of system and market
hours, then order flow, then the closing system events. Symbols are drawn Zipf(s) by rank, so
a few names (the first of `SYMBOLS`) carry most of the traffic, as on a real day. Order flow
keeps a book of live orders so that executions, cancels, deletes and replaces refer to orders
that exist, with this mix (fractions of order-flow messages, roughly a NASDAQ day's shape:
adds and deletes dominate, executions are a few percent):

  A add 0.38, F add with MPID 0.04, D delete 0.30, U replace 0.12, E executed 0.08,
  X cancel 0.05, P trade 0.03.

Prices are Price(4) integers (dollars * 10^4), a random walk per symbol around a base price
on a one-cent grid. The same seed always gives the same bytes.

`packets(messages, seed)` groups messages 1..12 per packet (uniform) and numbers them from
sequence 1, as `(first_sequence, [message, ...])`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator

from apps.itch_filter import messages as itch

# Rank order = Zipf order. Base prices in dollars (illustrative, not quotes).
SYMBOLS: tuple[tuple[str, float], ...] = (
    ("AAPL", 190.0), ("MSFT", 420.0), ("NVDA", 120.0), ("AMZN", 180.0), ("GOOGL", 170.0),
    ("META", 500.0), ("TSLA", 250.0), ("AMD", 160.0), ("NFLX", 620.0), ("INTC", 31.0),
    ("QQQ", 480.0), ("AVGO", 1400.0), ("COST", 850.0), ("PEP", 170.0), ("CSCO", 48.0),
    ("ADBE", 510.0), ("TXN", 195.0), ("QCOM", 170.0), ("INTU", 630.0), ("AMAT", 200.0),
    ("SBUX", 78.0), ("MU", 110.0), ("PYPL", 62.0), ("ISRG", 400.0), ("BKNG", 3700.0),
    ("GILD", 70.0), ("MDLZ", 68.0), ("ADP", 250.0), ("REGN", 1000.0), ("VRTX", 470.0),
)
ORDER_FLOW_MIX = (("A", 0.38), ("F", 0.04), ("D", 0.30), ("U", 0.12), ("E", 0.08),
                  ("X", 0.05), ("P", 0.03))
MPIDS = ("GSCO", "MSCO", "JPMS", "UBSS", "CDRG", "VIRT")
MARKET_OPEN_NS = (9 * 3600 + 30 * 60) * 10**9
OPENING_EVENTS = ("O", "S", "Q")  # start of messages, of system hours, of market hours
CLOSING_EVENTS = ("M", "E", "C")  # end of market hours, of system hours, of messages
MIN_PER_PACKET, MAX_PER_PACKET = 1, 12


def zipf_weights(n: int, s: float = 1.0) -> list[float]:
    return [1.0 / (rank ** s) for rank in range(1, n + 1)]


def price4(dollars: float) -> int:
    """Price(4) on a one-cent grid."""
    return max(100, round(dollars * 100) * 100)


def synthetic_day(n: int, seed: int = 1, symbols: Iterable[tuple[str, float]] = SYMBOLS,
                  zipf_s: float = 1.0) -> list[bytes]:
    """Exactly `n` ITCH messages of one day (n must cover the opening and closing events and
    one `R` per symbol)."""
    syms = list(symbols)
    fixed = len(OPENING_EVENTS) + len(syms) + len(CLOSING_EVENTS)
    if n < fixed:
        raise ValueError(f"a day with {len(syms)} symbols needs at least {fixed} messages")
    rng = random.Random(seed)
    clock = _Clock(rng)
    out = [itch.encode("S", timestamp=clock.tick(), event_code="O")]
    for locate, (stock, _) in enumerate(syms, start=1):
        out.append(itch.encode(
            "R", stock_locate=locate, timestamp=clock.tick(), stock=stock, market_category="Q",
            financial_status_indicator="N", round_lot_size=100, round_lots_only="N",
            issue_classification="C", issue_sub_type="Z", authenticity="P",
            short_sale_threshold_indicator="N", ipo_flag="N", luld_ref="1", etp_flag="N",
            etp_leverage_factor=0, inverse_indicator="N"))
    for code in OPENING_EVENTS[1:]:
        out.append(itch.encode("S", timestamp=clock.tick(), event_code=code))
    out.extend(itertools.islice(_order_flow(rng, clock, syms, zipf_s), n - fixed))
    for code in CLOSING_EVENTS:
        out.append(itch.encode("S", timestamp=clock.tick(), event_code=code))
    return out


class _Clock:
    """Timestamps in ns past midnight: the market opens at 9:30, events ~20 us apart."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.now = MARKET_OPEN_NS - 10**9

    def tick(self) -> int:
        self.now += 1 + int(self.rng.expovariate(1 / 20_000))
        return self.now


def _order_flow(rng: random.Random, clock: _Clock, syms: list[tuple[str, float]],
                zipf_s: float) -> Iterator[bytes]:
    weights = zipf_weights(len(syms), zipf_s)
    mid = [price4(p) for _, p in syms]
    book: dict[int, list] = {}  # order ref -> [locate, side, shares, price]
    live: list[int] = []  # refs in `book`, for uniform picks (swap-remove keeps it O(1))
    where: dict[int, int] = {}  # ref -> its index in `live`
    refs = itertools.count(1)
    matches = itertools.count(1)
    kinds = [k for k, _ in ORDER_FLOW_MIX]
    mix = [w for _, w in ORDER_FLOW_MIX]

    def remember(ref: int, order: list) -> None:
        book[ref] = order
        where[ref] = len(live)
        live.append(ref)

    def forget(ref: int) -> None:
        i, last = where.pop(ref), live.pop()
        if last != ref:
            live[i] = last
            where[last] = i
        del book[ref]

    while True:
        kind = rng.choices(kinds, mix)[0]
        if kind not in ("A", "F") and not live:
            kind = "A"
        ts = clock.tick()
        if kind in ("A", "F", "P"):
            i = rng.choices(range(len(syms)), weights)[0]
            mid[i] = max(100, mid[i] + 100 * rng.choice((-1, 0, 0, 1)))
            side = rng.choice("BS")
            price = max(100, mid[i] + 100 * rng.randint(-20, 20) * (1 if side == "S" else -1))
            shares = 100 * rng.choice((1, 1, 1, 2, 3, 5, 10)) if rng.random() < 0.9 else rng.randint(1, 99)
            if kind == "P":
                # Non-displayed executions: order ref zero-filled, side fixed to B since 2014.
                yield itch.encode("P", stock_locate=i + 1, timestamp=ts, order_reference_number=0,
                                  buy_sell_indicator="B", shares=shares, stock=syms[i][0],
                                  price=mid[i], match_number=next(matches))
                continue
            ref = next(refs)
            remember(ref, [i + 1, side, shares, price])
            extra = {"attribution": rng.choice(MPIDS)} if kind == "F" else {}
            yield itch.encode(kind, stock_locate=i + 1, timestamp=ts, order_reference_number=ref,
                              buy_sell_indicator=side, shares=shares, stock=syms[i][0],
                              price=price, **extra)
            continue
        ref = live[rng.randrange(len(live))]
        locate, side, shares, price = book[ref]
        if kind == "D":
            forget(ref)
            yield itch.encode("D", stock_locate=locate, timestamp=ts, order_reference_number=ref)
        elif kind == "U":
            new_ref = next(refs)
            new_price = max(100, price + 100 * rng.randint(-3, 3))
            forget(ref)
            remember(new_ref, [locate, side, shares, new_price])
            yield itch.encode("U", stock_locate=locate, timestamp=ts, order_reference_number=ref,
                              new_order_reference_number=new_ref, shares=shares, price=new_price)
        else:  # E or X: part (or all) of the order's shares
            n = rng.randint(1, shares)
            if n == shares:
                forget(ref)
            else:
                book[ref][2] -= n
            if kind == "E":
                yield itch.encode("E", stock_locate=locate, timestamp=ts, order_reference_number=ref,
                                  executed_shares=n, match_number=next(matches))
            else:
                yield itch.encode("X", stock_locate=locate, timestamp=ts, order_reference_number=ref,
                                  cancelled_shares=n)


def packets(messages: list[bytes], seed: int = 1, first_sequence: int = 1,
            sizes: tuple[int, int] = (MIN_PER_PACKET, MAX_PER_PACKET)) -> list[tuple[int, list[bytes]]]:
    """Messages grouped into MoldUDP64 packets of `sizes` messages (uniform), numbered in order."""
    rng = random.Random(seed ^ 0x5EED)
    out, pos, seq = [], 0, first_sequence
    while pos < len(messages):
        k = rng.randint(*sizes)
        batch = messages[pos: pos + k]
        out.append((seq, batch))
        pos += len(batch)
        seq += len(batch)
    return out
