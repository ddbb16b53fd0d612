"""Client quotas: produce and fetch byte rates per user and client id, throttled as Kafka does.

Quotas are set with AlterClientQuotas (`kafka-configs --alter --entity-type users
--entity-name alice --add-config producer_byte_rate=1048576`) and kept in
`<data dir>/client-quotas.json`. The quota that applies to a request is the most specific
one configured, in Kafka's order: user + client id, user + default client, user, default
user + client id, default user + default client, default user, client id, default client.

Each (user, client id, produce|fetch) has a rate measured over `quota.window.num` windows of
`quota.window.size.seconds` (Kafka's defaults: 11 of 1 s). When a request takes the rate
above the quota, the answer carries throttle_time_ms = (rate - quota) / quota * window,
bounded by the whole window, and the connection reads nothing more from that client for that
long, which is what Kafka does (KIP-219) for clients that honour throttle_time_ms too.
Only the byte rates are enforced; other quota keys are refused.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from pathlib import Path

KEYS = ("producer_byte_rate", "consumer_byte_rate")
ENTITY_TYPES = ("user", "client-id")


def entity_key(entity: dict[str, str | None]) -> str:
    """A stable key for {"user": name or None (default), "client-id": ...}."""
    return json.dumps(sorted(entity.items()))


class QuotaStore:
    def __init__(self, data_dir: Path | None, window_num: int = 11, window_seconds: float = 1.0) -> None:
        self.path = data_dir / "client-quotas.json" if data_dir else None
        self.quotas: dict[str, dict] = {}  # entity_key -> {"entity": {...}, "values": {...}}
        if self.path is not None and self.path.exists():
            self.quotas = json.loads(self.path.read_text())
        self.window_num, self.window_seconds = window_num, window_seconds
        self._samples: dict[tuple, deque] = {}

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.quotas, indent=1))
        os.replace(tmp, self.path)

    def alter(self, entity: dict[str, str | None], ops: list[tuple[str, float, bool]]) -> None:
        """Apply (key, value, remove) ops; ValueError (nothing changed) when one is refused."""
        if not entity or any(t not in ENTITY_TYPES for t in entity):
            raise ValueError(f"entity types {sorted(entity)}: camus keeps quotas for "
                             f"{' and '.join(ENTITY_TYPES)}")
        for key, value, remove in ops:
            if key not in KEYS:
                raise ValueError(f"quota {key!r}: camus enforces {', '.join(KEYS)}")
            if not remove and not value > 0:
                raise ValueError(f"{key}={value}: a byte rate is positive")
        k = entity_key(entity)
        values = dict(self.quotas.get(k, {}).get("values", {}))
        for key, value, remove in ops:
            if remove:
                values.pop(key, None)
            else:
                values[key] = value
        if values:
            self.quotas[k] = {"entity": entity, "values": values}
        else:
            self.quotas.pop(k, None)
        self._save()

    def entries(self) -> list[dict]:
        return list(self.quotas.values())

    def quota(self, user: str, client_id: str, key: str) -> float | None:
        """The most specific quota for this user (ANONYMOUS when unauthenticated, as in
        Kafka) and client id."""
        order = [{"user": user, "client-id": client_id}, {"user": user, "client-id": None},
                 {"user": user}, {"user": None, "client-id": client_id},
                 {"user": None, "client-id": None}, {"user": None}, {"client-id": client_id},
                 {"client-id": None}]
        for entity in order:
            found = self.quotas.get(entity_key(entity))
            if found is not None and key in found["values"]:
                return found["values"][key]
        return None

    def record(self, user: str, client_id: str, key: str, nbytes: int,
               clock=time.monotonic) -> int:
        """Count `nbytes` against the quota that applies; the throttle time in ms (0 if none)."""
        if not self.quotas:
            return 0
        limit = self.quota(user, client_id, key)
        if limit is None:
            return 0
        now = clock()
        samples = self._samples.setdefault((user, client_id, key), deque())
        start = now - now % self.window_seconds
        if samples and samples[-1][0] == start:
            samples[-1][1] += nbytes
        else:
            samples.append([start, nbytes])
        total_window = self.window_num * self.window_seconds
        while samples and samples[0][0] <= now - total_window:
            samples.popleft()
        # Kafka's Rate: over at least (window_num - 1) windows, so one burst is not judged
        # over a few milliseconds.
        elapsed = max(now - samples[0][0], (self.window_num - 1) * self.window_seconds)
        rate = sum(b for _, b in samples) / elapsed
        if rate <= limit:
            return 0
        return int(min((rate - limit) / limit * elapsed, total_window) * 1000)
