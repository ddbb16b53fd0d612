"""OffsetCommit and OffsetFetch: committed offsets per group, persisted in the data dir.

Each commit keeps its offset, metadata and committed leader epoch (OffsetCommit v6+,
TxnOffsetCommit v2+), and OffsetFetch v5+ answers that epoch back, as Kafka does (clients
use it to detect log truncation after a leader change); -1 where none was sent.

A commit from a member is checked against the group's generation as Kafka checks it
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID; REBALANCE_IN_PROGRESS only while the group is
CompletingRebalance); a commit with generation -1 comes from a client outside group
management and is accepted when the group is empty, as Kafka accepts it.
"""

from __future__ import annotations

from shim.group_coordinator import COMPLETING, EMPTY
from shim.protocol import ErrorCode, offsets
from shim.protocol.entities import topic_ref
from shim.security import acl, authorize

# Kafka's offset.metadata.max.bytes default; Kafka compares it with the metadata string's length.
MAX_METADATA_CHARS = 4096


def _commit_error(ctx, body) -> ErrorCode:
    # As Kafka's ClassicGroup.validateOffsetCommit: a member of the current generation may
    # commit while the group is PreparingRebalance (consumers commit what they processed
    # as they give their partitions up; refusing loses those commits and redelivers the
    # records); only CompletingRebalance answers REBALANCE_IN_PROGRESS.
    generation = getattr(body, "generation_id_or_member_epoch", -1)
    member_id = getattr(body, "member_id", "") or ""
    if body.group_id in ctx.broker.consumer_groups.groups:  # a KIP-848 group: member epochs
        error = ctx.broker.consumer_groups.commit_error(body.group_id, member_id, generation)
        return ErrorCode[error] if error else ErrorCode.none
    g = ctx.broker.coordinator.groups.get(body.group_id)
    empty = g is None or g.state == EMPTY
    if generation < 0 and empty:
        return ErrorCode.none  # the admin client, or a consumer outside group management
    if generation >= 0 and g is None and body.group_id not in ctx.broker.offsets:
        return ErrorCode.group_id_not_found  # as Kafka 4.3.1: no such group to be a member of
    if generation >= 0 or member_id:
        if g is None or member_id not in g.members:
            error = ctx.broker.coordinator.unknown_member_error(
                g, member_id, getattr(body, "group_instance_id", None))
            return ErrorCode[error.code_name]
        if generation != g.generation:
            return ErrorCode.illegal_generation
    elif not empty:
        return ErrorCode.unknown_member_id
    if g.state == COMPLETING:
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def handle_offset_commit(ctx, request):
    broker, body = ctx.broker, request.body
    code = _commit_error(ctx, body)
    topics = []
    for t in body.topics:
        ref = topic_ref(t)
        topic = broker.catalog.resolve(ref)
        parts = []
        count = broker.catalog.partitions_of(topic) if topic is not None else 0
        for p in t.partitions:
            # Kafka's order: a partition the broker does not have is refused before the
            # group is looked at (KafkaApis filters it out), then the group's verdict, then
            # the metadata size (offset.metadata.max.bytes).
            if not authorize.topic_ref(ctx, acl.READ, topic, ref):
                c = ErrorCode.topic_authorization_failed
            elif topic is None:
                c = ErrorCode.unknown_topic_or_partition if ref["name"] else ErrorCode.unknown_topic_id
            elif not 0 <= p.partition_index < count:
                c = ErrorCode.unknown_topic_or_partition
            elif code != ErrorCode.none:
                c = code
            elif len(p.committed_metadata or "") > MAX_METADATA_CHARS:
                c = ErrorCode.offset_metadata_too_large
            else:
                c = ErrorCode.none
            if c == ErrorCode.none:
                broker.commit(body.group_id, topic.name, p.partition_index, p.committed_offset,
                              p.committed_metadata, getattr(p, "committed_leader_epoch", -1))
            parts.append({"partition_index": p.partition_index, "error_code": c})
        topics.append({**ref, "partitions": parts})
    broker.save_offsets()
    return request.response(topics=topics)


