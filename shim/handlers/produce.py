"""Produce and InitProducerId.

Each partition's record batches are decompressed (every codec, via `shim.protocol.records`)
and their records validated before any offset is assigned, so a bad batch fails only its
partition; the records are built only if the topic has subscribers (views, group members).
Idempotent batches (producer id >= 0) go through `shim.producers`: a retry gets its
original offset back, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch
INVALID_PRODUCER_EPOCH. Views are read-only (INVALID_TOPIC_EXCEPTION). A batch larger
than the topic's max.message.bytes (Kafka's default, 1048588) fails its partition with
MESSAGE_TOO_LARGE, as Kafka's does. A partition whose files cannot be written (disk full)
answers KAFKA_STORAGE_ERROR and stores nothing (shim/log.py). acks=0 requests
are handled the same way; the server just sends nothing back.
"""

from __future__ import annotations

import logging

from shim.log import StorageError
from shim.producers import Verdict
from shim.protocol import ErrorCode, RecordBatchError, produce
from shim.protocol.records import decode_batches, validate_produce_batch
from shim.security import acl, authorize

log = logging.getLogger("camus.produce")
MAX_REQUEST_RECORDS = 100 << 20


def handle_produce(ctx, request):
    broker = ctx.broker
    if request.body.acks not in (-1, 0, 1):
        return request.error_response(ErrorCode.invalid_required_acks)
    if request.body.transactional_id is not None:
        return request.error_response(produce.TRANSACTIONS_UNSUPPORTED,
                                      "transactions are not implemented")
    by_topic: dict = {}
    for ref, index, raw in produce.partitions(request):
        topic = broker.catalog.resolve(ref)
        answer = {"index": index, "error_code": ErrorCode.none, "base_offset": -1,
                  "log_append_time": -1, "log_start_offset": -1}
        by_topic.setdefault((ref["name"], ref["topic_id"]), []).append(answer)
        if not authorize.topic_ref(ctx, acl.WRITE, topic, ref):
            answer["error_code"] = ErrorCode.topic_authorization_failed
            continue
        if topic is None:
            answer["error_code"] = (ErrorCode.unknown_topic_or_partition if ref["name"]
                                    else ErrorCode.unknown_topic_id)
            continue
        if topic.is_view:
            answer.update(error_code=ErrorCode.invalid_topic_exception,
                          error_message=f"{topic.name!r} is a view of {topic.source!r}: produce there")
            continue
        lg = broker.log_for(topic, index)
        if lg is None:
            answer["error_code"] = ErrorCode.unknown_topic_or_partition
            continue
        try:
            # Validated, records left unbuilt: only a topic someone subscribes to needs them,
            # and the broker builds them then (`batch_records`).
            batches = decode_batches(raw or b"", records=False)
            for b in batches:
                validate_produce_batch(b)
        except RecordBatchError as exc:
            log.warning("produce to %s/%d refused: %s", topic.name, index, exc)
            answer.update(error_code=exc.error_code, error_message=str(exc))
            continue
        if not batches:
            answer.update(error_code=ErrorCode.invalid_record, error_message="no record batch")
            continue
        limit = topic.int_config("max.message.bytes")
        too_large = [b for b in batches if b.batch_length + 12 > limit]
        if too_large:  # as Kafka: the batch as sent (compressed), log overhead included
            answer.update(error_code=ErrorCode.message_too_large,
                          error_message=f"batch of {too_large[0].batch_length + 12} bytes is "
                                        f"larger than max.message.bytes={limit}")
            continue
        answer.update(_append(broker, topic, index, raw, batches))
        answer["log_start_offset"] = lg.start_offset
    return request.response(responses=[
        {"name": name, "topic_id": tid, "partition_responses": parts}
        for (name, tid), parts in by_topic.items()])


def _append(broker, topic, index, raw, batches) -> dict:
    b = batches[0]
    pid, idempotent = b.producer_id, b.producer_id >= 0 and len(batches) == 1
    if idempotent:
        verdict, offset = broker.producers.check(pid, b.producer_epoch, topic.name, index,
                                                 b.base_sequence, b.record_count)
        if verdict == Verdict.DUPLICATE:
            return {"base_offset": offset}
        if verdict == Verdict.FENCED:
            return {"error_code": ErrorCode.invalid_producer_epoch}
        if verdict == Verdict.OUT_OF_ORDER:
            return {"error_code": ErrorCode.out_of_order_sequence_number}
    try:
        base = broker.append(topic, index, raw, batches)
    except StorageError as exc:  # nothing was stored: the client may retry (Kafka's retriable code)
        log.error("produce to %s/%d failed: %s", topic.name, index, exc)
        return {"error_code": ErrorCode.kafka_storage_error, "error_message": str(exc)}
    if idempotent:
        broker.producers.record(pid, b.producer_epoch, topic.name, index, b.base_sequence,
                                b.record_count, base)
    return {"base_offset": base}


def handle_init_producer_id(ctx, request):
    body = request.body
    if not (authorize.transactional_id(ctx, acl.WRITE, body.transactional_id)
            if body.transactional_id is not None else authorize.may_write_idempotently(ctx)):
        return request.response(error_code=ErrorCode.transactional_id_authorization_failed
                                if body.transactional_id is not None
                                else ErrorCode.cluster_authorization_failed,
                                producer_id=-1, producer_epoch=-1)
    if body.transactional_id is not None:
        return request.response(error_code=produce.TRANSACTIONS_UNSUPPORTED, producer_id=-1,
                                producer_epoch=-1)
    pid, epoch = ctx.broker.producers.init(getattr(body, "producer_id", -1),
                                           getattr(body, "producer_epoch", -1))
    return request.response(error_code=ErrorCode.none, producer_id=pid, producer_epoch=epoch)


HANDLERS = {"Produce": handle_produce, "InitProducerId": handle_init_producer_id}
