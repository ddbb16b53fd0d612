"""The broker's resource limits, by Kafka's config names, and the request memory pool.

No client may take the broker down by holding what everyone shares: file descriptors
(`max.connections`, and idle connections closed after `connections.max.idle.ms`), memory for
requests being received (`queued.max.request.bytes`, shared by all connections), memory for
one Fetch answer (`fetch.max.bytes`) and partitions made by one request
(`MAX_PARTITIONS_PER_REQUEST`, as Kafka's controller), the switch's endpoint ports (509:
a group member's topic takes one only within its principal's and its connection's bound, so
no client can leave views without ports; beyond the bound it reads through Fetch as
before). A `--config` file sets the configurable ones under the names below; DescribeConfigs
on the broker reports them.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from dataclasses import dataclass

log = logging.getLogger("camus.limits")

# Kafka's own defaults, except max.connections (Kafka: unlimited), which follows the file
# descriptor limit so that logs, segments and the switch always have descriptors left.
DEFAULT_IDLE_MS = 600_000
DEFAULT_QUEUED_BYTES = 100 << 20  # at least socket.request.max.bytes, so any request fits
DEFAULT_FETCH_MAX_BYTES = 55 << 20  # 57,671,680
MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka's controller refuses more in one request
FD_RESERVE = 256  # descriptors kept for everything but client connections
SMALL_REQUEST = 1 << 16  # requests up to one socket read need no reservation
# Group members' switch ports, of the 509 (shim.datapath.LAST_ENDPOINT): one principal's
# members hold at most a quarter of them, one connection's a sixteenth, so views (and
# other principals) always find ports; the rest of a member's topics go without one.
DEFAULT_MEMBER_PORTS_PER_PRINCIPAL = 128
DEFAULT_MEMBER_PORTS_PER_CONNECTION = 32

CONFIG_NAMES = {"max.connections": "max_connections",
                "connections.max.idle.ms": "idle_ms",
                "queued.max.request.bytes": "queued_bytes",
                "fetch.max.bytes": "fetch_max_bytes",
                "camus.member.ports.per.principal": "member_ports_per_principal",
                "camus.member.ports.per.connection": "member_ports_per_connection"}


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to the hard limit; the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


@dataclass
class Limits:
    max_connections: int = -1  # -1: the file descriptor limit less FD_RESERVE
    idle_ms: int = DEFAULT_IDLE_MS
    queued_bytes: int = DEFAULT_QUEUED_BYTES
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    member_ports_per_principal: int = DEFAULT_MEMBER_PORTS_PER_PRINCIPAL
    member_ports_per_connection: int = DEFAULT_MEMBER_PORTS_PER_CONNECTION

    @classmethod
    def from_config(cls, doc: dict) -> "Limits":
        """The limits a --config document sets (ValueError naming a bad one)."""
        out = cls()
        for name, attr in CONFIG_NAMES.items():
            if name in doc:
                value = doc[name]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"{name} must be a positive integer, not {value!r}")
                setattr(out, attr, value)
        return out

    def connections_allowed(self) -> int:
        fds = raise_fd_limit()
        room = max(16, fds - FD_RESERVE)
        return room if self.max_connections < 0 else min(self.max_connections, room)

    def describe(self) -> dict[str, str]:
        return {name: str(getattr(self, attr)) for name, attr in CONFIG_NAMES.items()}


class RequestMemory:
    """`queued.max.request.bytes`: a pool every connection reserves a large request's size
    from before reading it (all of it at once, so connections never hold half each and wait
    for one another); a connection that cannot reserve stops reading, and its client's
    bytes wait in the kernel, not in this process."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._freed = asyncio.Event()

    async def reserve(self, size: int) -> int:
        size = min(size, self.limit)  # one request larger than the pool runs alone
        while self.used and self.used + size > self.limit:
            self._freed.clear()
            await self._freed.wait()
        self.used += size
        return size

    def release(self, size: int) -> None:
        self.used -= size
        self._freed.set()
