"""AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeProducers,
DescribeTransactions, ListTransactions: thin translations onto
`shim.transactions.TransactionCoordinator` (InitProducerId with a transactional id is in
`produce`, next to the idempotent one). This broker coordinates every transactional id.
"""

from __future__ import annotations

import logging

from shim.client_regex import InvalidRegex
from shim.log import StorageError
from shim.protocol import ErrorCode, transactions
from shim.security import acl, authorize
from shim.transactions import STATES, TxnError

log = logging.getLogger("camus.transactions")


def error_code(exc: TxnError, api_name: str, version: int) -> ErrorCode:
    if exc.code == "producer_fenced":
        return transactions.fenced_code(api_name, version)
    return ErrorCode[exc.code]


def _run(api_name: str, request, action) -> ErrorCode:
    """`action()`, its refusal as the error code this API and version answer."""
    try:
        action()
    except TxnError as exc:
        return error_code(exc, api_name, request.api_version)
    except StorageError as exc:  # a marker not written: prepared, retried by the tick
        log.error("%s: %s", api_name, exc)
        return ErrorCode.kafka_storage_error
    return ErrorCode.none


def handle_add_partitions(ctx, request):
    broker, results = ctx.broker, []
    v4 = request.api_version >= 4
    if v4 and not authorize.cluster(ctx, acl.CLUSTER_ACTION):  # Kafka: v4+ is broker-to-broker
        return request.error_response(ErrorCode.cluster_authorization_failed)
    for txn_id, pid, epoch, verify_only, topics in transactions.add_partitions_transactions(request):
        codes: dict = {}
        wanted = []
        may_write = v4 or authorize.transactional_id(ctx, acl.WRITE, txn_id)
        for name, parts in topics:
            t = broker.catalog.get(name)
            for p in parts:
                ok = t is not None and not t.is_view and broker.log_for(t, p) is not None
                if not may_write:
                    code = ErrorCode.transactional_id_authorization_failed
                elif not authorize.topic(ctx, acl.WRITE, name):  # before existence, as Kafka
                    code = ErrorCode.topic_authorization_failed
                else:
                    code = ErrorCode.none if ok else ErrorCode.unknown_topic_or_partition
                codes.setdefault(name, {})[p] = code
                wanted.append((name, p))
        bad = any(c for parts in codes.values() for c in parts.values())
        if bad:  # as Kafka: the others are not added, and say why (all refused for the id)
            for parts in codes.values():
                for p, c in parts.items():
                    if not c:
                        parts[p] = ErrorCode.operation_not_attempted
        elif verify_only:
            try:
                missing = broker.transactions.verify_partitions(txn_id, pid, epoch, wanted)
                for name, p in missing:
                    codes[name][p] = ErrorCode.invalid_txn_state
            except TxnError as exc:
                code = error_code(exc, "AddPartitionsToTxn", request.api_version)
                codes = {n: {p: code for p in parts} for n, parts in codes.items()}
        else:
            code = _run("AddPartitionsToTxn", request, lambda: broker.transactions.add_partitions(
                txn_id, pid, epoch, wanted))
            codes = {n: {p: code for p in parts} for n, parts in codes.items()}
        results.append((txn_id, codes))
    return transactions.add_partitions_response(request, results)


def handle_add_offsets(ctx, request):
    b = request.body
    if not authorize.transactional_id(ctx, acl.WRITE, b.transactional_id):
        return request.response(error_code=ErrorCode.transactional_id_authorization_failed)
    if not authorize.group(ctx, acl.READ, b.group_id):
        return request.response(error_code=ErrorCode.group_authorization_failed)
    code = _run("AddOffsetsToTxn", request, lambda: ctx.broker.transactions.add_offsets(
        b.transactional_id, b.producer_id, b.producer_epoch, b.group_id))
    return request.response(error_code=code)


def handle_end_txn(ctx, request):
    b = request.body
    if not authorize.transactional_id(ctx, acl.WRITE, b.transactional_id):
        return request.error_response(ErrorCode.transactional_id_authorization_failed)
    code = _run("EndTxn", request, lambda: ctx.broker.transactions.end(
        b.transactional_id, b.producer_id, b.producer_epoch, b.committed))
    return request.response(error_code=code, producer_id=-1, producer_epoch=-1)


def handle_txn_offset_commit(ctx, request):
    broker, b = ctx.broker, request.body
    # As Kafka: WRITE on the transactional id, then READ on the group, refuse the whole
    # request; READ on a topic refuses only its partitions, the others are committed.
    if not authorize.transactional_id(ctx, acl.WRITE, b.transactional_id):
        return request.error_response(ErrorCode.transactional_id_authorization_failed)
    if not authorize.group(ctx, acl.READ, b.group_id):
        return request.error_response(ErrorCode.group_authorization_failed)
    offsets, topics = {}, []
    for t in b.topics:
        topic = broker.catalog.get(t.name)
        count = broker.catalog.partitions_of(topic) if topic is not None else 0
        may_read = authorize.topic(ctx, acl.READ, t.name)
        parts = []
        for p in t.partitions:
            known = may_read and 0 <= p.partition_index < count
            if known:
                offsets[(topic.name, p.partition_index)] = (
                    p.committed_offset, p.committed_metadata or "",
                    getattr(p, "committed_leader_epoch", -1))  # v2+
            parts.append({"partition_index": p.partition_index,
                          "error_code": ErrorCode.none if known
                          else ErrorCode.unknown_topic_or_partition if may_read
                          else ErrorCode.topic_authorization_failed})
        topics.append({"name": t.name, "partitions": parts})
    code = _group_error(ctx, b)
    if code == ErrorCode.none:
        code = _run("TxnOffsetCommit", request, lambda: broker.transactions.commit_offsets(
            b.transactional_id, b.producer_id, b.producer_epoch, b.group_id, offsets))
    if code != ErrorCode.none:
        for t in topics:
            for p in t["partitions"]:
                if p["error_code"] == ErrorCode.none:
                    p["error_code"] = code
    return request.response(topics=topics)


