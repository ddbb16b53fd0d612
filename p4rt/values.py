"""Values as P4Runtime bytestrings, in canonical form (P4Runtime spec 8.4).

Canonical: big-endian, no leading zero bytes, zero as one zero byte. Decoding accepts padded
strings but refuses values wider than the field; a server answers those OUT_OF_RANGE.
"""

from __future__ import annotations


class BadValue(ValueError):
    """A value that does not fit its field, or a malformed match."""


def encode(value: int, bitwidth: int) -> bytes:
    """`value` as a canonical P4Runtime bytestring of a `bitwidth`-bit field."""
    if not 0 <= value < (1 << bitwidth):
        raise BadValue(f"{value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes, bitwidth: int, what: str = "value") -> int:
    if not data:
        raise BadValue(f"{what}: empty bytestring")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise BadValue(f"{what}: {data.hex()} does not fit in {bitwidth} bits")
    return value
