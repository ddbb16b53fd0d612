"""Match kinds on the P4Runtime side: the one table every P4Info and entry codec path dispatches on.

A kind has its entries.json name (`{"range": [lo, hi]}`), its P4Info `MatchField.MatchType`,
the `FieldMatch` oneof that carries it, how its value is encoded into and decoded from that
message, the value a key has when it is omitted on the wire, and whether a table with such
a key orders its entries by priority (P4Runtime: a priority > 0 then, 0 otherwise). P4Runtime requires don't-care
keys to be omitted (spec 9.1.1: a range over the whole domain, a ternary mask of 0, an LPM
prefix of 0); decoding restores them, so a Read gives back the entries.json form written.
A new kind is one more row here (and its lookup in the pipeline and the switch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from p4rt.protos import p4info_pb2
from p4rt.values import BadValue, decode, encode

MF = p4info_pb2.MatchField


@dataclass(frozen=True)
class MatchKind:
    name: str  # in entries.json and the pipeline IR
    match_type: int  # P4Info MatchField.MatchType
    oneof: str  # FieldMatch's `field_match_type` member
    encode: Callable[..., bool]  # (oneof message, value, bitwidth) -> False for a don't care (omit the key)
    decode: Callable[..., object]  # (oneof message, bitwidth, what) -> value
    dont_care: Callable[[int], object] | None  # bitwidth -> the value of an omitted key; None: never omitted
    prioritised: bool  # entries of a table with such a key carry a priority


def _encode_exact(m, value: int, width: int) -> bool:
    m.value = encode(value, width)
    return True


def _encode_range(m, value, width: int) -> bool:
    lo, hi = value
    if lo == 0 and hi == (1 << width) - 1:
        return False
    m.low, m.high = encode(lo, width), encode(hi, width)
    return True


def _encode_lpm(m, value, width: int) -> bool:
    v, prefix_len = value
    if prefix_len == 0:
        return False
    m.value, m.prefix_len = encode(v, width), prefix_len
    return True


def _encode_ternary(m, value, width: int) -> bool:
    v, mask = value
    if mask == 0:
        return False
    m.value, m.mask = encode(v & mask, width), encode(mask, width)
    return True


def _decode_lpm(m, width: int, what: str) -> list[int]:
    if not 0 < m.prefix_len <= width:
        raise BadValue(f"{what}: prefix length {m.prefix_len} outside 1..{width}")
    return [decode(m.value, width, what), m.prefix_len]


def _decode_ternary(m, width: int, what: str) -> list[int]:
    value, mask = decode(m.value, width, what), decode(m.mask, width, what)
    if value & ~mask:
        raise BadValue(f"{what}: ternary value has bits outside its mask")
    return [value, mask]


KINDS = {k.name: k for k in (
    MatchKind("exact", MF.EXACT, "exact", _encode_exact, lambda m, w, what: decode(m.value, w, what), None, False),
    MatchKind("range", MF.RANGE, "range", _encode_range,
              lambda m, w, what: [decode(m.low, w, what), decode(m.high, w, what)], lambda w: [0, (1 << w) - 1], True),
    MatchKind("lpm", MF.LPM, "lpm", _encode_lpm, _decode_lpm, lambda w: [0, 0], False),
    MatchKind("ternary", MF.TERNARY, "ternary", _encode_ternary, _decode_ternary, lambda w: [0, 0], True),
)}
BY_MATCH_TYPE = {k.match_type: k for k in KINDS.values()}
