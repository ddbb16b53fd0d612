"""Every registered API at every registered version: requests and responses round-trip.

Requests are encoded as a client would and decoded by `ServerConnection`; responses
built by the server side are read back as a client would. Sample values fill every
field (one element per array), so a field lost or mangled on either side shows.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid

import pytest

from shim.protocol import REGISTRY, ServerConnection, build, encode_response
from shim.protocol.entities import _ENTITY, _ENTITY_TUPLE, _PRIMITIVE_TUPLE, _slots
from shim.protocol.records import Record, encode_batch
from protocol_helpers import decode_response, encode_request

BATCH = encode_batch([Record(0, 1_700_000_000_123, b"k", b"v", (("h", b"1"),))])

SAMPLE = {
    "bool": True,
    "int8": 1,
    "int16": 2,
    "int32": 3,
    "int64": 4,
    "uint16": 5,
    "float64": 1.5,
    "string": "x",
    "bytes": b"y",
    "records": BATCH,
    "uuid": uuid.UUID(int=0x1234),
    "error_code": 0,
    "timedelta_i32": datetime.timedelta(milliseconds=6),
    "timedelta_i64": datetime.timedelta(milliseconds=7),
    "datetime_i64": datetime.datetime.fromtimestamp(1_700_000_000.123, datetime.UTC),
}


def sample(cls):
    """An instance of kio dataclass `cls` with a non-default value in every field."""
    data = {}
    for slot in _slots(cls):
        if slot.kind == _ENTITY:
            data[slot.name] = sample(slot.entity)
        elif slot.kind == _ENTITY_TUPLE:
            data[slot.name] = (sample(slot.entity),)
        elif slot.kind == _PRIMITIVE_TUPLE:
            data[slot.name] = (SAMPLE[slot.kafka_type],)
        else:
            data[slot.name] = SAMPLE[slot.kafka_type]
    return build(cls, data)


CASES = [(api, v) for api in REGISTRY for v in range(api.min_version, api.max_version + 1)]
IDS = [f"{api.name}-v{v}" for api, v in CASES]


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
def test_request_roundtrip(api, version):
    body = sample(api.request_class(version))
    conn = ServerConnection()
    conn.receive_data(encode_request(api.key, version, body, correlation_id=99, client_id="rt"))
    req = conn.next_request()
    assert req.body == body
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (api.key, version, 99, "rt")
    assert req.trailing_bytes == 0
    assert conn.next_request() is None


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
def test_response_roundtrip(api, version):
    conn = ServerConnection()
    conn.receive_data(encode_request(api.key, version, sample(api.request_class(version)), correlation_id=41))
    req = conn.next_request()
    response = sample(req.response_class)
    correlation_id, body, header_size = decode_response(api.key, version, encode_response(req, response))
    assert correlation_id == 41
    assert body == response
    # KIP-482: flexible responses carry a tag buffer in header v1, except ApiVersions.
    flexible = req.response_class.__flexible__ and api.name != "ApiVersions"
    assert header_size == (5 if flexible else 4)


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
def test_error_response_echoes_and_carries_the_code(api, version):
    conn = ServerConnection()
    conn.receive_data(encode_request(api.key, version, sample(api.request_class(version))))
    req = conn.next_request()
    _, body, _ = decode_response(api.key, version, encode_response(req, req.error_response(87, "bad")))
    codes = _error_codes(body)
    assert codes and set(codes) == {87}, f"{api.name} v{version} answered codes {codes}"


def _error_codes(entity) -> list[int]:
    """Every error_code in a response, depth first."""
    found = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            found.append(int(value))
        elif dataclasses.is_dataclass(value):
            # Nested single structs (current_leader, ...) hold no error codes.
            continue
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    found.extend(_error_codes(item))
    return found
