"""The same raw requests to camus and to a real Apache Kafka 4.3.1: the same answers.

Needs a Kafka to compare with: `KAFKA_PEER=HOST:PORT` (the broker that
`../shared/peers/kafka/kafka.sh start` runs, 127.0.0.1:19092); skipped otherwise. Answers
are compared after taking out what differs by nature (node ids, topic ids, sizes, times).
"""

from __future__ import annotations

import os
import socket
import time

import pytest

from .conftest import unique
from .test_bad_input import read_frame, request
from .test_wire_semantics import create_topic
from shim.protocol import ErrorCode
from tests.protocol.protocol_helpers import decode_response

PEER = os.environ.get("KAFKA_PEER")
pytestmark = pytest.mark.skipif(not PEER, reason="set KAFKA_PEER=HOST:PORT to a Kafka 4.3.1 broker")


def _call(s, key, version, **fields):
    s.sendall(request(key, version, 7, **fields))
    return decode_response(key, version, read_frame(s))[1]


def _await_coordinator(s, group: str) -> None:
    """A fresh Kafka creates __consumer_offsets on the first FindCoordinator and answers
    COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR until it has loaded; clients retry, so do we."""
    for _ in range(150):
        found = _call(s, 10, 4, key_type=0, coordinator_keys=[group]).coordinators[0]
        if found.error_code == 0:
            # found, but its partition may still be loading: ask it about the group
            found = _call(s, 15, 5, groups=[group], include_authorized_operations=False).groups[0]
            if found.error_code not in (ErrorCode.coordinator_load_in_progress,
                                        ErrorCode.coordinator_not_available,
                                        ErrorCode.not_coordinator):
                return
        time.sleep(0.2)
    raise AssertionError(f"no coordinator for {group}: {found}")


