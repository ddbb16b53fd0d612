"""Classic consumer groups: FindCoordinator (10) 0-6, JoinGroup (11) 0-9, SyncGroup
(14) 0-5, Heartbeat (12) 0-4, LeaveGroup (13) 0-5, DescribeGroups (15) 0-6,
ListGroups (16) 0-5.

FindCoordinator: v1 key_type (0 group, 1 transactional id: this broker coordinates
both) and error_message; v3 flexible; v4+ a batch of
coordinator_keys answered by a `coordinators` array (kafka-python 3.0 uses it).
`coordinator_keys`/`coordinator_response` hide that split. v5-6: same layout.

JoinGroup: v1 rebalance_timeout; v4 answers MEMBER_ID_REQUIRED to a first join with
an empty member_id (the client rejoins with the id handed back); v5
group_instance_id (static membership); v6 flexible; v7 protocol_type/name in the
response; v8 reason; v9 skip_assignment (KIP-814). JoinGroup and SyncGroup are held
until the rebalance completes.

SyncGroup: v3 group_instance_id; v4 flexible; v5 protocol_type/name.
Heartbeat: v3 group_instance_id; v4 flexible.
LeaveGroup: v0-2 one member_id; v3+ a `members` batch (`leaving_members` hides it);
v4 flexible; v5 per-member reason.
DescribeGroups: v1 throttle_time_ms; v3 authorized_operations; v4
group_instance_id; v5 flexible; v6 per-group error_message.
ListGroups: v3 flexible; v4 states_filter; v5 types_filter (group_type in answers).
DeleteGroups (42) 0-2: v2 flexible. OffsetDelete (47) 0: one group, its committed
offsets for the partitions named.

KIP-848 consumer groups (group.protocol=consumer): ConsumerGroupHeartbeat (68) 0-1,
ConsumerGroupDescribe (69) 0-1. Heartbeat v1: the client makes its own member id (KIP-1082)
and may subscribe by regular expression. Describe v1: member_type (classic or consumer).
"""

from __future__ import annotations

from typing import Any

from .connection import Request
from .errors import ErrorCode
from .registry import REGISTRY, Api

GROUP_KEY, TRANSACTION_KEY = 0, 1


def coordinator_keys(request: Request) -> tuple[int, list[str]]:
    """(key_type, keys) of a FindCoordinator request at any version."""
    body = request.body
    key_type = getattr(body, "key_type", GROUP_KEY)
    if request.api_version >= 4:
        return key_type, list(body.coordinator_keys)
    return key_type, [body.key]


def coordinator_response(request: Request, answers: list[dict[str, Any]]) -> Any:
    """FindCoordinator answer from one dict per key (key, node_id, host, port, error_code).

    Before v4 the response holds a single coordinator: the first answer.
    """
    if request.api_version >= 4:
        return request.response(coordinators=answers)
    return request.response(answers[0])


def leaving_members(request: Request) -> list[tuple[str, str | None]]:
    """(member_id, group_instance_id) of each member a LeaveGroup removes."""
    if request.api_version >= 3:
        return [(m.member_id, m.group_instance_id) for m in request.body.members]
    return [(request.body.member_id, None)]


def _find_coordinator_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    if version >= 4:
        return {
            "coordinators": [
                {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}
                for k in body.coordinator_keys
            ]
        }
    return {"error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}


def _join_group_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "member_id": body.member_id, "leader": "", "protocol_name": ""}


def _top_level_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code}


def _leave_group_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    members = getattr(body, "members", ())
    return {
        "error_code": code,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": code}
            for m in members
        ],
    }


def _describe_groups_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "groups": [
            {"group_id": g, "error_code": code, "error_message": message, "group_state": "", "members": []}
            for g in body.groups
        ]
    }


def _consumer_group_heartbeat_error(body: Any, version: int, code: ErrorCode,
                                    message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "member_id": body.member_id,
            "member_epoch": -1, "heartbeat_interval": 0, "assignment": None}


def _consumer_group_describe_error(body: Any, version: int, code: ErrorCode,
                                   message: str | None) -> dict[str, Any]:
    return {"groups": [{"group_id": g, "error_code": code, "error_message": message,
                        "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                        "assignor_name": "", "members": []} for g in body.group_ids]}


def _delete_groups_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"results": [{"group_id": g, "error_code": code} for g in body.groups_names]}


FIND_COORDINATOR = REGISTRY.register(Api(10, "FindCoordinator", 0, 6, _find_coordinator_error))
JOIN_GROUP = REGISTRY.register(Api(11, "JoinGroup", 0, 9, _join_group_error))
HEARTBEAT = REGISTRY.register(Api(12, "Heartbeat", 0, 4, _top_level_error))
LEAVE_GROUP = REGISTRY.register(Api(13, "LeaveGroup", 0, 5, _leave_group_error))
SYNC_GROUP = REGISTRY.register(Api(14, "SyncGroup", 0, 5, _top_level_error))
DESCRIBE_GROUPS = REGISTRY.register(Api(15, "DescribeGroups", 0, 6, _describe_groups_error))
LIST_GROUPS = REGISTRY.register(Api(16, "ListGroups", 0, 5, _top_level_error))
DELETE_GROUPS = REGISTRY.register(Api(42, "DeleteGroups", 0, 2, _delete_groups_error))
OFFSET_DELETE = REGISTRY.register(Api(47, "OffsetDelete", 0, 0, _top_level_error))
CONSUMER_GROUP_HEARTBEAT = REGISTRY.register(Api(68, "ConsumerGroupHeartbeat", 0, 1, _consumer_group_heartbeat_error))
CONSUMER_GROUP_DESCRIBE = REGISTRY.register(Api(69, "ConsumerGroupDescribe", 0, 1, _consumer_group_describe_error))
