"""Topic schemas: which fields of a Kafka record are filterable, and where each comes from.

A topic declares its filterable fields in the topic config `camus.schema` (through
CreateTopics, so any AdminClient and `camus topic create` work, or through the `--config`
file): a comma-separated list of `name:type=source`. Kafka's `kafka-topics` script cannot send
it: it rejects unknown config names itself and splits values at every `=`.

    camus.schema=stock:str8=$.stock,price:u32=$.price,side:str1=header:side

types:    u8 u16 u32 u64, or strN (N bytes of ASCII, 1 <= N <= 8, space-padded on the right)
sources:  $.a.b        a JSON path into the record value (object keys; `[i]` for list items)
          header:NAME  a record header (integers as ASCII decimal text, strings as bytes)
          key          the record key (same rules as a header)
          bytes:OFF:LEN  LEN bytes of a binary value at OFF (integers big-endian)

Each field rides in one 64-bit attribute slot of the camus Kafka header (`p4/kafka/kafka.p4`),
so a schema has at most eight fields. A record that lacks a field, or whose value does not fit
the type, gets the field's zero value (0, or spaces) and is counted, never dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from compiler.errors import CamusError
from shim.protocol.native import native as _native  # None: json.loads does it all

SLOTS = 8
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(u8|u16|u32|u64|str[1-8])=(.+)$")
_PATH_STEP = re.compile(r"\.([A-Za-z_$][A-Za-z0-9_$-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]")


class SchemaError(CamusError):
    """A `camus.schema` value that does not parse; the column points into the config value."""


@dataclass(frozen=True)
class SchemaField:
    name: str
    type: str  # u8 u16 u32 u64 strN
    source: str  # json | header | key | bytes
    path: tuple = ()  # json: keys/indices; header: (name,); bytes: (offset, length)
    slot: int = 0
    # Derived from `type` once, because extraction reads them for every field of every record.
    is_string: bool = field(init=False, repr=False, compare=False)
    width: int = field(init=False, repr=False, compare=False)  # bits
    zero: int = field(init=False, repr=False, compare=False)  # the value of a missing field

    def __post_init__(self) -> None:
        is_string = self.type.startswith("str")
        width = int(self.type[3:]) * 8 if is_string else int(self.type[1:])
        object.__setattr__(self, "is_string", is_string)
        object.__setattr__(self, "width", width)
        object.__setattr__(self, "zero",
                           int.from_bytes(b" " * (width // 8), "big") if is_string else 0)


@dataclass
class Schema:
    fields: list[SchemaField]
    text: str = ""
    misses: dict[str, int] = field(default_factory=dict)  # field -> records given the zero value
    # The JSON fields' paths for shim.protocol._native.JsonPaths, which reads them out of a value
    # without json.loads (~10x faster), deferring to it where it cannot match it exactly;
    # None without the extension.
    _json_paths: object = field(default=None, init=False, repr=False, compare=False)
    _json_index: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # (slot, is_string, width) per JSON field when every field is one: `extract_packed`.
    _json_slots: list | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        json_fields = [f for f in self.fields if f.source == "json"]
        if _native is None or not json_fields:
            return
        try:
            self._json_paths = _native.JsonPaths([list(f.path) for f in json_fields])
        except (ValueError, TypeError, OverflowError):  # a step it cannot hold: json.loads
            return
        self._json_index = {f.name: i for i, f in enumerate(json_fields)}
        if len(json_fields) == len(self.fields):
            self._json_slots = [(f.slot, f.is_string, f.width) for f in json_fields]

    def by_name(self, name: str) -> SchemaField | None:
        return next((f for f in self.fields if f.name == name), None)

    def extract(self, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes | None]], count: bool = True) -> list[int]:
        """The slot values of one record (slots past the schema's fields are 0); `count`
        False reads them again without counting misses (the edge's re-check)."""
        slots = [0] * SLOTS
        doc = _UNPARSED
        leaves = None
        if self._json_paths is not None and type(value) is bytes:  # it reads bytes only
            leaves = self._json_paths.extract(value)  # None: json.loads decides below
        for f in self.fields:
            if f.source == "json":
                if leaves is not None:
                    v = _json_leaf(f, leaves[self._json_index[f.name]])
                else:
                    if doc is _UNPARSED:
                        doc = _json(value)
                    v = _from_json(f, doc)
            elif f.source == "header":
                raw = next((hv for hk, hv in headers if hk == f.path[0]), None)
                v = _from_text(f, raw)
            elif f.source == "key":
                v = _from_text(f, key)
            else:
                v = _from_bytes(f, value)
            if v is None:
                if count:
                    self.misses[f.name] = self.misses.get(f.name, 0) + 1
                v = f.zero
            slots[f.slot] = v
        return slots


    def extract_packed(self, values: list[bytes | None]) -> bytes | None:
        """`extract` of many record values at once, packed as eight u64 LE per value, by
        the extension when every field is a JSON path (misses counted as `extract` counts
        them); None where `extract` must run record by record."""
        if self._json_slots is None:
            return None
        got = self._json_paths.slots(values, self._json_slots)
        if got is None:
            return None
        packed, missed = got
        self.count_misses(missed)
        return packed

    def packed_paths(self) -> tuple[object, list] | None:
        """(JsonPaths, fields) for the extension to read every record's slots itself
        (`reframe.frame_body`), when every field is a JSON path; else None."""
        return None if self._json_slots is None else (self._json_paths, self._json_slots)

    def count_misses(self, missed: list[tuple[int, int]]) -> None:
        """Adds the extension's [(field index, records given the zero value)]."""
        for i, n in missed:
            name = self.fields[i].name
            self.misses[name] = self.misses.get(name, 0) + n


_UNPARSED = object()


def describe_source(f: SchemaField) -> str:
    """Where a field's value comes from, as camus.schema spells it."""
    if f.source == "json":
        return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in f.path)
    if f.source == "bytes":
        return "bytes:" + ":".join(map(str, f.path))
    return f"header:{f.path[0]}" if f.source == "header" else f.source


def parse_schema(text: str) -> Schema:
    fields: list[SchemaField] = []
    col = 1
    for part in text.split(","):
        item = part.strip()
        where = col + len(part) - len(part.lstrip())
        col += len(part) + 1
        if not item:
            raise SchemaError("empty field in camus.schema", 1, where)
        m = _FIELD.match(item)
        if m is None:
            raise SchemaError(f"bad field {item!r}: expected name:type=source with type one of "
                              f"u8 u16 u32 u64 str1..str8", 1, where)
        name, typ, src = m.groups()
        if any(f.name == name for f in fields):
            raise SchemaError(f"field {name!r} is declared twice", 1, where)
        if len(fields) == SLOTS:
            raise SchemaError(f"at most {SLOTS} fields (one 64-bit attribute slot each)", 1,
                              where)
        fields.append(_source(name, typ, src, len(fields), where + len(name) + len(typ) + 2))
    if not fields:
        raise SchemaError("camus.schema declares no field", 1, 1)
    return Schema(fields, text)


def _source(name: str, typ: str, src: str, slot: int, col: int) -> SchemaField:
    if src.startswith("$"):
        steps, pos = [], 1
        while pos < len(src):
            m = _PATH_STEP.match(src, pos)
            if m is None:
                raise SchemaError(f"bad JSON path {src!r} at {src[pos:]!r}", 1, col + pos)
            steps.append(int(m.group(2)) if m.group(2) is not None else
                         (m.group(1) if m.group(1) is not None else m.group(3)))
            pos = m.end()
        if not steps:
            raise SchemaError("a JSON path needs at least one step, e.g. $.price", 1, col)
        return SchemaField(name, typ, "json", tuple(steps), slot)
    if src.startswith("header:") and len(src) > 7:
        return SchemaField(name, typ, "header", (src[7:],), slot)
    if src == "key":
        return SchemaField(name, typ, "key", (), slot)
    m = re.fullmatch(r"bytes:(\d+):(\d+)", src)
    if m:
        off, length = int(m.group(1)), int(m.group(2))
        width = int(typ[3:]) if typ.startswith("str") else int(typ[1:]) // 8
        if not 1 <= length <= width:
            raise SchemaError(f"bytes:{off}:{length} does not fit type {typ} ({width} bytes)",
                              1, col)
        return SchemaField(name, typ, "bytes", (off, length), slot)
    raise SchemaError(f"bad source {src!r}: expected $.json.path, header:NAME, key or "
                      f"bytes:OFFSET:LEN", 1, col)


def _json(value: bytes | None):
    if value is None:
        return None
    try:
        return json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    except RecursionError:  # nested deeper than Python's stack: a miss, not a failed produce
        return None


def _from_json(f: SchemaField, doc) -> int | None:
    for step in f.path:
        if isinstance(step, int):
            if not isinstance(doc, list) or step >= len(doc):
                return None
        elif not isinstance(doc, dict) or step not in doc:
            return None
        doc = doc[step]
    return _json_leaf(f, doc)


def _json_leaf(f: SchemaField, doc) -> int | None:
    """The slot value of what a JSON path selected (None: the field's zero value)."""
    if f.is_string:
        if not isinstance(doc, str) or not doc.isascii():
            return None
        return _string(f, doc.encode("ascii"))
    if isinstance(doc, bool) or not isinstance(doc, int):
        return None
    return doc if 0 <= doc < 1 << f.width else None


def _from_text(f: SchemaField, raw: bytes | None) -> int | None:
    if raw is None:
        return None
    if f.is_string:
        return _string(f, raw)
    if not raw.isdigit():
        return None
    v = int(raw)
    return v if v < 1 << f.width else None


def _from_bytes(f: SchemaField, value: bytes | None) -> int | None:
    off, length = f.path
    if value is None or off + length > len(value):
        return None
    raw = value[off:off + length]
    return _string(f, raw) if f.is_string else int.from_bytes(raw, "big")


def _string(f: SchemaField, raw: bytes | None) -> int | None:
    size = f.width // 8
    if raw is None or len(raw) > size or not raw.isascii():
        return None
    return int.from_bytes(raw.ljust(size, b" "), "big")
