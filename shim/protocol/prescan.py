"""A schema-driven pass over each request before kio parses it.

It exists for three things kio's native reader gets wrong:

- Array lengths are trusted: kio reserves memory for the announced number of
  elements before reading them, so a 20-byte frame announcing 2^32 elements
  aborts the whole process (a Rust allocation failure is not an exception). Here
  an array announcing more elements than bytes remain (every element takes at
  least one) is refused first.
- A null array (length -1, or 0 in compact form) where the schema does not allow
  null is read as None; Kafka refuses such a request as malformed, and so does this pass.
- Unknown tagged fields raise, where KIP-482 says a receiver skips them (newer
  clients may add tags to versions we support). Here they are cut out, and only
  then does the frame go to kio.

The pass only reads; it returns the payload unchanged unless a tag was dropped.
Its cost (tens of microseconds for a typical request) is small next to the
records a Produce carries.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from kio.serial._parse import get_reader
from kio.serial.readers import (
    read_compact_array_length,
    read_int8,
    read_legacy_array_length,
    read_unsigned_varint,
)

from .entities import _ENTITY, _ENTITY_TUPLE, _PRIMITIVE_TUPLE, _slots
from .records import encode_uvarint

__all__ = ["prescan", "PrescanError"]


class PrescanError(ValueError):
    pass


@cache
def _plan(cls: type) -> tuple[tuple, frozenset[int]]:
    """(field readers in wire order, known tags) for one kio dataclass."""
    by_name = {s.name: s for s in _slots(cls)}
    flexible = cls.__flexible__
    steps, tags = [], set()
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            tags.add(f.metadata["tag"])
            continue
        slot = by_name[f.name]
        if slot.kind in (_ENTITY_TUPLE, _PRIMITIVE_TUPLE):
            length_reader = read_compact_array_length if flexible else read_legacy_array_length
            element = slot.entity if slot.kind == _ENTITY_TUPLE else get_reader(slot.kafka_type, flexible, False)
            steps.append(("array", length_reader, slot.kind == _ENTITY_TUPLE, element,
                          slot.optional, slot.name))
        elif slot.kind == _ENTITY:
            steps.append(("entity", slot.optional, slot.entity))
        elif cls.__name__ == "RequestHeader" and slot.name == "client_id":
            # client_id keeps its int16 length even in the flexible header v2.
            steps.append(("value", get_reader("string", False, True)))
        else:
            steps.append(("value", get_reader(slot.kafka_type, flexible, slot.optional)))
    return tuple(steps), frozenset(tags) if flexible else None


class _Scan:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.edits: list[tuple[int, int, bytes]] = []  # (start, end, replacement)

    def read(self, reader):
        value, size = reader(self.data, self.pos)
        self.pos += size
        return value

    def entity(self, cls: type) -> None:
        steps, tags = _plan(cls)
        for step in steps:
            if step[0] == "value":
                self.read(step[1])
            elif step[0] == "array":
                _, length_reader, nested, element, nullable, name = step
                length = self.read(length_reader)
                if length is None or length < 0:
                    # kio reads a null array as None whatever the schema says; Kafka refuses
                    # a null where the schema has no nullableVersions, and so do we, here,
                    # rather than let a handler meet None where it iterates.
                    if not nullable:
                        raise PrescanError(f"non-nullable array {cls.__name__}.{name} is null")
                    continue
                if length > len(self.data) - self.pos:
                    raise PrescanError(
                        f"array of {length} elements in {cls.__name__} with {len(self.data) - self.pos} bytes left"
                    )
                for _ in range(length):
                    if nested:
                        self.entity(element)
                    else:
                        self.read(element)
            else:
                _, optional, nested_cls = step
                if optional and self.read(read_int8) == -1:
                    continue
                self.entity(nested_cls)
        if tags is not None:
            self.tag_section(tags)

    def tag_section(self, known: frozenset[int]) -> None:
        start = self.pos
        count = self.read(read_unsigned_varint)
        if count > len(self.data) - self.pos:
            raise PrescanError(f"{count} tagged fields with {len(self.data) - self.pos} bytes left")
        kept, dropped = [], False
        for _ in range(count):
            field_start = self.pos
            tag = self.read(read_unsigned_varint)
            length = self.read(read_unsigned_varint)
            self.pos += length
            if self.pos > len(self.data):
                raise PrescanError("tagged field overruns the frame")
            if tag in known:
                kept.append(self.data[field_start : self.pos])
            else:
                dropped = True
        if dropped:
            self.edits.append((start, self.pos, encode_uvarint(len(kept)) + b"".join(kept)))


def prescan(payload: bytes, classes: list[type]) -> bytes:
    """Check `payload` (entities of `classes`, back to back); drop unknown tags.

    Raises PrescanError (or kio's DecodeError on truncation) for impossible input.
    """
    scan = _Scan(payload)
    for cls in classes:
        scan.entity(cls)
    if not scan.edits:
        return payload
    parts, last = [], 0
    for start, end, replacement in scan.edits:
        parts.append(payload[last:start])
        parts.append(replacement)
        last = end
    parts.append(payload[last:])
    return b"".join(parts)
