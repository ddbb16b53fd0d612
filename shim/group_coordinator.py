"""Classic consumer groups: membership, generations, rebalances, session expiry.

Theory of operation (Kafka's classic protocol, one coordinator: this broker).

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                  ▲        ▲                                   │ leader's SyncGroup
      │                  │        └──── join, leave, expiry ──────────┤
      └── last leaves ───┴──────────── join, leave, expiry ◀──── Stable ◀┘

- JoinGroup parks the member's answer (an asyncio future) and moves the group to
  PreparingRebalance. The rebalance completes when every known member has rejoined,
  or when the longest rebalance timeout passes, when members that did not rejoin are
  dropped. A brand-new group may wait `initial_delay` for companions first; the default
  is 0, as Kafka test clusters set group.initial.rebalance.delay.ms (and as the Kafka
  peer in ../shared/peers/kafka runs). Completion
  bumps the generation, picks the first protocol every member offers, keeps or elects
  a leader, and answers every parked join (the leader also gets every member's
  metadata). As Kafka, every member's session starts again then: a join that waited
  longer than its session timeout for the others must not be expired before its sync.
- SyncGroup from the leader stores the assignments and answers every parked sync;
  the group is Stable. Other members' syncs wait for it.
- Heartbeat answers REBALANCE_IN_PROGRESS while a rebalance is pending, which is how
  members learn to rejoin. A member silent for its session timeout is removed
  (`expire`, called periodically), which starts a rebalance.
- Static members (group.instance.id, JoinGroup v5+) skip MEMBER_ID_REQUIRED; a static
  member joining again replaces its previous incarnation at once (whose parked requests
  get FENCED_INSTANCE_ID) instead of waiting for its session to expire. In a Stable group,
  with the same protocols, it takes over the old assignment under a new member id without
  a rebalance, as Kafka; otherwise the group rebalances. LeaveGroup may name a static
  member by instance id alone.
- Each change of assignments calls `on_assignments(group)` so the broker can turn every
  member's assignment into a subscription on the switch.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("camus.groups")
EMPTY, PREPARING, COMPLETING, STABLE = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"


class GroupError(Exception):
    def __init__(self, code_name: str, message: str = "") -> None:
        super().__init__(message or code_name)
        self.code_name = code_name


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_seen: float = field(default_factory=time.monotonic)
    join: asyncio.Future | None = None
    sync: asyncio.Future | None = None
    port: int | None = None  # the switch port its assignment is delivered to
    # Who joined it, and over which connection: its switch ports count against both
    # (Broker._member_port), so one client cannot take every port.
    principal: str = "User:ANONYMOUS"
    connection: int = 0

    def metadata(self, protocol: str) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")

    def assigned_partitions(self, protocol_type: str) -> dict[str, list[int]]:
        """Its assignment's topic partitions (only "consumer" assignments can be read)."""
        return parse_assignment(self.assignment) if protocol_type == "consumer" else {}


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    pending_ids: set[str] = field(default_factory=set)  # handed out by MEMBER_ID_REQUIRED
    deadline: float = 0.0  # when a PreparingRebalance gives up on missing members
    timer: asyncio.TimerHandle | None = None


