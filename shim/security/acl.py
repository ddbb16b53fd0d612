"""Kafka's ACL model: bindings, their store, and the authorizer's decision.

A binding says: `principal` from `host` is allowed (or denied) `operation` on resources of
`resource_type` whose name equals `resource_name` (LITERAL; `*` matches every name) or
starts with it (PREFIXED). The authorizer follows Kafka's StandardAuthorizer:

- a super user may do anything;
- a DENY binding that matches principal (or `User:*`), host (or `*`), operation (or ALL)
  and resource wins over every ALLOW;
- otherwise a matching ALLOW permits; READ, WRITE, DELETE and ALTER each imply DESCRIBE,
  ALTER_CONFIGS implies DESCRIBE_CONFIGS;
- a resource that no binding names at all is allowed only with
  `allow.everyone.if.no.acl.found` (default false).

Codes are Kafka's (AclOperation, AclPermissionType, ResourceType, PatternType), so the
wire APIs carry them unchanged. Bindings persist in `<data dir>/acls.json`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

# ResourceType
ANY_RESOURCE, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7
RESOURCE_NAMES = {TOPIC: "Topic", GROUP: "Group", CLUSTER: "Cluster",
                  TRANSACTIONAL_ID: "TransactionalId", DELEGATION_TOKEN: "DelegationToken", USER: "User"}
CLUSTER_NAME = "kafka-cluster"
# PatternType
ANY_PATTERN, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
# AclOperation
ANY_OP, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14
# AclPermissionType
ANY_PERMISSION, DENY, ALLOW = 1, 2, 3
WILDCARD = "*"

# What each resource type supports (Kafka's AclEntry.supportedOperations).
SUPPORTED = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
              DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}
IMPLIED_BY = {DESCRIBE: (READ, WRITE, DELETE, ALTER), DESCRIBE_CONFIGS: (ALTER_CONFIGS,)}


class AclError(ValueError):
    """A binding or filter that cannot be stored or matched (INVALID_REQUEST)."""


@dataclass(frozen=True)
class Binding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def check(self) -> None:
        """Refuse what a filter may say but a binding may not (ANY, MATCH, unknown codes)."""
        if self.resource_type not in RESOURCE_NAMES:
            raise AclError(f"resource type {self.resource_type} cannot be bound")
        if self.pattern_type not in (LITERAL, PREFIXED):
            raise AclError(f"pattern type {self.pattern_type}: a binding is LITERAL or PREFIXED")
        if self.operation not in (ALL, *SUPPORTED[self.resource_type]):
            raise AclError(f"operation {self.operation} does not apply to "
                           f"{RESOURCE_NAMES[self.resource_type]}")
        if self.permission not in (ALLOW, DENY):
            raise AclError(f"permission {self.permission}: a binding ALLOWs or DENYs")
        if not self.resource_name:
            raise AclError("empty resource name")
        if self.resource_type == CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise AclError(f"principal {self.principal!r}: expected TYPE:NAME (User:alice)")
        if not self.host:
            raise AclError("empty host (use * for every host)")

    def names(self, name: str) -> bool:
        """Whether this binding's pattern covers a resource called `name`."""
        if self.pattern_type == PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True)
class Filter:
    """DescribeAcls/DeleteAcls's filter: None (null) or ANY codes match everything."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, b: Binding) -> bool:
        if self.resource_type not in (ANY_RESOURCE, b.resource_type):
            return False
        if self.operation not in (ANY_OP, b.operation):
            return False
        if self.permission not in (ANY_PERMISSION, b.permission):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.pattern_type == MATCH:  # bindings that would apply to this resource name
            return self.resource_name is None or b.names(self.resource_name)
        if self.pattern_type not in (ANY_PATTERN, b.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == b.resource_name


class AclStore:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = data_dir / "acls.json" if data_dir else None
        self.bindings: list[Binding] = []
        if self.path is not None and self.path.exists():
            self.bindings = [Binding(**b) for b in json.loads(self.path.read_text())]

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(b) for b in self.bindings], indent=1))
        os.replace(tmp, self.path)

    def add(self, bindings: list[Binding]) -> None:
        new = [b for b in dict.fromkeys(bindings) if b not in self.bindings]
        if new:
            self.bindings.extend(new)
            self._save()

    def find(self, f: Filter) -> list[Binding]:
        return [b for b in self.bindings if f.matches(b)]

    def delete(self, f: Filter) -> list[Binding]:
        gone = self.find(f)
        if gone:
            self.bindings = [b for b in self.bindings if b not in gone]
            self._save()
        return gone


class Authorizer:
    def __init__(self, store: AclStore, super_users=frozenset(), allow_if_no_acl: bool = False) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl

    def allows(self, principal: str, host: str, operation: int, resource_type: int,
               name: str) -> bool:
        if principal in self.super_users:
            return True
        applicable = [b for b in self.store.bindings
                      if b.resource_type == resource_type and b.names(name)]
        if not applicable:
            return self.allow_if_no_acl
        mine = [b for b in applicable if b.principal in (principal, "User:*")
                and b.host in (host, WILDCARD)]
        if any(b.permission == DENY and b.operation in (ALL, operation) for b in mine):
            return False
        ops = (ALL, operation, *IMPLIED_BY.get(operation, ()))
        return any(b.permission == ALLOW and b.operation in ops for b in mine)