def handle_offset_fetch(ctx, request):
    broker, out = ctx.broker, []
    members = ({g.group_id: (g.member_id, g.member_epoch) for g in request.body.groups}
               if request.api_version >= 9 else {})
    for gid, wanted in offsets.fetch_groups(request):
        if not authorize.group(ctx, acl.DESCRIBE, gid):  # v8+ (before, refused whole)
            out.append({"group_id": gid, "error_code": ErrorCode.group_authorization_failed,
                        "topics": []})
            continue
        member_id, epoch = members.get(gid, ("", -1))
        if epoch >= 0 and gid in broker.consumer_groups.groups:  # a KIP-848 member asks
            error = broker.consumer_groups.commit_error(gid, member_id, epoch)
            if error:
                out.append({"group_id": gid, "error_code": ErrorCode[error], "topics": []})
                continue
        committed = broker.offsets.get(gid, {})
        # require_stable (v7+): an offset an open transaction will commit is not answered yet
        # (UNSTABLE_OFFSET_COMMIT, which clients retry), as Kafka.
        pending = (broker.transactions.pending_offsets(gid)
                   if getattr(request.body, "require_stable", False) else set())
        if wanted is None:  # every committed topic this principal may describe
            by_topic: dict = {}
            for (name, p) in committed:
                if authorize.topic(ctx, acl.DESCRIBE, name):
                    by_topic.setdefault(name, []).append(p)
            wanted = []
            for name, parts in by_topic.items():
                t = broker.catalog.get(name)
                wanted.append(({"name": name, "topic": name,
                                "topic_id": t.topic_id if t else None}, tuple(sorted(parts))))
        topics = []
        for ref, parts in wanted:
            topic = broker.catalog.resolve(ref)
            name = topic.name if topic else ref["name"]
            entries = []
            may = authorize.topic_ref(ctx, acl.DESCRIBE, topic, ref)
            for p in parts:
                offset, meta, epoch = committed.get((name, p), (-1, "", -1)) if may else (-1, "", -1)
                unstable = may and (name, p) in pending
                entries.append({"partition_index": p, "committed_offset": -1 if unstable else offset,
                                "committed_leader_epoch": -1 if unstable else epoch, "metadata": meta,
                                "error_code": ErrorCode.topic_authorization_failed if not may
                                else ErrorCode.unstable_offset_commit if unstable
                                else ErrorCode.none})
            topics.append({**ref, "partitions": entries})
        out.append({"group_id": gid, "error_code": ErrorCode.none, "topics": topics})
    if request.api_version >= 8:
        return request.response(groups=out)
    return request.response(error_code=ErrorCode.none, topics=out[0]["topics"])


def handle_offset_delete(ctx, request):
    """As Kafka: GROUP_ID_NOT_FOUND for a group it does not know; NON_EMPTY_GROUP for an
    active group whose subscriptions it cannot read; TOPIC_AUTHORIZATION_FAILED for every
    partition of a topic the caller may not READ, whether it exists or not (DELETE on the
    group was checked before the handler); GROUP_SUBSCRIBED_TO_TOPIC for a partition of a
    topic the active group subscribes to; otherwise the offset is gone."""
    broker, body = ctx.broker, request.body
    consumer = broker.consumer_groups.groups.get(body.group_id)
    if (body.group_id not in broker.coordinator.groups and consumer is None
            and body.group_id not in broker.offsets):
        return request.response(error_code=ErrorCode.group_id_not_found, topics=[])
    subscribed = broker.coordinator.subscribed_topics(body.group_id)
    if consumer is not None:
        subscribed = {t for m in consumer.members.values()
                      for t in broker.consumer_groups.topics_of(m)}
    if subscribed is None:
        return request.response(error_code=ErrorCode.non_empty_group, topics=[])
    committed, topics = broker.offsets.get(body.group_id, {}), []
    for t in body.topics:
        topic = broker.catalog.get(t.name)
        may_read, parts = authorize.topic(ctx, acl.READ, t.name), []
        for p in t.partitions:
            if not may_read:
                code = ErrorCode.topic_authorization_failed
            elif topic is None or not 0 <= p.partition_index < broker.catalog.partitions_of(topic):
                code = ErrorCode.unknown_topic_or_partition
            elif t.name in subscribed:
                code = ErrorCode.group_subscribed_to_topic
            else:
                committed.pop((t.name, p.partition_index), None)
                code = ErrorCode.none
            parts.append({"partition_index": p.partition_index, "error_code": code})
        topics.append({"name": t.name, "partitions": parts})
    broker.save_offsets()
    return request.response(error_code=ErrorCode.none, topics=topics)


HANDLERS = {"OffsetCommit": handle_offset_commit, "OffsetFetch": handle_offset_fetch,
            "OffsetDelete": handle_offset_delete}
