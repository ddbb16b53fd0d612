"""Dropping tagged fields the codec does not know, so that newer clients still parse.

KIP-482 lets Kafka add tagged fields to a flexible version without bumping it, and
requires receivers to skip tags they do not know. kio's reader raises on them
instead ("Unknown tagged field tag"), so a client newer than kio's schemas could be
refused. When that happens `strip_unknown_tags` walks the frame with the schema
(kio's dataclasses and their field metadata), copies everything it knows and drops
the unknown tags, and the caller parses the result again. It runs only on that
fallback path, so it favours clarity over speed.
"""

from __future__ import annotations

import dataclasses

from kio.serial._parse import get_reader
from kio.serial.readers import (
    read_compact_array_length,
    read_int8,
    read_legacy_array_length,
    read_unsigned_varint,
)

from .entities import _ENTITY, _ENTITY_TUPLE, _PRIMITIVE_TUPLE, _slots
from .records import encode_uvarint

__all__ = ["strip_unknown_tags"]


class _Walker:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.out = bytearray()

    def copy(self, reader) -> object:
        value, size = reader(self.data, self.pos)
        self.out += self.data[self.pos : self.pos + size]
        self.pos += size
        return value

    def entity(self, cls: type) -> None:
        tags = {}
        for f in dataclasses.fields(cls):
            if "tag" in f.metadata:
                tags[f.metadata["tag"]] = f.name
        by_name = {s.name: s for s in _slots(cls)}
        for f in dataclasses.fields(cls):
            if "tag" not in f.metadata:
                self.field(cls, by_name[f.name])
        if cls.__flexible__:
            self.tag_section(set(tags))

    def field(self, cls: type, slot) -> None:
        flexible = cls.__flexible__
        if slot.kind in (_ENTITY_TUPLE, _PRIMITIVE_TUPLE):
            length = self.copy(read_compact_array_length if flexible else read_legacy_array_length)
            for _ in range(max(length or 0, 0)):
                if slot.kind == _ENTITY_TUPLE:
                    self.entity(slot.entity)
                else:
                    self.copy(get_reader(slot.kafka_type, flexible, False))
        elif slot.kind == _ENTITY:
            if slot.optional and self.copy(read_int8) == -1:
                return
            self.entity(slot.entity)
        elif cls.__name__ == "RequestHeader" and slot.name == "client_id":
            # client_id keeps its int16 length even in the flexible header v2.
            self.copy(get_reader("string", False, True))
        else:
            self.copy(get_reader(slot.kafka_type, flexible, slot.optional))

    def tag_section(self, known: set[int]) -> None:
        count, size = read_unsigned_varint(self.data, self.pos)
        self.pos += size
        kept = []
        for _ in range(count):
            start = self.pos
            tag, size = read_unsigned_varint(self.data, self.pos)
            self.pos += size
            length, size = read_unsigned_varint(self.data, self.pos)
            self.pos += size + length
            if self.pos > len(self.data):
                raise ValueError("tagged field overruns the frame")
            if tag in known:
                kept.append(self.data[start : self.pos])
        self.out += encode_uvarint(len(kept))
        for item in kept:
            self.out += item


def strip_unknown_tags(payload: bytes, classes: list[type]) -> bytes:
    """`payload` (entities of `classes`, back to back) without tags they do not define.

    Bytes after the last entity are kept as they are.
    """
    walker = _Walker(payload)
    for cls in classes:
        walker.entity(cls)
    return bytes(walker.out) + payload[walker.pos :]
