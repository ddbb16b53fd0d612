"""Version-neutral construction of kio's per-version message dataclasses.

kio generates one frozen dataclass per API, version and nesting level, so Metadata
v1 and v12 responses are different classes with different fields. `build` lets a
handler describe a message once, as nested mappings (or objects with attributes),
and get the instance for whatever version the client negotiated: fields the version
lacks are dropped, fields the caller left out get the schema's default or the
field type's zero value, and plain ints are accepted for durations, timestamps and
error codes. `to_dict` goes the other way, for logs and tests.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

__all__ = ["build", "to_dict", "ZERO_UUID"]

ZERO_UUID = uuid.UUID(int=0)

_ENTITY, _ENTITY_TUPLE, _PRIMITIVE_TUPLE, _PRIMITIVE = range(4)


@dataclasses.dataclass(frozen=True, slots=True)
class _Slot:
    name: str
    kind: int
    entity: type | None  # nested dataclass for _ENTITY / _ENTITY_TUPLE
    kafka_type: str | None
    optional: bool
    default: Any  # dataclasses.MISSING when the schema gives none


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


@cache
def _slots(cls: type) -> tuple[_Slot, ...]:
    hints = typing.get_type_hints(cls)
    slots = []
    for f in dataclasses.fields(cls):
        hint, optional = _unwrap_optional(hints[f.name])
        entity = None
        if typing.get_origin(hint) is tuple:
            inner = typing.get_args(hint)[0]
            if dataclasses.is_dataclass(inner):
                kind, entity = _ENTITY_TUPLE, inner
            else:
                kind = _PRIMITIVE_TUPLE
        elif dataclasses.is_dataclass(hint):
            kind, entity = _ENTITY, hint
        else:
            kind = _PRIMITIVE
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        slots.append(_Slot(f.name, kind, entity, f.metadata.get("kafka_type"), optional, default))
    return tuple(slots)


def _zero(slot: _Slot) -> Any:
    if slot.default is not dataclasses.MISSING:
        return slot.default
    if slot.kind in (_ENTITY_TUPLE, _PRIMITIVE_TUPLE):
        # Even a nullable array defaults to empty: clients iterate them without a
        # null check (the Java admin throws on a null CreateTopics `configs`).
        return ()
    if slot.optional:
        return None
    if slot.kind == _ENTITY:
        return build(slot.entity)
    return _ZERO_BY_TYPE[slot.kafka_type]


_ZERO_BY_TYPE: dict[str | None, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": b"",
    "uuid": ZERO_UUID,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
}


def _coerce(kafka_type: str | None, value: Any) -> Any:
    # Handlers think in Kafka's units (milliseconds, raw error numbers); kio's
    # writers want timedelta/datetime/ErrorCode objects.
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    if kafka_type == "error_code" and isinstance(value, int) and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    return value


def _get(data: Any, name: str) -> Any:
    if isinstance(data, Mapping):
        return data.get(name, dataclasses.MISSING)
    return getattr(data, name, dataclasses.MISSING)


def build(cls: type, data: Any = None, /, **fields: Any) -> Any:
    """Instantiate kio dataclass `cls` from `data` (mapping or object) and/or keywords."""
    if fields:
        data = {**(dict(data) if isinstance(data, Mapping) else _as_mapping(data)), **fields}
    kwargs = {}
    for slot in _slots(cls):
        value = dataclasses.MISSING if data is None else _get(data, slot.name)
        if value is dataclasses.MISSING:
            kwargs[slot.name] = _zero(slot)
        elif value is None:
            kwargs[slot.name] = None if slot.optional else _zero(slot)
        elif slot.kind == _ENTITY:
            kwargs[slot.name] = value if type(value) is slot.entity else build(slot.entity, value)
        elif slot.kind == _ENTITY_TUPLE:
            kwargs[slot.name] = tuple(
                item if type(item) is slot.entity else build(slot.entity, item) for item in value
            )
        elif slot.kind == _PRIMITIVE_TUPLE:
            kwargs[slot.name] = tuple(_coerce(slot.kafka_type, v) for v in value)
        else:
            kwargs[slot.name] = _coerce(slot.kafka_type, value)
    return cls(**kwargs)


def _as_mapping(data: Any) -> dict[str, Any]:
    if data is None:
        return {}
    if dataclasses.is_dataclass(data):
        return {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}
    return dict(data)


def to_dict(entity: Any) -> Any:
    """Nested plain dicts/lists of a kio entity (shallow values kept as they are)."""
    if dataclasses.is_dataclass(entity):
        return {f.name: to_dict(getattr(entity, f.name)) for f in dataclasses.fields(entity)}
    if isinstance(entity, tuple):
        return [to_dict(v) for v in entity]
    return entity


def topic_ref(item: Any) -> dict[str, Any]:
    """The name and/or id naming a topic in a request item, for echoing it back.

    Topics are named by `name` (or `topic` in old Fetch) up to some version and by
    `topic_id` after (Produce v13, Fetch v13+, OffsetCommit/OffsetFetch v10,
    DeleteTopics v6); `build` keeps whichever the response version has.
    """
    name = getattr(item, "name", None)
    if name is None:
        name = getattr(item, "topic", None)
    return {"name": name, "topic": name, "topic_id": getattr(item, "topic_id", None)}
