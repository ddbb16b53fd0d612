"""Produce and InitProducerId.

Each partition's record batches are decompressed (every codec, via `shim.protocol.records`)
and their records validated before any offset is assigned, so a bad batch fails only its
partition; the records are built only if the topic has subscribers (views, group members).
Idempotent batches (producer id >= 0) go through `shim.producers`: a retry gets its
original offset back, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch
INVALID_PRODUCER_EPOCH. A transactional producer's batches (transactional_id set, which
needs WRITE on that id) append only to partitions of its open transaction, under that id's
producer id and current epoch; that producer id is refused in batches without its
transactional id (`_txn_refusal`), so no one who may merely write the topic can take over
another's sequence numbers or slip a record into another's transaction.
A compacted topic refuses a batch holding a record without a key (INVALID_RECORD), naming
each such record in record_errors (KIP-467, Produce v8+).
Views are read-only (INVALID_TOPIC_EXCEPTION). A batch larger
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
from shim.protocol.records import batch_records, decode_batches, validate_produce_batch
from shim.transactions import TxnError
from shim.handlers.transactions import error_code
from shim.security import acl, authorize

log = logging.getLogger("camus.produce")
MAX_REQUEST_RECORDS = 100 << 20


def handle_produce(ctx, request):
    broker = ctx.broker
    if request.body.acks not in (-1, 0, 1):
        return request.error_response(ErrorCode.invalid_required_acks)
    txn_id = request.body.transactional_id
    if txn_id is not None and not authorize.transactional_id(ctx, acl.WRITE, txn_id):
        # As Kafka's KafkaApis: WRITE on the transactional id, for the whole request; else
        # anyone who may write the topic could append to another principal's transaction.
        return request.error_response(ErrorCode.transactional_id_authorization_failed)
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
        if topic.compacted:
            keyless = _keyless_records(batches, topic.name, index)
            if keyless:
                answer.update(keyless)
                continue
        limit = topic.int_config("max.message.bytes")
        too_large = [b for b in batches if b.batch_length + 12 > limit]
        if too_large:  # as Kafka: the batch as sent (compressed), log overhead included
            answer.update(error_code=ErrorCode.message_too_large,
                          error_message=f"batch of {too_large[0].batch_length + 12} bytes is "
                                        f"larger than max.message.bytes={limit}")
            continue
        refused = _txn_refusal(broker, txn_id, topic, index, batches)
        if refused is not None:
            answer.update(error_code=refused[0], error_message=refused[1])
            continue
        answer.update(_append(broker, topic, index, raw, batches))
        answer["log_start_offset"] = lg.start_offset
    return request.response(responses=[
        {"name": name, "topic_id": tid, "partition_responses": parts}
        for (name, tid), parts in by_topic.items()])


def _keyless_records(batches, topic: str, index: int) -> dict | None:
    """The answer refusing a compacted topic's batch for its records without a key, or None.

    As Kafka's LogValidator (KIP-467): the whole batch fails with INVALID_RECORD, and
    record_errors (Produce v8+) names each keyless record by its index in its batch, so a
    client can tell the records at fault from the ones that only failed with them
    (librdkafka reports those as its local _INVALID_DIFFERENT_RECORD)."""
    total = 0
    errors = []
    for b in batches:
        for i, r in enumerate(batch_records(b)):
            if r.key is None:
                errors.append({"batch_index": i, "batch_index_error_message":
                               f"record {i} has no key: compacted topic {topic}/{index} "
                               "keeps records by key"})
        total += b.record_count
    if not errors:
        return None
    return {"error_code": ErrorCode.invalid_record, "record_errors": errors,
            "error_message": f"{len(errors)} of the batch's {total} records have no key, "
                             f"which compacted topic {topic!r} requires (record_errors names "
                             "them); nothing of the batch was stored"}


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
                                b.record_count, base, b.max_timestamp)
    return {"base_offset": base}


def _txn_refusal(broker, txn_id, topic, index, batches) -> tuple[ErrorCode, str] | None:
    """Why a transactional produce may not append (None: it may), as Kafka's partition
    leader checks with the coordinator: the producer's current epoch, a partition added to
    its open transaction (AddPartitionsToTxn), transactional batches under a transactional
    id and only there."""
    b = batches[0]
    if txn_id is None:
        if any(x.is_transactional for x in batches):
            return ErrorCode.invalid_txn_state, "transactional batch without a transactional id"
        if b.producer_id >= 0 and broker.transactions.owner(b.producer_id) is not None:
            # A transactional producer's id used without its transactional id: as an
            # idempotent batch it would take the producer's next sequence numbers, and the
            # producer's own next batch would be acknowledged as a duplicate, never stored.
            return (ErrorCode.invalid_txn_state,
                    f"producer id {b.producer_id} is a transactional producer's: its batches "
                    "are transactional and carry its transactional id")
        return None
    if not all(x.is_transactional and x.producer_id == b.producer_id for x in batches):
        return ErrorCode.invalid_record, "a transactional producer's batches are transactional"
    try:
        missing = broker.transactions.verify_partitions(txn_id, b.producer_id, b.producer_epoch,
                                                        [(topic.name, index)])
    except TxnError as exc:  # Produce answers fencing with INVALID_PRODUCER_EPOCH, as Kafka
        code = ErrorCode.invalid_producer_epoch if exc.code == "producer_fenced" else ErrorCode[exc.code]
        return code, str(exc)
    if missing:
        return ErrorCode.invalid_txn_state, f"{topic.name}/{index} is not in the transaction"
    return None


def handle_init_producer_id(ctx, request):
    body = request.body
    if not (authorize.transactional_id(ctx, acl.WRITE, body.transactional_id)
            if body.transactional_id is not None else authorize.may_write_idempotently(ctx)):
        return request.response(error_code=ErrorCode.transactional_id_authorization_failed
                                if body.transactional_id is not None
                                else ErrorCode.cluster_authorization_failed,
                                producer_id=-1, producer_epoch=-1)
    if body.transactional_id is not None:
        try:
            pid, epoch = ctx.broker.transactions.init_producer(
                body.transactional_id, int(body.transaction_timeout.total_seconds() * 1000),
                getattr(body, "producer_id", -1), getattr(body, "producer_epoch", -1))
        except TxnError as exc:
            return request.response(error_code=error_code(exc, "InitProducerId", request.api_version),
                                    producer_id=-1, producer_epoch=-1)
        except StorageError as exc:  # aborting the old instance's transaction failed
            log.error("InitProducerId: %s", exc)
            return request.response(error_code=ErrorCode.concurrent_transactions, producer_id=-1,
                                    producer_epoch=-1)
        return request.response(error_code=ErrorCode.none, producer_id=pid, producer_epoch=epoch)
    pid = getattr(body, "producer_id", -1)
    if ctx.broker.transactions.owner(pid) is not None:
        pid = -1  # a transactional producer's id is not bumped for anyone else: a new one
    pid, epoch = ctx.broker.producers.init(pid, getattr(body, "producer_epoch", -1))
    return request.response(error_code=ErrorCode.none, producer_id=pid, producer_epoch=epoch)


HANDLERS = {"Produce": handle_produce, "InitProducerId": handle_init_producer_id}