class Coordinator:
    def __init__(self, on_assignments: Callable[[Group], None], initial_delay: float = 0.0,
                 min_session_ms: int = 1000, max_session_ms: int = 1_800_000) -> None:
        self.groups: dict[str, Group] = {}
        self.on_assignments = on_assignments
        self.initial_delay = initial_delay
        self.min_session_ms, self.max_session_ms = min_session_ms, max_session_ms

    def _notify(self, g: Group) -> None:
        # A failure to update subscriptions must not leave parked joins unanswered.
        try:
            self.on_assignments(g)
        except Exception:
            log.exception("group %s: updating subscriptions failed", g.group_id)

    def group(self, group_id: str) -> Group:
        return self.groups.setdefault(group_id, Group(group_id))

    # --- JoinGroup ----------------------------------------------------------------------

    async def join(self, group_id: str, member_id: str, instance_id: str | None,
                   protocol_type: str, protocols: list[tuple[str, bytes]], session_ms: int,
                   rebalance_ms: int, client_id: str, host: str, require_id: bool,
                   owner: tuple[str, int] = ("User:ANONYMOUS", 0)) -> dict:
        """One JoinGroup; `owner` is the (principal, connection id) it came from."""
        if not group_id:
            raise GroupError("invalid_group_id")
        if not self.min_session_ms <= session_ms <= self.max_session_ms:
            raise GroupError("invalid_session_timeout")
        g = self.group(group_id)
        log.debug("group %s: join from %r (state %s)", group_id, member_id, g.state)
        if g.members and (protocol_type != g.protocol_type
                          or not self._common(g, [n for n, _ in protocols])):
            raise GroupError("inconsistent_group_protocol")
        if member_id and member_id not in g.members and member_id not in g.pending_ids:
            raise self.unknown_member_error(g, member_id, instance_id)
        if not member_id and instance_id is not None:
            old = next((m for m in g.members.values() if m.instance_id == instance_id), None)
            if (old is not None and g.state == STABLE
                    and [n for n, _ in protocols] == [n for n, _ in old.protocols]):
                return self._replace_static(g, old, client_id, host, protocols, session_ms,
                                            rebalance_ms, owner)
            # A static member coming back replaces its previous incarnation at once.
            for old_id in [mid for mid, m in g.members.items() if m.instance_id == instance_id]:
                self._drop(g, old_id, "fenced_instance_id")
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_id and instance_id is None:
                g.pending_ids.add(member_id)
                return {"error": "member_id_required", "member_id": member_id}
        g.pending_ids.discard(member_id)
        m = g.members.get(member_id)
        if m is None:
            m = g.members[member_id] = Member(member_id, client_id, host, instance_id, session_ms,
                                              rebalance_ms, protocol_type, protocols)
        else:
            unchanged = m.protocols == protocols
            m.last_seen = time.monotonic()
            # As Kafka: a member repeating its join with the same metadata (it missed the
            # answer, or its client retried) gets the current generation back instead of
            # starting another rebalance; only a leader's join in Stable forces one.
            if unchanged and (g.state == COMPLETING
                              or (g.state == STABLE and member_id != g.leader)):
                return self._join_answer(g, m)
            if m.join is not None and not m.join.done():
                m.join.set_exception(GroupError("rebalance_in_progress"))
            m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = protocols, session_ms, rebalance_ms
        m.last_seen, (m.principal, m.connection) = time.monotonic(), owner
        m.join = asyncio.get_running_loop().create_future()
        g.protocol_type = protocol_type
        if g.state != PREPARING:
            self._prepare(g, self.initial_delay if g.state == EMPTY else None)
        self._maybe_complete(g)
        return await m.join

    def _replace_static(self, g: Group, old: Member, client_id: str, host: str,
                        protocols: list[tuple[str, bytes]], session_ms: int,
                        rebalance_ms: int, owner: tuple[str, int]) -> dict:
        """As Kafka: a static member rejoining a Stable group with the same protocols takes
        its previous incarnation's place and assignment under a new member id, without a
        rebalance. The answer names the previous leader id, so a rejoining leader does not
        recompute assignments a Stable group would not distribute."""
        leader = g.leader
        del g.members[old.member_id]
        for fut in (old.join, old.sync):
            if fut is not None and not fut.done():
                fut.set_exception(GroupError("fenced_instance_id"))
        m = Member(f"{client_id or 'member'}-{uuid.uuid4()}", client_id, host, old.instance_id,
                   session_ms, rebalance_ms, old.protocol_type, protocols,
                   assignment=old.assignment, port=old.port, principal=owner[0],
                   connection=owner[1])
        g.members[m.member_id] = m
        if g.leader == old.member_id:
            g.leader = m.member_id
        log.info("group %s: static member %s rejoined as %s (generation %d kept)", g.group_id,
                 old.instance_id, m.member_id, g.generation)
        self._notify(g)
        return {**self._join_answer(g, m), "leader": leader, "members": []}

    def _common(self, g: Group, offered: list[str]) -> list[str]:
        names = [n for n in offered]
        for m in g.members.values():
            have = {n for n, _ in m.protocols}
            names = [n for n in names if n in have]
        return names

    def _prepare(self, g: Group, delay: float | None) -> None:
        """Enter PreparingRebalance; parked syncs learn of it at once."""
        g.state = PREPARING
        for m in g.members.values():
            if m.sync is not None and not m.sync.done():
                m.sync.set_exception(GroupError("rebalance_in_progress"))
        wait = delay if delay is not None else max(
            (m.rebalance_timeout_ms for m in g.members.values()), default=0) / 1000
        g.deadline = time.monotonic() + wait
        self._arm(g, wait)

    def _arm(self, g: Group, wait: float) -> None:
        if g.timer is not None:
            g.timer.cancel()
        g.timer = asyncio.get_running_loop().call_later(wait, self._timeout, g)

    def _timeout(self, g: Group) -> None:
        g.timer = None
        if g.state != PREPARING:
            return
        for mid in [mid for mid, m in g.members.items() if m.join is None or m.join.done()]:
            self._drop(g, mid)  # did not rejoin in time
        self._complete(g)

    def _maybe_complete(self, g: Group) -> None:
        if g.state != PREPARING or time.monotonic() < g.deadline and self._waiting_initial(g):
            return
        if all(m.join is not None and not m.join.done() for m in g.members.values()):
            self._complete(g)

    def _waiting_initial(self, g: Group) -> bool:
        # A new group waits a moment for companions so the first assignment is not redone.
        return g.generation == 0 and g.timer is not None

    def _complete(self, g: Group) -> None:
        if g.timer is not None:
            g.timer.cancel()
            g.timer = None
        if not g.members:
            g.state, g.leader, g.protocol = EMPTY, "", ""
            g.generation += 1
            self._notify(g)
            return
        g.generation += 1
        common = self._common(g, [n for n, _ in next(iter(g.members.values())).protocols])
        g.protocol = common[0] if common else ""
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = COMPLETING
        log.info("group %s: generation %d, %d member(s), leader %s", g.group_id, g.generation,
                 len(g.members), g.leader)
        now = time.monotonic()
        for m in g.members.values():
            m.assignment = b""
            m.last_seen = now  # its session starts again, however long its join waited
        self._notify(g)
        for m in g.members.values():
            if m.join is not None and not m.join.done():
                m.join.set_result(self._join_answer(g, m))

    @staticmethod
    def _join_answer(g: Group, m: Member) -> dict:
        """The JoinGroup answer of the current generation (the leader also gets the members)."""
        members = [{"member_id": o.member_id, "group_instance_id": o.instance_id,
                    "metadata": o.metadata(g.protocol)} for o in g.members.values()]
        return {"generation_id": g.generation, "protocol_type": g.protocol_type,
                "protocol_name": g.protocol, "leader": g.leader, "member_id": m.member_id,
                "members": members if m.member_id == g.leader else []}

    # --- SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------

    @staticmethod
    def unknown_member_error(g: Group | None, member_id: str,
                             instance_id: str | None) -> GroupError:
        """UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID for an old incarnation of a static member
        that has been replaced (as Kafka: the zombie stops instead of rejoining and fencing
        its replacement in turn)."""
        if g is not None and instance_id is not None and any(
                m.instance_id == instance_id for m in g.members.values()):
            return GroupError("fenced_instance_id")
        return GroupError("unknown_member_id")

    def _member(self, group_id: str, member_id: str, generation: int,
                instance_id: str | None = None) -> tuple[Group, Member]:
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            raise self.unknown_member_error(g, member_id, instance_id)
        m = g.members[member_id]
        m.last_seen = time.monotonic()
        if generation != g.generation:
            raise GroupError("illegal_generation")
        return g, m

    async def sync(self, group_id: str, member_id: str, generation: int,
                   assignments: dict[str, bytes], instance_id: str | None = None) -> dict:
        g, m = self._member(group_id, member_id, generation, instance_id)
        log.debug("group %s: sync from %s (generation %d, state %s, %d assignments)",
                  group_id, member_id, generation, g.state, len(assignments))
        if g.state == PREPARING:
            raise GroupError("rebalance_in_progress")
        if g.state == STABLE:
            return self._sync_answer(g, m)
        m.sync = asyncio.get_running_loop().create_future()
        if member_id == g.leader:
            for mid, data in assignments.items():
                if mid in g.members:
                    g.members[mid].assignment = data
            g.state = STABLE
            self._notify(g)
            for other in g.members.values():
                if other.sync is not None and not other.sync.done():
                    other.sync.set_result(self._sync_answer(g, other))
        return await m.sync

    @staticmethod
    def _sync_answer(g: Group, m: Member) -> dict:
        return {"protocol_type": g.protocol_type, "protocol_name": g.protocol,
                "assignment": m.assignment}

    def heartbeat(self, group_id: str, member_id: str, generation: int,
                  instance_id: str | None = None) -> None:
        g, _ = self._member(group_id, member_id, generation, instance_id)
        if g.state == PREPARING:
            raise GroupError("rebalance_in_progress")

    def leave(self, group_id: str, member_id: str, instance_id: str | None = None) -> None:
        g = self.groups.get(group_id)
        if g is not None and instance_id is not None:
            # As Kafka: a static member is named by its instance id (the admin client's
            # removeMembersFromConsumerGroup sends no member id); a member id that is
            # given must be that instance's current one.
            found = next((mid for mid, m in g.members.items() if m.instance_id == instance_id),
                         None)
            if found is None:
                raise GroupError("unknown_member_id")
            if member_id and member_id != found:
                raise GroupError("fenced_instance_id")
            member_id = found
        if g is None or member_id not in g.members:
            raise GroupError("unknown_member_id")
        self._drop(g, member_id)
        self._rebalance_after_loss(g)

    def delete(self, group_id: str) -> None:
        """DeleteGroups: forget a group that has no members (GroupError otherwise)."""
        g = self.groups.get(group_id)
        if g is not None and g.members:
            raise GroupError("non_empty_group", f"group {group_id} has members")
        self.groups.pop(group_id, None)

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """Topics the members of an active "consumer" group subscribe to; None when the
        group has members of another protocol type (whose subscriptions camus cannot read)."""
        g = self.groups.get(group_id)
        if g is None or not g.members:
            return set()
        if g.protocol_type != "consumer":
            return None
        return {t for m in g.members.values() for t in parse_subscription(m.metadata(g.protocol))}

    def _drop(self, g: Group, member_id: str, why: str = "unknown_member_id") -> None:
        m = g.members.pop(member_id)
        for fut in (m.join, m.sync):
            if fut is not None and not fut.done():
                fut.set_exception(GroupError(why))
        if g.leader == member_id:
            g.leader = ""

    def _rebalance_after_loss(self, g: Group) -> None:
        if not g.members:
            if g.timer is not None:
                g.timer.cancel()
                g.timer = None
            g.state, g.leader, g.protocol = EMPTY, "", ""
            g.generation += 1
            self._notify(g)
        elif g.state == PREPARING:
            self._maybe_complete(g)
        else:
            self._prepare(g, None)
            self._notify(g)

    def expire(self) -> list[tuple[str, str]]:
        """Remove members silent for longer than their session timeout."""
        now, gone = time.monotonic(), []
        for g in list(self.groups.values()):
            dead = [mid for mid, m in g.members.items()
                    if (m.join is None or m.join.done()) and (m.sync is None or m.sync.done())
                    and now - m.last_seen > m.session_timeout_ms / 1000]
            for mid in dead:
                self._drop(g, mid)
                gone.append((g.group_id, mid))
            if dead:
                self._rebalance_after_loss(g)
        return gone


