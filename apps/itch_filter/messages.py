"""NASDAQ TotalView-ITCH 5.0 messages: the 23 layouts, encoding and decoding.

Every message is a type byte, the common prefix (stock locate u16, tracking number u16,
timestamp u48 in ns past midnight) and a fixed body whose layout depends on the type
(../shared/specs/wire-formats.md 1.2 and 1.3). A layout is a list of (field, struct code):
integers are big-endian `H`/`I`/`Q`, alpha fields `Ns` (left-justified, space-padded, so
`encode` pads text with spaces, never NULs). Field names follow the spec's wording; they are
also the attribute names of the independent `itchfeed` decoder, which the tests use to check
every layout byte for byte.

Pure functions over bytes: no I/O here.
"""

from __future__ import annotations

import struct
from typing import Any

PREFIX = struct.Struct("!cHH6s")  # type, stock locate, tracking number, timestamp (u48)
PREFIX_BYTES = PREFIX.size  # 11

# Body layouts after the 11-byte prefix, in wire order.
LAYOUTS: dict[bytes, tuple[str, list[tuple[str, str]]]] = {
    b"S": ("System Event", [("event_code", "1s")]),
    b"R": ("Stock Directory", [
        ("stock", "8s"), ("market_category", "1s"), ("financial_status_indicator", "1s"),
        ("round_lot_size", "I"), ("round_lots_only", "1s"), ("issue_classification", "1s"),
        ("issue_sub_type", "2s"), ("authenticity", "1s"), ("short_sale_threshold_indicator", "1s"),
        ("ipo_flag", "1s"), ("luld_ref", "1s"), ("etp_flag", "1s"), ("etp_leverage_factor", "I"),
        ("inverse_indicator", "1s")]),
    b"H": ("Stock Trading Action", [
        ("stock", "8s"), ("trading_state", "1s"), ("reserved", "1s"), ("reason", "4s")]),
    b"Y": ("Reg SHO Restriction", [("stock", "8s"), ("reg_sho_action", "1s")]),
    b"L": ("Market Participant Position", [
        ("mpid", "4s"), ("stock", "8s"), ("primary_market_maker", "1s"),
        ("market_maker_mode", "1s"), ("market_participant_state", "1s")]),
    # The three MWCB levels are Price(8): 8 implied decimal places.
    b"V": ("MWCB Decline Level", [
        ("level1_price", "Q"), ("level2_price", "Q"), ("level3_price", "Q")]),
    b"W": ("MWCB Status", [("breached_level", "1s")]),
    b"K": ("IPO Quoting Period Update", [
        ("stock", "8s"), ("ipo_release_time", "I"), ("ipo_release_qualifier", "1s"),
        ("ipo_price", "I")]),
    b"J": ("LULD Auction Collar", [
        ("stock", "8s"), ("auction_collar_reference_price", "I"),
        ("upper_auction_collar_price", "I"), ("lower_auction_collar_price", "I"),
        ("auction_collar_extension", "I")]),
    b"h": ("Operational Halt", [
        ("stock", "8s"), ("market_code", "1s"), ("operational_halt_action", "1s")]),
    b"A": ("Add Order", [
        ("order_reference_number", "Q"), ("buy_sell_indicator", "1s"), ("shares", "I"),
        ("stock", "8s"), ("price", "I")]),
    b"F": ("Add Order with MPID", [
        ("order_reference_number", "Q"), ("buy_sell_indicator", "1s"), ("shares", "I"),
        ("stock", "8s"), ("price", "I"), ("attribution", "4s")]),
    b"E": ("Order Executed", [
        ("order_reference_number", "Q"), ("executed_shares", "I"), ("match_number", "Q")]),
    b"C": ("Order Executed With Price", [
        ("order_reference_number", "Q"), ("executed_shares", "I"), ("match_number", "Q"),
        ("printable", "1s"), ("execution_price", "I")]),
    b"X": ("Order Cancel", [("order_reference_number", "Q"), ("cancelled_shares", "I")]),
    b"D": ("Order Delete", [("order_reference_number", "Q")]),
    b"U": ("Order Replace", [
        ("order_reference_number", "Q"), ("new_order_reference_number", "Q"), ("shares", "I"),
        ("price", "I")]),
    b"P": ("Trade", [
        ("order_reference_number", "Q"), ("buy_sell_indicator", "1s"), ("shares", "I"),
        ("stock", "8s"), ("price", "I"), ("match_number", "Q")]),
    b"Q": ("Cross Trade", [
        ("shares", "Q"), ("stock", "8s"), ("cross_price", "I"), ("match_number", "Q"),
        ("cross_type", "1s")]),
    b"B": ("Broken Trade", [("match_number", "Q")]),
    b"I": ("Net Order Imbalance Indicator", [
        ("paired_shares", "Q"), ("imbalance_shares", "Q"), ("imbalance_direction", "1s"),
        ("stock", "8s"), ("far_price", "I"), ("near_price", "I"),
        ("current_reference_price", "I"), ("cross_type", "1s"), ("variation_indicator", "1s")]),
    b"N": ("Retail Price Improvement Indicator", [("stock", "8s"), ("interest_flag", "1s")]),
    b"O": ("DLCR Price Discovery", [
        ("stock", "8s"), ("open_eligibility_status", "1s"), ("minimum_allowable_price", "I"),
        ("maximum_allowable_price", "I"), ("near_execution_price", "I"),
        ("near_execution_time", "Q"), ("lower_price_range_collar", "I"),
        ("upper_price_range_collar", "I")]),
}

