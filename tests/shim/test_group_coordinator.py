"""The classic group coordinator (shim/group_coordinator.py) on its own, with a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from shim import group_coordinator
from shim.group_coordinator import Coordinator, GroupError

PROTOCOLS = [("range", b"")]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_join_that_waited_long_starts_the_session_again(monkeypatch):
    """As Kafka (a completed join reschedules every member's heartbeat expiry): a member
    whose JoinGroup waited longer than its session timeout for the others to rejoin is not
    expired before it can send its SyncGroup."""
    clock = Clock()
    monkeypatch.setattr(group_coordinator, "time", clock)

    async def scenario():
        c = Coordinator(lambda g: None)

        def join(member_id):
            return c.join("g", member_id, None, "consumer", PROTOCOLS, 6000, 60000, "c", "h",
                          require_id=False)

        a = (await join(""))["member_id"]
        await c.sync("g", a, 1, {a: b"x"})
        b_join = asyncio.ensure_future(join(""))  # parked until `a` rejoins
        await asyncio.sleep(0)
        for _ in range(10):  # `a` heartbeats for 10 s, learning of the rebalance, then rejoins
            clock.now += 1
            with pytest.raises(GroupError, match="rebalance_in_progress"):
                c.heartbeat("g", a, 1)
            assert c.expire() == []
        a_join = asyncio.ensure_future(join(a))
        b = (await b_join)["member_id"]
        await a_join
        clock.now += 1
        assert c.expire() == []
        assert set(c.groups["g"].members) == {a, b}

    asyncio.run(scenario())