def _group_error(ctx, body) -> ErrorCode:
    """v3+: a member of a live group commits only with its current generation (KIP-447, so a
    zombie that lost its partitions cannot commit them); -1 / "" skip the check."""
    generation = getattr(body, "generation_id", -1)
    member_id = getattr(body, "member_id", "") or ""
    g = ctx.broker.coordinator.groups.get(body.group_id)
    if g is None or generation < 0 and not member_id:
        return ErrorCode.none
    if member_id and member_id not in g.members:
        return ErrorCode.unknown_member_id
    if generation >= 0 and generation != g.generation:
        return ErrorCode.illegal_generation
    return ErrorCode.none


def handle_describe_producers(ctx, request):
    broker, topics = ctx.broker, []
    for t in request.body.topics:
        topic = broker.catalog.get(t.name)
        may_read = authorize.topic(ctx, acl.READ, t.name)  # as Kafka: before existence
        parts = []
        for p in t.partition_indexes:
            lg = broker.log_for(topic, p) if topic is not None else None
            if not may_read:
                parts.append({"partition_index": p, "error_code": ErrorCode.topic_authorization_failed,
                              "error_message": None, "active_producers": []})
                continue
            if lg is None:
                parts.append({"partition_index": p, "error_code": ErrorCode.unknown_topic_or_partition,
                              "error_message": None, "active_producers": []})
                continue
            active = [{"producer_id": pid, "producer_epoch": st.epoch,
                       "last_sequence": st.batches[-1][1] if st.batches else -1,
                       "last_timestamp": st.last_timestamp, "coordinator_epoch": 0,
                       "current_txn_start_offset": lg.txns.open.get(pid, -1)}
                      for (pid, name, q), st in broker.producers.state.items()
                      if name == topic.name and q == p]
            parts.append({"partition_index": p, "error_code": ErrorCode.none,
                          "error_message": None, "active_producers": active})
        topics.append({"name": t.name, "partitions": parts})
    return request.response(topics=topics)


def _partitions_by_topic(partitions) -> list[dict]:
    by_topic: dict = {}
    for name, p in sorted(partitions):
        by_topic.setdefault(name, []).append(p)
    return [{"topic": name, "partitions": parts} for name, parts in by_topic.items()]


def handle_describe_transactions(ctx, request):
    out = []
    for txn_id in request.body.transactional_ids:
        t = ctx.broker.transactions.txns.get(txn_id)
        refused = not authorize.transactional_id(ctx, acl.DESCRIBE, txn_id)
        if t is None or refused:  # as Kafka: refused whether or not it exists
            out.append({"error_code": ErrorCode.transactional_id_authorization_failed if refused
                        else ErrorCode.transactional_id_not_found,
                        "transactional_id": txn_id, "transaction_state": "",
                        "transaction_timeout": 0, "transaction_start_time": -1,
                        "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        out.append({"error_code": ErrorCode.none, "transactional_id": txn_id,
                    "transaction_state": t.state, "transaction_timeout": t.timeout_ms,
                    "transaction_start_time": t.started_ms, "producer_id": t.producer_id,
                    "producer_epoch": t.epoch, "topics": _partitions_by_topic(
                        # as Kafka: only the partitions of topics it may describe
                        (name, p) for name, p in t.partitions
                        if authorize.topic(ctx, acl.DESCRIBE, name))})
    return request.response(transaction_states=out)


def handle_list_transactions(ctx, request):
    b = request.body
    states = set(b.state_filters)
    unknown = sorted(states - set(STATES))
    try:
        found = ctx.broker.transactions.listing(
            states, set(b.producer_id_filters), getattr(b, "duration_filter", -1),
            getattr(b, "transactional_id_pattern", None))
    except InvalidRegex as exc:  # as Kafka: a pattern RE2/J does not take
        return request.response(error_code=ErrorCode.invalid_regular_expression,
                                unknown_state_filters=unknown,
                                transaction_states=[], error_message=str(exc))
    return request.response(error_code=ErrorCode.none, unknown_state_filters=unknown,
                            transaction_states=[{"transactional_id": t.transactional_id,
                                                 "producer_id": t.producer_id,
                                                 "transaction_state": t.state} for t in found
                                                # as Kafka: only the ids it may describe
                                                if authorize.transactional_id(
                                                    ctx, acl.DESCRIBE, t.transactional_id)])


HANDLERS = {
    "AddPartitionsToTxn": handle_add_partitions,
    "AddOffsetsToTxn": handle_add_offsets,
    "EndTxn": handle_end_txn,
    "TxnOffsetCommit": handle_txn_offset_commit,
    "DescribeProducers": handle_describe_producers,
    "DescribeTransactions": handle_describe_transactions,
    "ListTransactions": handle_list_transactions,
}
