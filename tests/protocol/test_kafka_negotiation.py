"""Version negotiation, the registry behind ApiVersions, and requests we do not serve."""

from __future__ import annotations

import struct

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
    "DescribeCluster": 60,
    "SaslHandshake": 17,
    "SaslAuthenticate": 36,
    "DescribeAcls": 29,
    "CreateAcls": 30,
    "DeleteAcls": 31,
    "DescribeUserScramCredentials": 50,
    "AlterUserScramCredentials": 51,
    "DescribeClientQuotas": 48,
    "AlterClientQuotas": 49,
}


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
    # DescribeDelegationToken v1 (key 41): not implemented; a top-level UNSUPPORTED_VERSION
    # beats a disconnect the client would retry forever.
    error = _expect_error(_raw_request(41, 1, 4, body=b"\xff\xff\xff\xff"))
    assert error.error_code == ErrorCode.unsupported_version
    correlation_id, body, _ = decode_response(41, 1, error.response)
    assert correlation_id == 4 and body.error_code == ErrorCode.unsupported_version


def test_unimplemented_admin_apis_echo_every_item_with_the_error():
    # DeleteGroups / DeleteRecords / IncrementalAlterConfigs / DescribeTopicPartitions are
    # not advertised; a client that sends them anyway (kafka-python with api_version set)
    # gets every item back with UNSUPPORTED_VERSION, not an empty result list.
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
    from kio.schema.delete_records.v2.request import (DeleteRecordsPartition, DeleteRecordsRequest,
                                                      DeleteRecordsTopic)
    from kio.schema.describe_topic_partitions.v0.request import (DescribeTopicPartitionsRequest,
                                                                 TopicRequest)
    from kio.schema.incremental_alter_configs.v1.request import (AlterConfigsResource,
                                                                 IncrementalAlterConfigsRequest)
    import datetime

    from kio.static.primitive import i32, i32Timedelta

    unsupported = ErrorCode.unsupported_version
    requests = [
        (42, 2, DeleteGroupsRequest(groups_names=("g1", "g2")),
         lambda b: [(r.group_id, r.error_code) for r in b.results],
         [("g1", unsupported), ("g2", unsupported)]),
        (21, 2, DeleteRecordsRequest(topics=(DeleteRecordsTopic(name="t", partitions=(
            DeleteRecordsPartition(partition_index=i32(3), offset=5),)),),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=1))),
         lambda b: [(t.name, p.partition_index, p.error_code) for t in b.topics for p in t.partitions],
         [("t", 3, unsupported)]),
        (44, 1, IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
            resource_type=2, resource_name="t", configs=()),), validate_only=False),
         lambda b: [(r.resource_name, r.error_code) for r in b.responses], [("t", unsupported)]),
        (75, 0, DescribeTopicPartitionsRequest(topics=(TopicRequest(name="t"),),
                                               response_partition_limit=i32(10), cursor=None),
         lambda b: [(t.name, t.error_code) for t in b.topics], [("t", unsupported)]),
    ]
    for key, version, body, items, want in requests:
        conn = ServerConnection()
        conn.receive_data(encode_request(key, version, body, correlation_id=11))
        with pytest.raises(ProtocolError) as info:
            conn.next_request()
        assert "not implemented" in str(info.value)
        correlation_id, decoded, _ = decode_response(key, version, info.value.response)
        assert correlation_id == 11 and items(decoded) == want, key


@pytest.mark.parametrize("key", [-1, 1000, 32767])
def test_unknown_api_key_closes(key):
    error = _expect_error(_raw_request(key, 0, 6))
    assert error.close_connection
    assert "not implemented" in str(error)
