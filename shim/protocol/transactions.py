"""Transactions (KIP-98): AddPartitionsToTxn (24) 0-5, AddOffsetsToTxn (25) 0-4, EndTxn
(26) 0-5, TxnOffsetCommit (28) 0-5, and the admin side: DescribeProducers (61) 0,
DescribeTransactions (65) 0, ListTransactions (66) 0-2. The ranges are Kafka 4.3's.

AddPartitionsToTxn: v0-3 one transaction (`v3_and_below_*` fields, per-partition errors);
v3 flexible; v4+ a batch of `transactions` each with verify_only (Kafka's brokers use it
to ask the coordinator; camus answers it the same way). AddOffsetsToTxn, EndTxn: v3
flexible; v4 PRODUCER_FENCED may be answered; EndTxn v5 echoes producer id and epoch
(transactions v2, KIP-890, which clients use only when the broker finalizes the
`transaction.version` feature; camus advertises no features, so clients stay on v1).
TxnOffsetCommit: v3 flexible, adds generation_id / member_id / group_instance_id; v4-5
same layout. Older versions than those adding PRODUCER_FENCED get INVALID_PRODUCER_EPOCH
instead (`fenced_code`), as Kafka answers them.

ListTransactions: v1 duration_filter; v2 transactional_id_pattern (a regular expression).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .connection import Request
from .errors import ErrorCode
from .registry import REGISTRY, Api

# The first version of each API whose clients know PRODUCER_FENCED (90).
_FENCED_FROM = {"AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2,
                "TxnOffsetCommit": 3, "InitProducerId": 4}


def fenced_code(api_name: str, version: int) -> ErrorCode:
    """PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for a version that predates it."""
    if version >= _FENCED_FROM.get(api_name, 0):
        return ErrorCode.producer_fenced
    return ErrorCode.invalid_producer_epoch


def add_partitions_transactions(request: Request) -> Iterator[tuple[str, int, int, bool, list]]:
    """(transactional id, producer id, epoch, verify_only, [(topic, [partitions])]) per
    transaction of an AddPartitionsToTxn at any version."""
    b = request.body
    if request.api_version >= 4:
        for t in b.transactions:
            yield (t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only,
                   [(x.name, list(x.partitions)) for x in t.topics])
    else:
        yield (b.v3_and_below_transactional_id, b.v3_and_below_producer_id,
               b.v3_and_below_producer_epoch, False,
               [(x.name, list(x.partitions)) for x in b.v3_and_below_topics])


def add_partitions_response(request: Request, results: list[tuple[str, dict]],
                            top: ErrorCode = ErrorCode.none) -> Any:
    """`results`: (transactional id, {topic: {partition: error code}}) per transaction."""
    def topics(by_topic: dict) -> list[dict]:
        return [{"name": name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": code} for p, code in parts.items()]}
            for name, parts in by_topic.items()]
    if request.api_version >= 4:
        return request.response(error_code=top, results_by_transaction=[
            {"transactional_id": tid, "topic_results": topics(by_topic)}
            for tid, by_topic in results])
    return request.response(results_by_topic_v3_and_below=topics(results[0][1]))


def _add_partitions_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    def topics(ts: Any) -> list[dict]:
        return [{"name": t.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": code} for p in t.partitions]}
            for t in ts]
    if version >= 4:
        return {"error_code": code, "results_by_transaction": [
            {"transactional_id": t.transactional_id, "topic_results": topics(t.topics)}
            for t in body.transactions]}
    return {"results_by_topic_v3_and_below": topics(body.v3_and_below_topics)}


def _top_level_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}


def _txn_offset_commit_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]}
        for t in body.topics]}


def _describe_producers_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p, "error_code": code, "error_message": message,
         "active_producers": []} for p in t.partition_indexes]} for t in body.topics]}


def _describe_transactions_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    # Start time 0, not Kafka's -1: kio (and so our own tests' decoder) refuses negative
    # timestamps, and an error entry describes no transaction whose start could matter.
    return {"transaction_states": [
        {"error_code": code, "transactional_id": t, "transaction_state": "",
         "transaction_timeout": 0, "transaction_start_time": 0, "producer_id": -1,
         "producer_epoch": -1, "topics": []} for t in body.transactional_ids]}


def _list_transactions_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "unknown_state_filters": [], "transaction_states": []}


ADD_PARTITIONS_TO_TXN = REGISTRY.register(Api(24, "AddPartitionsToTxn", 0, 5, _add_partitions_error))
ADD_OFFSETS_TO_TXN = REGISTRY.register(Api(25, "AddOffsetsToTxn", 0, 4, _top_level_error))
END_TXN = REGISTRY.register(Api(26, "EndTxn", 0, 5, _top_level_error))
TXN_OFFSET_COMMIT = REGISTRY.register(Api(28, "TxnOffsetCommit", 0, 5, _txn_offset_commit_error))
DESCRIBE_PRODUCERS = REGISTRY.register(Api(61, "DescribeProducers", 0, 0, _describe_producers_error))
DESCRIBE_TRANSACTIONS = REGISTRY.register(Api(65, "DescribeTransactions", 0, 0, _describe_transactions_error))
LIST_TRANSACTIONS = REGISTRY.register(Api(66, "ListTransactions", 0, 2, _list_transactions_error))
