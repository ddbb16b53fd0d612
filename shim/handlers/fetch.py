"""Fetch (long-poll) and ListOffsets.

Fetch reads whole batches from each partition's log (a view's own log for views,
with source offsets and gaps) from the batch holding the fetch offset, at least one
batch per partition even past max_bytes. As on a compacted topic, any offset from the log
start offset to the high watermark is valid, even inside a view's gap (the next batches
answer, or none); only offsets outside that range are OFFSET_OUT_OF_RANGE. A read that
reaches a view's tail of filtered-out records ends in a gap batch that carries the client to
the high watermark (`shim.log.gap_batch`). When the
answer holds fewer than min_bytes it waits for any log to grow, at most max_wait, and
reads again. With isolation_level read_committed a read stops at the last stable offset
and lists the aborted transactions it covers, which clients skip (shim/txn_log.py);
ListOffsets' latest is then the last stable offset too. The broker's fetch.max.bytes
(Kafka's default, 55 MiB) caps max_bytes. Fetch
sessions (KIP-227, `shim.fetch_sessions`): a full Fetch opens one, later incremental
Fetches read the session's partitions and are answered only with those that changed.
"""

from __future__ import annotations

import asyncio
import time

from shim.fetch_sessions import FINAL_EPOCH, FetchSessions, Plan
from shim.protocol import ErrorCode, fetch, offsets
from shim.protocol.entities import topic_ref

READ_COMMITTED = 1  # isolation_level: only below the last stable offset, aborted ones listed


def _plan(ctx, request) -> Plan:
    """Which partitions this Fetch reads: its own, or its session's (KIP-227)."""
    body = request.body
    forgotten = [(topic_ref(t), t.partitions) for t in getattr(body, "forgotten_topics_data", ())]
    return ctx.broker.fetch_sessions.open(
        getattr(body, "session_id", 0), getattr(body, "session_epoch", FINAL_EPOCH),
        request.api_version >= 13, list(fetch.partitions(request)), forgotten)


def _read(ctx, request, budget: int, items=None) -> tuple[list, int]:
    broker, topics, total = ctx.broker, {}, 0
    committed = getattr(request.body, "isolation_level", 0) == READ_COMMITTED
    for ref, p in fetch.partitions(request) if items is None else items:
        topic = broker.catalog.resolve(ref)
        entry = {"partition_index": p.partition, "error_code": ErrorCode.none,
                 "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                 "preferred_read_replica": -1, "records": b"", "aborted_transactions": None}
        key = (ref["name"], ref["topic_id"])
        topics.setdefault(key, {**ref, "partitions": []})["partitions"].append(entry)
        lg = broker.log_for(topic, p.partition) if topic else None
        if lg is None:
            entry["error_code"] = (ErrorCode.unknown_topic_id if topic is None and not ref["name"]
                                   else ErrorCode.unknown_topic_or_partition)
            continue
        if topic and not ref["name"]:
            topics[key]["name"] = topics[key]["topic"] = topic.name
        hw = lg.next_offset
        lso = lg.txns.last_stable_offset(hw)
        entry.update(high_watermark=hw, last_stable_offset=lso, log_start_offset=lg.start_offset)
        if p.fetch_offset < lg.start_offset or p.fetch_offset > hw:
            entry["error_code"] = ErrorCode.offset_out_of_range
            continue
        data = lg.read(p.fetch_offset, min(p.partition_max_bytes, max(budget - total, 1)),
                       upto=lso if committed else None)
        if committed:
            entry["aborted_transactions"] = lg.txns.aborted_between(p.fetch_offset, lso)
        entry["records"] = data  # b"" rather than null: librdkafka rejects a null record set
        total += len(data)
    return list(topics.values()), total


async def handle_fetch(ctx, request):
    body = request.body
    plan = _plan(ctx, request)
    if plan.error:
        return request.response(responses=[], session_id=0, error_code=plan.error)
    deadline = time.monotonic() + fetch.max_wait_ms(request) / 1000
    while True:
        # fetch.max.bytes caps the answer (and so each partition's share), whatever was asked.
        responses, size = _read(ctx, request, min(body.max_bytes,
                                                  ctx.broker.config.limits.fetch_max_bytes),
                                plan.items)
        left = deadline - time.monotonic()
        errors = any(p["error_code"] for t in responses for p in t["partitions"])
        if size >= max(body.min_bytes, 1) or errors or left <= 0:
            for t in responses:
                if ctx.broker.catalog.get(t["name"]) is not None:
                    ctx.broker.count(t["name"], bytes_out=sum(len(p["records"])
                                                              for p in t["partitions"]))
            return request.response(responses=FetchSessions.answered(plan, responses),
                                    session_id=plan.session_id, error_code=ErrorCode.none)
        await ctx.broker.wait_for_data(left)


def handle_list_offsets(ctx, request):
    broker, topics = ctx.broker, {}
    for ref, p in offsets.list_offsets_partitions(request):
        topic = broker.catalog.resolve(ref)
        entry = {"partition_index": p.partition_index, "error_code": ErrorCode.none,
                 "timestamp": -1, "offset": -1, "leader_epoch": 0}
        topics.setdefault(ref["name"], {**ref, "partitions": []})["partitions"].append(entry)
        lg = broker.log_for(topic, p.partition_index) if topic else None
        if lg is None:
            entry["error_code"] = ErrorCode.unknown_topic_or_partition
        elif p.timestamp == offsets.LATEST:
            entry["offset"] = lg.next_offset
            if getattr(request.body, "isolation_level", 0) == READ_COMMITTED:
                entry["offset"] = lg.txns.last_stable_offset(lg.next_offset)
        elif p.timestamp in (offsets.EARLIEST, offsets.EARLIEST_LOCAL):
            entry["offset"] = lg.start_offset
        elif p.timestamp in (offsets.LATEST_TIERED, offsets.EARLIEST_PENDING_UPLOAD):
            pass  # no tiered storage: offset -1, as Kafka answers without remote storage
        elif p.timestamp == offsets.MAX_TIMESTAMP:
            entry["offset"], entry["timestamp"] = lg.max_timestamp()
        elif p.timestamp >= 0:
            found = lg.offset_for_time(p.timestamp)
            if found is not None:
                entry["offset"], entry["timestamp"] = found
        else:
            entry["error_code"] = ErrorCode.unsupported_version
    return request.response(topics=list(topics.values()))


HANDLERS = {"Fetch": handle_fetch, "ListOffsets": handle_list_offsets}
