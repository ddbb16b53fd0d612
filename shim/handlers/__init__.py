"""Request handlers, one module per API family, gathered into one dispatch table.

Each family module exposes `HANDLERS = {api name: handler}`; a handler takes
`(ctx, request)` and returns the response (a kio dataclass or a plain mapping that
`request.response` builds), or is a coroutine doing so when it must wait (Fetch's
long-poll, JoinGroup and SyncGroup). An API registered in the protocol layer but
missing here is answered with its own error shape and UNSUPPORTED_VERSION by the
server, so the table and the ApiVersions answer cannot silently disagree: a test
checks that every advertised API has a handler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shim.broker import Broker
from shim.handlers import admin, cluster, fetch, group_handlers, offsets, produce
from shim.handlers import cluster_admin, consumer_group_handlers, security, transactions


@dataclass
class Context:
    broker: Broker
    client_host: str = "127.0.0.1"
    session: Any = None  # shim.security.session.Session: listener, principal, SASL state
    connection: int = 0  # this connection's number, unique while the broker runs


HANDLERS: dict = {}
for _family in (admin, cluster, fetch, group_handlers, offsets, produce, cluster_admin,
                consumer_group_handlers, security, transactions):
    for _name, _fn in _family.HANDLERS.items():
        if _name in HANDLERS:
            raise RuntimeError(f"two handlers for {_name}")
        HANDLERS[_name] = _fn
