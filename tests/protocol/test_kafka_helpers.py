"""The per-family helpers that hide version splits, and the version-neutral builder."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from shim.protocol import ServerConnection, build, encode_response, to_dict
from shim.protocol import fetch, group_apis, metadata, offsets, produce
from shim.protocol.framing import frame
from protocol_helpers import FIXTURES, decode_response, encode_request


def _request(key: int, version: int, data: dict):
    conn = ServerConnection()
    conn.receive_data(encode_request(key, version, build(load_request_schema(key, version), data)))
    return conn.next_request()


def _fixture_request(name: str):
    conn = ServerConnection()
    conn.receive_data((FIXTURES / name).read_bytes())
    return conn.next_request()


def test_metadata_all_topics_v0_vs_v1():
    assert metadata.requested_topics(_request(3, 0, {"topics": []})) is None
    assert metadata.requested_topics(_request(3, 1, {"topics": None})) is None
    assert metadata.requested_topics(_request(3, 1, {"topics": []})) == []
    assert metadata.requested_topics(_request(3, 4, {"topics": [{"name": "a"}]})) == [("a", None)]
    assert metadata.allows_auto_creation(_request(3, 1, {"topics": None}))
    assert not metadata.allows_auto_creation(_request(3, 4, {"topics": None, "allow_auto_topic_creation": False}))


def test_find_coordinator_before_and_after_batching():
    old = _request(10, 2, {"key": "g", "key_type": 0})
    new = _request(10, 6, {"key_type": 0, "coordinator_keys": ["g", "h"]})
    assert group_apis.coordinator_keys(old) == (0, ["g"])
    assert group_apis.coordinator_keys(new) == (0, ["g", "h"])
    answer = {"node_id": 0, "host": "127.0.0.1", "port": 9092}
    _, body, _ = decode_response(10, 2, encode_response(old, group_apis.coordinator_response(old, [{"key": "g", **answer}])))
    assert (body.node_id, body.host, body.port) == (0, "127.0.0.1", 9092)
    answers = [{"key": k, **answer} for k in ("g", "h")]
    _, body, _ = decode_response(10, 6, encode_response(new, group_apis.coordinator_response(new, answers)))
    assert [c.key for c in body.coordinators] == ["g", "h"]


def test_leave_group_members_at_every_layout():
    assert group_apis.leaving_members(_request(13, 0, {"group_id": "g", "member_id": "m"})) == [("m", None)]
    v5 = _request(13, 5, {"group_id": "g", "members": [{"member_id": "m", "group_instance_id": "i"}]})
    assert group_apis.leaving_members(v5) == [("m", "i")]


def test_offset_fetch_groups_hide_the_v8_split():
    v7 = _request(9, 7, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]})
    v8 = _request(9, 8, {"groups": [{"group_id": "g", "topics": None}]})
    assert offsets.fetch_groups(v7) == [("g", [({"name": "t", "topic": "t", "topic_id": None}, (0, 1))])]
    assert offsets.fetch_groups(v8) == [("g", None)]


def test_offset_fetch_error_keeps_metadata_non_null_for_sarama():
    req = _request(9, 5, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [3]}]})
    _, body, _ = decode_response(9, 5, encode_response(req, req.error_response(ErrorCode.coordinator_not_available)))
    [partition] = body.topics[0].partitions
    assert partition.metadata == "" and partition.committed_offset == -1
    assert body.error_code == ErrorCode.coordinator_not_available


def test_produce_partitions_and_acks0_expect_no_response():
    req = _fixture_request("librdkafka-produce-v10-none-acks0.bin")
    assert req.body.acks == 0 and not req.expects_response
    [(ref, partition, records)] = list(produce.partitions(req))
    assert ref["name"] == "fixtures" and partition == 0 and records
    assert _fixture_request("librdkafka-produce-v10-none.bin").expects_response


def test_produce_v13_names_topics_by_id():
    req = _fixture_request("java-produce-v13-none.bin")
    [(ref, _, _)] = list(produce.partitions(req))
    assert ref["name"] is None and ref["topic_id"] is not None
    _, body, _ = decode_response(0, 13, encode_response(req, req.error_response(ErrorCode.unknown_topic_id)))
    assert body.responses[0].topic_id == ref["topic_id"]


def test_fetch_helpers():
    req = _fixture_request("librdkafka-fetch-v16.bin")
    assert fetch.max_wait_ms(req) == req.body.max_wait.total_seconds() * 1000
    [(ref, p)] = list(fetch.partitions(req))
    assert ref["topic_id"] is not None and p.partition == 0


def test_encode_response_refuses_another_versions_class():
    req = _request(12, 4, {"group_id": "g", "member_id": "m"})
    other = build(load_request_schema(12, 3))  # a request class, or any wrong type
    with pytest.raises(TypeError, match="Heartbeat v4"):
        encode_response(req, other)


def test_encode_response_accepts_plain_mappings():
    req = _request(12, 4, {"group_id": "g", "member_id": "m"})
    _, body, _ = decode_response(12, 4, encode_response(req, {"error_code": 27, "throttle_time": 5}))
    assert body.error_code == ErrorCode.rebalance_in_progress
    assert body.throttle_time == datetime.timedelta(milliseconds=5)


def test_build_defaults_and_coercions():
    req = _request(3, 12, {"topics": None})
    response = req.response(
        brokers=[{"node_id": 1, "host": "127.0.0.1", "port": 9092}],
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "leader_id": 1}], "unknown_to_v12": 1}],
    )
    as_dict = to_dict(response)
    assert as_dict["brokers"][0]["rack"] is None
    assert as_dict["topics"][0]["error_code"] == ErrorCode.none
    assert as_dict["topics"][0]["partitions"][0]["replica_nodes"] == []
    # The same data at v0 simply lacks the fields v0 does not have.
    v0 = _request(3, 0, {"topics": []}).response(to_dict(response))
    assert not hasattr(v0, "cluster_id") and v0.topics[0].name == "t"


def test_null_client_id_and_unknown_header_tags():
    # Header v2 with a tagged field nobody defined yet: skipped, as KIP-482 wants.
    cls = load_request_schema(12, 4)
    body = io.BytesIO()
    entity_writer(cls)(body, build(cls, {"group_id": "g", "member_id": "m"}))
    header = struct.pack(">hhih", 12, 4, 3, -1) + b"\x01\x07\x02hi"  # one tag (7) of 2 bytes
    conn = ServerConnection()
    conn.receive_data(frame(header + body.getvalue()))
    req = conn.next_request()
    assert req.client_id is None and req.body.group_id == "g" and req.trailing_bytes == 0


def test_unknown_tags_in_a_body_are_skipped():
    cls = load_request_schema(14, 5)
    data = {"group_id": "g", "member_id": "m", "generation_id": 1,
            "assignments": [{"member_id": "m", "assignment": b"a"}]}
    encoded = encode_request(14, 5, build(cls, data), client_id="c")
    assert encoded.endswith(b"\x00\x00")  # last assignment's and the body's empty tag sections
    # One unknown tag (5) in the last assignment, two (3, 9) at the body's end.
    payload = encoded[4:-2] + b"\x01\x05\x01z" + b"\x02\x03\x00\x09\x02ab"
    conn = ServerConnection()
    conn.receive_data(frame(payload))
    req = conn.next_request()
    assert req.body == build(cls, data) and req.client_id == "c"


def test_nullable_arrays_default_to_empty_not_null():
    # The Java admin client NPEs on a null CreateTopics `configs` (found with
    # TopicCommand --create); an explicit None is still honoured.
    req = _request(19, 7, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]})
    _, body, _ = decode_response(19, 7, encode_response(req, req.response(topics=[{"name": "t"}])))
    assert body.topics[0].configs == ()
    _, body, _ = decode_response(19, 7, encode_response(req, req.response(topics=[{"name": "t", "configs": None}])))
    assert body.topics[0].configs is None
