"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848, group.protocol=consumer).

Thin translations onto `shim.consumer_groups.ConsumerGroups`: topics travel by id on the
wire and by name inside. A group id held by a classic group with members is not a
consumer group (GROUP_ID_NOT_FOUND, as Kafka answers when it cannot convert it), and the
reverse holds for JoinGroup (`group_handlers`).
"""

from __future__ import annotations

import logging

from shim.consumer_groups import ASSIGNOR, HEARTBEAT_INTERVAL_MS
from shim.group_coordinator import GroupError
from shim.handlers.cluster import NOT_ASKED, authorized_operations
from shim.protocol import ErrorCode
from shim.security import acl, authorize

log = logging.getLogger("camus.groups")
CONSUMER_MEMBER = 1  # ConsumerGroupDescribe v1 member_type: 0 classic, 1 consumer


def _by_id(ctx, topic_partitions) -> dict | None:
    if topic_partitions is None:
        return None
    out = {}
    for tp in topic_partitions:
        t = ctx.broker.catalog.by_id(tp.topic_id)
        if t is not None:
            out[t.name] = frozenset(tp.partitions)
    return out


def _wire(ctx, assignment: dict) -> dict:
    parts = []
    for name, ps in sorted(assignment.items()):
        t = ctx.broker.catalog.get(name)
        if t is not None:
            parts.append({"topic_id": t.topic_id, "partitions": sorted(ps)})
    return {"topic_partitions": parts}


def handle_consumer_group_heartbeat(ctx, request):
    b, broker = request.body, ctx.broker
    classic = broker.coordinator.groups.get(b.group_id)
    fail = {"member_id": b.member_id, "member_epoch": -1, "heartbeat_interval": 0}
    if classic is not None and classic.members:
        return request.response(error_code=ErrorCode.group_id_not_found, **fail,
                                error_message=f"Group {b.group_id} is not a consumer group.")
    # As Kafka: a name the member may not describe fails the whole heartbeat (nothing about
    # the group changes); a regex is resolved over describable topics only (ConsumerGroups).
    hidden = sorted({name for name in b.subscribed_topic_names or ()
                     if not authorize.topic(ctx, acl.DESCRIBE, name)})
    if hidden:
        return request.response(error_code=ErrorCode.topic_authorization_failed, **fail,
                                error_message=f"Not authorized to describe topics {hidden}.")
    try:
        answer = broker.consumer_groups.heartbeat(
            b.group_id, b.member_id, b.member_epoch, instance_id=b.instance_id,
            rack_id=b.rack_id, rebalance_timeout_ms=int(b.rebalance_timeout.total_seconds() * 1000),
            subscribed=b.subscribed_topic_names, regex=getattr(b, "subscribed_topic_regex", None),
            owned=_by_id(ctx, b.topic_partitions), client_id=request.client_id or "",
            client_host=ctx.client_host, principal=authorize.principal(ctx),
            connection=ctx.connection)
    except GroupError as exc:
        return request.response(error_code=ErrorCode[exc.code_name], error_message=str(exc),
                                **fail)
    assignment = answer["assignment"]
    log.debug("group %s: heartbeat %s epoch %d owned %s -> epoch %d assignment %s", b.group_id,
              b.member_id, b.member_epoch, _by_id(ctx, b.topic_partitions),
              answer["member_epoch"], assignment)
    return request.response(error_code=ErrorCode.none, member_id=answer["member_id"],
                            member_epoch=answer["member_epoch"],
                            heartbeat_interval=HEARTBEAT_INTERVAL_MS,
                            assignment=None if assignment is None else _wire(ctx, assignment))


def _described(ctx, assignment: dict) -> dict:
    return {"topic_partitions": [
        {"topic_id": t.topic_id, "topic_name": name, "partitions": sorted(ps)}
        for name, ps in sorted(assignment.items())
        if (t := ctx.broker.catalog.get(name)) is not None]}


def _not_described(gid: str, code: ErrorCode, message: str, state: str = "",
                   operations: int = NOT_ASKED) -> dict:
    return {"group_id": gid, "error_code": code, "error_message": message, "group_state": state,
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": operations}


def _topics_of(g) -> set[str]:
    """Every topic a group's members subscribe to or are (to be) assigned."""
    return {name for m in g.members.values()
            for name in [*m.subscribed, *m.assigned, *g.target.get(m.member_id, {})]}


def handle_consumer_group_describe(ctx, request):
    asked, out = request.body.include_authorized_operations, []
    for gid in request.body.group_ids:
        if not authorize.group(ctx, acl.DESCRIBE, gid):  # as Kafka: the group, not described
            out.append(_not_described(gid, ErrorCode.group_authorization_failed,
                                      f"no DESCRIBE on group {gid}"))
            continue
        ops = authorized_operations("group", asked, ctx, gid)
        g = ctx.broker.consumer_groups.groups.get(gid)
        if g is None:
            # Kafka's words; the Java admin then describes a classic group by DescribeGroups.
            known = gid in ctx.broker.coordinator.groups or gid in ctx.broker.offsets
            out.append(_not_described(gid, ErrorCode.group_id_not_found,
                                      f"Group {gid} is not a consumer group." if known
                                      else f"Group {gid} not found.", "Dead", ops))
            continue
        if any(not authorize.topic(ctx, acl.DESCRIBE, t) for t in _topics_of(g)):
            # As Kafka 4: a group is not shown to one who may not describe all its topics.
            out.append(_not_described(gid, ErrorCode.topic_authorization_failed,
                                      "The group has subscribed topics that are not authorized."))
            continue
        out.append({"group_id": gid, "error_code": ErrorCode.none, "group_state": g.state,
                    "group_epoch": g.epoch, "assignment_epoch": g.assignment_epoch,
                    "assignor_name": ASSIGNOR, "authorized_operations": ops, "members": [
                        {"member_id": m.member_id, "instance_id": m.instance_id,
                         "rack_id": m.rack_id, "member_epoch": m.epoch, "client_id": m.client_id,
                         "client_host": m.client_host, "subscribed_topic_names": m.subscribed,
                         "subscribed_topic_regex": m.regex,
                         "assignment": _described(ctx, m.assigned),
                         "target_assignment": _described(ctx, g.target.get(m.member_id, {})),
                         "member_type": CONSUMER_MEMBER}
                        for m in g.members.values()]})
    return request.response(groups=out)


HANDLERS = {"ConsumerGroupHeartbeat": handle_consumer_group_heartbeat,
            "ConsumerGroupDescribe": handle_consumer_group_describe}