def parse_subscription(data: bytes) -> list[str]:
    """The topics of a "consumer" protocol member's metadata (ConsumerProtocolSubscription:
    version, then the topic names; later fields do not matter here)."""
    out: list[str] = []
    try:
        (n,) = struct.unpack_from(">i", data, 2)
        pos = 6
        for _ in range(max(n, 0)):
            (ln,) = struct.unpack_from(">h", data, pos)
            out.append(data[pos + 2:pos + 2 + ln].decode())
            pos += 2 + ln
    except (struct.error, UnicodeDecodeError):
        return out
    return out


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """The topic partitions in a "consumer" protocol assignment (ConsumerProtocolAssignment)."""
    out: dict[str, list[int]] = {}
    if len(data) < 6:
        return out
    try:
        pos = 2  # version
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(n, 0)):
            (ln,) = struct.unpack_from(">h", data, pos)
            name = data[pos + 2:pos + 2 + ln].decode()
            pos += 2 + ln
            (k,) = struct.unpack_from(">i", data, pos)
            pos += 4
            parts = list(struct.unpack_from(f">{max(k, 0)}i", data, pos))
            pos += 4 * max(k, 0)
            out.setdefault(name, []).extend(parts)
    except (struct.error, UnicodeDecodeError):
        return {}
    return out
