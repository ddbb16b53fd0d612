"""SASL, ACL and SCRAM-user APIs (ranges as Kafka 4.3 advertises them).

- SaslHandshake (17) 0-1: v0 means the tokens then travel as bare frames, v1 that they
  travel in SaslAuthenticate requests.
- SaslAuthenticate (36) 0-2: v1 session_lifetime_ms (KIP-368); v2 flexible.
- DescribeAcls (29), CreateAcls (30), DeleteAcls (31) 1-3: v1 pattern types (KIP-290);
  v2 flexible; v3 the USER resource type.
- DescribeUserScramCredentials (50) 0 and AlterUserScramCredentials (51) 0 (KIP-554).
- DescribeClientQuotas (48) and AlterClientQuotas (49) 0-1: v1 flexible.
"""

from __future__ import annotations

from typing import Any

from .errors import ErrorCode
from .registry import REGISTRY, Api


def _handshake_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "mechanisms": []}


def _authenticate_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": b""}


def _describe_acls_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "resources": []}


def _create_acls_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"results": [{"error_code": code, "error_message": message} for _ in body.creations]}


def _delete_acls_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"filter_results": [{"error_code": code, "error_message": message, "matching_acls": []}
                               for _ in body.filters]}


def _describe_scram_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "results": []}


def _alter_scram_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    names = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return {"results": [{"user": n, "error_code": code, "error_message": message} for n in names]}


def _describe_quotas_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "entries": None}


def _alter_quotas_error(body: Any, version: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"entries": [{"error_code": code, "error_message": message,
                         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                                    for e in entry.entity]} for entry in body.entries]}


SASL_HANDSHAKE = REGISTRY.register(Api(17, "SaslHandshake", 0, 1, _handshake_error))
SASL_AUTHENTICATE = REGISTRY.register(Api(36, "SaslAuthenticate", 0, 2, _authenticate_error))
DESCRIBE_ACLS = REGISTRY.register(Api(29, "DescribeAcls", 1, 3, _describe_acls_error))
CREATE_ACLS = REGISTRY.register(Api(30, "CreateAcls", 1, 3, _create_acls_error))
DELETE_ACLS = REGISTRY.register(Api(31, "DeleteAcls", 1, 3, _delete_acls_error))
DESCRIBE_SCRAM = REGISTRY.register(Api(50, "DescribeUserScramCredentials", 0, 0, _describe_scram_error))
ALTER_SCRAM = REGISTRY.register(Api(51, "AlterUserScramCredentials", 0, 0, _alter_scram_error))
DESCRIBE_QUOTAS = REGISTRY.register(Api(48, "DescribeClientQuotas", 0, 1, _describe_quotas_error))
ALTER_QUOTAS = REGISTRY.register(Api(49, "AlterClientQuotas", 0, 1, _alter_quotas_error))