_BODIES = {t: struct.Struct("!" + "".join(code for _, code in fields))
           for t, (_, fields) in LAYOUTS.items()}
# Total length of each message type, type byte included (wire-formats.md table 1.2).
LENGTHS = {t: PREFIX_BYTES + body.size for t, body in _BODIES.items()}
ADD_ORDER_TYPES = (b"A", b"F")


class ItchError(ValueError):
    """Bytes that are not an ITCH 5.0 message, or fields that do not fit one."""


def encode(message_type: bytes | str, stock_locate: int = 0, tracking_number: int = 0,
           timestamp: int = 0, **fields: Any) -> bytes:
    """One message; missing integer fields are 0 and missing alpha fields are spaces."""
    t = message_type.encode() if isinstance(message_type, str) else message_type
    if t not in LAYOUTS:
        raise ItchError(f"unknown ITCH 5.0 message type {t!r}")
    layout = LAYOUTS[t][1]
    unknown = set(fields) - {name for name, _ in layout}
    if unknown:
        raise ItchError(f"{t.decode()}: no field(s) {sorted(unknown)}")
    values = []
    for name, code in layout:
        v = fields.get(name)
        if code.endswith("s"):
            width = int(code[:-1])
            raw = (v or b"").encode("ascii") if isinstance(v, str) else (v or b"")
            if len(raw) > width:
                raise ItchError(f"{t.decode()}.{name}: {raw!r} is longer than {width} bytes")
            values.append(raw.ljust(width, b" "))
        else:
            values.append(int(v or 0))
    if not 0 <= timestamp < 1 << 48:
        raise ItchError(f"timestamp {timestamp} does not fit 48 bits")
    try:
        return (PREFIX.pack(t, stock_locate, tracking_number, timestamp.to_bytes(6, "big"))
                + _BODIES[t].pack(*values))
    except struct.error as exc:
        raise ItchError(f"{t.decode()}: {exc}") from None


def decode(message: bytes) -> dict[str, Any]:
    """All fields of one message as a dict (`message_type` is the type byte; alpha fields
    keep their padding, as on the wire)."""
    if not message:
        raise ItchError("empty message")
    t = message[:1]
    if t not in LAYOUTS:
        raise ItchError(f"unknown ITCH 5.0 message type {t!r}")
    if len(message) != LENGTHS[t]:
        raise ItchError(f"{t.decode()} is {LENGTHS[t]} bytes, got {len(message)}")
    _, locate, tracking, ts = PREFIX.unpack_from(message)
    out: dict[str, Any] = {"message_type": t, "stock_locate": locate,
                           "tracking_number": tracking, "timestamp": int.from_bytes(ts, "big")}
    names = [name for name, _ in LAYOUTS[t][1]]
    out.update(zip(names, _BODIES[t].unpack_from(message, PREFIX_BYTES)))
    return out

