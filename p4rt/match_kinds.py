"""Match kinds on the P4Runtime side: the registry's kinds with their protobuf codec.

What a kind is (its entries.json name, its P4Info `MatchField.MatchType` name, the
`FieldMatch` oneof that carries it, whether a table with such a key orders its entries by
priority: P4Runtime wants a priority > 0 then, 0 otherwise) comes from the match-kind
registry, `pipeline.match_kinds`; this module adds how a value is encoded into and decoded
from that message and the value a key has when it is omitted on the wire. P4Runtime
requires don't-care keys to be omitted (spec 9.1.1: a range over the whole domain, a
ternary mask of 0, an LPM prefix of 0); decoding restores them, so a Read gives back the
entries.json form written. A new kind is one registry entry plus its codec row here (and
its table in the native switch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from p4rt.protos import p4info_pb2
from p4rt.values import BadValue, decode, encode
from pipeline.match_kinds import MATCH_KINDS

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
    low, high = encode(lo, width), encode(hi, width)
    if low == b"\x00" and high == b"\xff" and width > 8:
        # [0, 255] of a wider field: PI (bmv2's server) judges a range whole-domain from the
        # bytestrings' own length, and refuses this one as an unomitted don't care
        # (p4lang/PI match_key_helpers.cpp, range_match_is_dont_care_). Padded to the field's
        # width, which the spec makes every server accept, it reads right.
        n = (width + 7) // 8
        low, high = lo.to_bytes(n, "big"), hi.to_bytes(n, "big")
    m.low, m.high = low, high
    return True


def _encode_lpm(m, value, width: int) -> bool:
    v, prefix_len = value
    if prefix_len == 0:
        return False
    # P4Runtime (9.1.1): the bits past the prefix must be zero, and PI refuses the entry
    # otherwise ("Invalid LPM value, incorrect number of trailing zeros"); entries.json may
    # carry them (`f == v/p` with any v), which every target ignores.
    mask = ((1 << prefix_len) - 1) << (width - prefix_len)
    m.value, m.prefix_len = encode(v & mask, width), prefix_len
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


def _codec(name: str, encode, decode, dont_care) -> MatchKind:
    kind = MATCH_KINDS[name]
    return MatchKind(name, MF.MatchType.Value(kind.p4info_match_type), kind.p4runtime_field, encode, decode,
                     dont_care, kind.prioritised)


KINDS = {k.name: k for k in (
    _codec("exact", _encode_exact, lambda m, w, what: decode(m.value, w, what), None),
    _codec("range", _encode_range, lambda m, w, what: [decode(m.low, w, what), decode(m.high, w, what)],
           lambda w: [0, (1 << w) - 1]),
    _codec("lpm", _encode_lpm, _decode_lpm, lambda w: [0, 0]),
    _codec("ternary", _encode_ternary, _decode_ternary, lambda w: [0, 0]),
)}
assert KINDS.keys() == MATCH_KINDS.keys(), "every registered match kind needs its P4Runtime codec"
BY_MATCH_TYPE = {k.match_type: k for k in KINDS.values()}
