"""Version negotiation, the registry behind ApiVersions, and requests we do not serve."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from kio.index import UnknownEntity
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.metadata.v9.request import MetadataRequest as MetadataRequestV9
from kio.schema.metadata.v9.request import MetadataRequestTopic

from shim.protocol import REGISTRY, Api, ErrorCode, ProtocolError, Registry, ServerConnection, encode_response
from shim.protocol import api_versions, metadata
from protocol_helpers import decode_response, encode_request

REQUIRED = {
    "ApiVersions": 18, "Metadata": 3, "Produce": 0, "Fetch": 1, "ListOffsets": 2, "FindCoordinator": 10,
    "JoinGroup": 11, "SyncGroup": 14, "Heartbeat": 12, "LeaveGroup": 13, "OffsetCommit": 8,
    "OffsetFetch": 9, "InitProducerId": 22, "CreateTopics": 19, "DeleteTopics": 20,
    "CreatePartitions": 37, "DescribeConfigs": 32, "DescribeGroups": 15, "ListGroups": 16,
    "DescribeCluster": 60, "DeleteRecords": 21, "AlterConfigs": 33, "AlterReplicaLogDirs": 34,
    "DescribeLogDirs": 35, "DeleteGroups": 42, "ElectLeaders": 43, "IncrementalAlterConfigs": 44,
    "AlterPartitionReassignments": 45, "ListPartitionReassignments": 46, "OffsetDelete": 47,
    "DescribeQuorum": 55, "ListConfigResources": 74, "DescribeTopicPartitions": 75,
    "ConsumerGroupHeartbeat": 68, "ConsumerGroupDescribe": 69,
    "AddPartitionsToTxn": 24, "AddOffsetsToTxn": 25, "EndTxn": 26, "TxnOffsetCommit": 28,
    "DescribeProducers": 61, "DescribeTransactions": 65, "ListTransactions": 66,
}
# What Apache Kafka 4.3.1 advertises (captured from the real broker: capture_fixtures.py
# --kafka-api-versions); camus advertises exactly these ranges for every API it serves.
KAFKA_RELEASE = "4.3.1"
KAFKA_RANGES = {k: (lo, hi) for k, lo, hi in json.loads(
    (Path(__file__).parent / "fixtures" / f"kafka-{KAFKA_RELEASE}-api-versions.json").read_text()
)["api_keys"]}


def _raw_request(key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", key, version, correlation_id, -1) + body
    return struct.pack(">i", len(payload)) + payload


def _expect_error(data: bytes) -> ProtocolError:
    conn = ServerConnection()
    conn.receive_data(data)
    with pytest.raises(ProtocolError) as info:
        conn.next_request()
    return info.value


def test_registry_holds_exactly_the_required_apis():
    assert {a.name: a.key for a in REGISTRY} == REQUIRED


def test_versions_the_clients_use_are_covered():
    # kafka-compat.md: librdkafka sends ApiVersions v3 first, zstd needs Produce>=7 and
    # Fetch>=10, kafka-python 3.0 uses FindCoordinator v6 and OffsetFetch v8.
    need = {18: 4, 0: 10, 1: 16, 3: 13, 10: 6, 9: 8, 8: 9, 2: 7, 22: 4, 11: 7}
    for key, version in need.items():
        assert REGISTRY.get(key).supports(version)


def test_registry_refuses_duplicates():
    registry = Registry()
    registry.register(Api(12, "Heartbeat", 0, 4, lambda *a: {}))
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(Api(12, "Heartbeat again", 0, 1, lambda *a: {}))


def test_registry_refuses_versions_the_codec_lacks():
    with pytest.raises(UnknownEntity):
        Registry().register(Api(0, "Produce", 0, 13, lambda *a: {}))  # kio has no Produce v0-2


def test_api_versions_answer_is_built_from_the_registry():
    conn = ServerConnection()
    body = ApiVersionsRequestV3(client_software_name="t", client_software_version="1")
    conn.receive_data(encode_request(18, 3, body, correlation_id=5))
    req = conn.next_request()
    correlation_id, decoded, header_size = decode_response(18, 3, encode_response(req, api_versions.response(req)))
    assert correlation_id == 5 and header_size == 4  # ApiVersions: response header v0 even at v3
    assert decoded.error_code == ErrorCode.none
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == REGISTRY.version_ranges()


@pytest.mark.parametrize("version", [5, 17, 32767])
def test_api_versions_too_new_gets_v0_unsupported_version(version):
    # The body of a future version is unknown: it must not be parsed at all.
    error = _expect_error(_raw_request(18, version, 77, body=b"\xff\xfe future body"))
    assert error.error_code == ErrorCode.unsupported_version
    correlation_id, body, header_size = decode_response(18, 0, error.response)
    assert (correlation_id, header_size) == (77, 4)
    assert body.error_code == ErrorCode.unsupported_version
    ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert ranges[18] == (0, 4)
    assert len(ranges) == len(REGISTRY)


def test_connection_continues_after_a_rejected_api_versions():
    conn = ServerConnection()
    retry = encode_request(18, 3, ApiVersionsRequestV3(client_software_name="t", client_software_version="1"), 2)
    conn.receive_data(_raw_request(18, 9, 1) + retry)
    with pytest.raises(ProtocolError):
        conn.next_request()
    assert conn.next_request().correlation_id == 2


@pytest.mark.parametrize(("key", "version"), [(3, 14), (0, 2), (1, 3), (2, 0), (8, 1)])
def test_registered_api_at_a_version_the_codec_lacks_closes(key, version):
    error = _expect_error(_raw_request(key, version, 3))
    assert error.error_code == ErrorCode.unsupported_version
    assert error.response is None and error.close_connection
    assert (error.api_key, error.api_version, error.correlation_id) == (key, version, 3)


def test_unadvertised_version_the_codec_knows_is_answered_in_the_clients_format():
    # A registry capping Metadata at v5, and a client (sarama-like) that sends v9
    # without asking: it gets UNSUPPORTED_VERSION per topic, in v9's format.
    registry = Registry()
    registry.register(Api(3, "Metadata", 0, 5, metadata._error))
    conn = ServerConnection(registry)
    body = MetadataRequestV9(
        topics=(MetadataRequestTopic(name="orders"),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    conn.receive_data(encode_request(3, 9, body, correlation_id=8))
    with pytest.raises(ProtocolError) as info:
        conn.next_request()
    correlation_id, decoded, _ = decode_response(3, 9, info.value.response)
    assert correlation_id == 8
    assert [(t.name, t.error_code) for t in decoded.topics] == [("orders", ErrorCode.unsupported_version)]


def test_unregistered_api_known_to_the_codec_gets_an_error_answer():
    # SaslHandshake v1 (key 17): not implemented; a top-level UNSUPPORTED_VERSION
    # beats a disconnect the client would retry forever.
    error = _expect_error(_raw_request(17, 1, 4, body=b"\x00\x05PLAIN"))
    assert error.error_code == ErrorCode.unsupported_version
    correlation_id, body, _ = decode_response(17, 1, error.response)
    assert correlation_id == 4 and body.error_code == ErrorCode.unsupported_version


def test_every_advertised_range_is_kafka_4_3_1s():
    """Issue 17: clients gate features on the release they infer, so each advertised range
    is exactly the one Kafka 4.3.1 advertises for that API (Produce included: 0-13, though
    v0-2 close the connection, as they do on Kafka 4.3.1)."""
    ours = {k: (lo, hi) for k, lo, hi in REGISTRY.version_ranges()}
    assert {k: KAFKA_RANGES.get(k) for k in ours} == ours


def test_kafka_python_infers_the_documented_release():
    """kafka-python 3 infers the broker's release from ApiVersions (before: 4.2)."""
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    ours = {k: (lo, hi) for k, lo, hi in REGISTRY.version_ranges()}
    assert infer_broker_version_from_api_versions(ours) == (4, 3)
    assert infer_broker_version_from_api_versions(KAFKA_RANGES) == (4, 3)


def test_error_answers_of_admin_apis_echo_every_item():
    # kafka-python sends some admin APIs without reading ApiVersions; an answer refusing
    # the whole request (here: a version we do not advertise) still names every item.
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest

    registry = Registry()
    registry.register(Api(42, "DeleteGroups", 0, 1, REGISTRY.get(42).error_response))
    conn = ServerConnection(registry)
    conn.receive_data(encode_request(42, 2, DeleteGroupsRequest(groups_names=("g1", "g2")), 11))
    with pytest.raises(ProtocolError) as info:
        conn.next_request()
    correlation_id, decoded, _ = decode_response(42, 2, info.value.response)
    assert [(r.group_id, r.error_code) for r in decoded.results] == [
        ("g1", ErrorCode.unsupported_version), ("g2", ErrorCode.unsupported_version)]


@pytest.mark.parametrize("key", [-1, 1000, 32767])
def test_unknown_api_key_closes(key):
    error = _expect_error(_raw_request(key, 0, 6))
    assert error.close_connection
    assert "not implemented" in str(error)