def _answers(address: str) -> dict:
    """Every case's answer from the broker at `address`, reduced to what must agree."""
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=20)
    topic, group = unique("parity"), unique("pg")
    groups = group, unique("cg"), unique("kg")
    for g in groups:
        _await_coordinator(s, g)
    assert create_topic(s, topic, partitions=2).error_code == 0
    node = _call(s, 3, 12, topics=[{"name": topic, "topic_id": None}],
                 allow_auto_topic_creation=False,
                 include_topic_authorized_operations=False).brokers[0].node_id
    out = {}
    r = _call(s, 43, 2, election_type=0, timeout=10000,
              topic_partitions=[{"topic": topic, "partitions": [0, 1]}])
    out["elect"] = sorted((p.partition_id, p.error_code, p.error_message)
                          for t in r.replica_election_results for p in t.partition_result)
    r = _call(s, 45, 1, timeout=10000, allow_replication_factor_change=True, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "replicas": [node]},
                                       {"partition_index": 1, "replicas": None}]}])
    out["reassign"] = (r.error_code, sorted((p.partition_index, p.error_code)
                                            for t in r.responses for p in t.partitions))
    out["list_reassign"] = [t.name for t in _call(s, 46, 0, timeout=10000, topics=None).topics]
    r = _call(s, 75, 0, topics=[{"name": topic}, {"name": "no-such-parity"}],
              response_partition_limit=1, cursor=None)
    out["dtp"] = ([(t.name == topic, t.error_code, [(p.partition_index, p.eligible_leader_replicas,
                                                     p.last_known_elr, p.offline_replicas)
                                                    for p in t.partitions])
                   for t in r.topics], r.next_cursor.partition_index if r.next_cursor else None)
    r = _call(s, 21, 2, timeout=10000, topics=[{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 5}, {"partition_index": 1, "offset": -1}]}])
    out["delete_records"] = sorted((p.partition_index, p.low_watermark, p.error_code)
                                   for t in r.topics for p in t.partitions)  # Kafka: any order
    r = _call(s, 8, 9, group_id=group, generation_id_or_member_epoch=5, member_id="x",
              group_instance_id=None, topics=[{"name": topic, "partitions": [
                  {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                   "committed_metadata": ""}]}])
    out["commit_unknown_group"] = r.topics[0].partitions[0].error_code
    out["delete_groups"] = [r.error_code for r in _call(s, 42, 2, groups_names=[group]).results]
    r = _call(s, 69, 1, group_ids=[group], include_authorized_operations=False)
    out["cg_describe"] = [(g.error_code, g.error_message and g.error_message.replace(group, "G")) for g in r.groups]
    r = _call(s, 68, 1, group_id=group, member_id="m", member_epoch=3, instance_id=None,
              rack_id=None, rebalance_timeout=30000, subscribed_topic_names=None,
              subscribed_topic_regex=None, server_assignor=None, topic_partitions=None)
    out["heartbeat_unknown"] = r.error_code
    r = _call(s, 44, 1, validate_only=False, resources=[
        {"resource_type": 2, "resource_name": "no-such-parity", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]},
        {"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 2, "value": "1000"}]},
        {"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "86400000"}]}])
    out["incremental_alter_twice"] = [r.error_code for r in r.responses]
    for op in (2, 0):  # APPEND to a config that is not a list; SET
        r = _call(s, 44, 1, validate_only=False, resources=[
            {"resource_type": 2, "resource_name": topic, "configs": [
                {"name": "retention.ms", "config_operation": op, "value": "86400000"}]}])
        out[f"incremental_alter_{op}"] = [r.error_code for r in r.responses]
    r = _call(s, 55, 2, topics=[{"topic_name": "__cluster_metadata",
                                 "partitions": [{"partition_index": 0}]}])
    p = r.topics[0].partitions[0]
    out["quorum"] = (r.error_code, p.error_code, p.leader_id == node,
                     [v.replica_id == node for v in p.current_voters], list(p.observers))
    out.update(_classic_group(s, topic, groups[1]))
    out.update(_consumer_group(s, topic, groups[2]))
    s.close()
    return out


def _commit(s, topic, group, generation, member):
    r = _call(s, 8, 9, group_id=group, generation_id_or_member_epoch=generation, member_id=member,
              group_instance_id=None, topics=[{"name": topic, "partitions": [
                  {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                   "committed_metadata": ""}]}])
    return r.topics[0].partitions[0].error_code


def _classic_group(s, topic, group) -> dict:
    """One classic member: join (MEMBER_ID_REQUIRED first), sync, then stale commits and
    heartbeats, and a commit after leaving."""
    def join(member):
        return _call(s, 11, 9, group_id=group, session_timeout=10000, rebalance_timeout=10000,
                     member_id=member, group_instance_id=None, protocol_type="consumer",
                     protocols=[{"name": "range", "metadata": b""}], reason=None)

    first = join("")
    joined = join(first.member_id)
    gen, me = joined.generation_id, joined.member_id
    synced = _call(s, 14, 5, group_id=group, generation_id=gen, member_id=me,
                   group_instance_id=None, protocol_type="consumer", protocol_name="range",
                   assignments=[{"member_id": me, "assignment": b""}])
    out = {"classic_join": (first.error_code, joined.error_code, synced.error_code),
           "classic_commit_ok": _commit(s, topic, group, gen, me),
           "classic_commit_stale": _commit(s, topic, group, gen - 1, me),
           "classic_commit_stranger": _commit(s, topic, group, gen, "stranger"),
           "classic_commit_simple": _commit(s, topic, group, -1, "")}
    hb = _call(s, 12, 4, group_id=group, generation_id=gen + 1, member_id=me,
               group_instance_id=None)
    out["classic_heartbeat_stale"] = hb.error_code
    left = _call(s, 13, 5, group_id=group, members=[{"member_id": me, "group_instance_id": None,
                                                     "reason": None}])
    out["classic_leave"] = (left.error_code, [m.error_code for m in left.members])
    out["classic_commit_after_leave"] = _commit(s, topic, group, gen, me)
    return out


def _consumer_group(s, topic, group) -> dict:
    """One KIP-848 member: join, stale and fenced epochs, leave."""
    def beat(epoch, topics=None):
        return _call(s, 68, 1, group_id=group, member_id="member-one", member_epoch=epoch,
                     instance_id=None, rack_id=None, rebalance_timeout=30000,
                     subscribed_topic_names=topics, subscribed_topic_regex=None,
                     server_assignor=None, topic_partitions=[] if epoch == 0 else None)

    for _ in range(150):  # a fresh Kafka may still be loading the group's partition
        joined = beat(0, [topic])
        if joined.error_code not in (ErrorCode.coordinator_load_in_progress,
                                     ErrorCode.coordinator_not_available,
                                     ErrorCode.not_coordinator):
            break
        time.sleep(0.2)
    epoch = joined.member_epoch
    return {"k848_join": (joined.error_code, epoch, joined.heartbeat_interval.total_seconds(),
                          sorted(p for tp in joined.assignment.topic_partitions
                                 for p in tp.partitions)),
            "k848_commit_stale": _commit(s, topic, group, epoch - 1, "member-one"),
            "k848_commit_ok": _commit(s, topic, group, epoch, "member-one"),
            "k848_fenced": beat(epoch + 3).error_code,
            "k848_leave": (beat(-1).member_epoch, beat(epoch).error_code)}


def test_admin_and_group_answers_match_kafka(broker):
    ours, theirs = _answers(broker.bootstrap), _answers(PEER)
    # The one deliberate difference: camus forgets groups when it restarts, Kafka does not,
    # so a heartbeat naming a group camus does not know is told to rejoin
    # (UNKNOWN_MEMBER_ID) rather than GROUP_ID_NOT_FOUND, fatal in librdkafka.
    assert theirs.pop("heartbeat_unknown") == ErrorCode.group_id_not_found
    assert ours.pop("heartbeat_unknown") == ErrorCode.unknown_member_id
    assert ours == theirs
