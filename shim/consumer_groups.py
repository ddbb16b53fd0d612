"""KIP-848 consumer groups: the broker assigns partitions, members only heartbeat.

Theory of operation (Kafka's ConsumerGroupHeartbeat protocol, one coordinator: this broker).

- A member joins with member_epoch 0 and its subscription; it leaves with -1 (a static
  member, with an instance id, may leave for a while with -2 and come back as itself).
  Any change of members, subscriptions or subscribed topics' partition counts bumps the
  group epoch and recomputes the target assignment (`_assign`): per topic, the partitions
  spread evenly over the members subscribed to it, each keeping what it had as far as
  the balance allows (sticky, as Kafka's uniform assignor). The target's epoch is the
  group epoch it was computed at.
- Each heartbeat reconciles one member towards its target (`_reconcile`), as Kafka's
  CurrentAssignmentBuilder does: first it is told to give up what it must lose (its
  epoch stays); once it reports that it holds none of it, it takes the target's epoch and
  every target partition no other member still holds (reported or assigned); the rest
  follow on later heartbeats, as their holders let go. So no partition is ever assigned
  to two members at once.
- A heartbeat must carry the member's epoch (or its previous one, with what it was
  given): anything else is FENCED_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID,
  and the client rejoins. A member silent for the session timeout, or still holding what
  it was told to give up after its rebalance timeout, is removed.
- OffsetCommit and OffsetFetch (v9+) from a member must carry its current epoch
  (STALE_MEMBER_EPOCH otherwise), as Kafka checks them.
- Each change of a member's assignment calls `on_assignments(group)`, so the broker
  turns it into switch subscriptions, as for classic groups.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from shim.client_regex import InvalidRegex, compile_regex
from shim.group_coordinator import GroupError

log = logging.getLogger("camus.groups")

EMPTY, ASSIGNING, RECONCILING, STABLE = "Empty", "Assigning", "Reconciling", "Stable"
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
HEARTBEAT_INTERVAL_MS = 5000  # Kafka's group.consumer.heartbeat.interval.ms default
SESSION_TIMEOUT_MS = 45000  # Kafka's group.consumer.session.timeout.ms default
ASSIGNOR = "uniform"
RESOLVED_REGEXES = 256  # regexes whose matching topics are kept, until the topics change

Assignment = dict[str, frozenset[int]]  # topic name -> partitions


def _minus(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _meet(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    # Whose Describe ACLs its regex is resolved under; its switch ports count against this
    # principal and connection (Broker._member_port).
    principal: str = "User:ANONYMOUS"
    connection: int = 0
    subscribed: tuple[str, ...] = ()
    regex: str | None = None
    rebalance_timeout_ms: int = 300000
    epoch: int = 0
    previous_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)  # what it was told it has
    owned: Assignment = field(default_factory=dict)  # what it last said it holds
    sent: Assignment | None = None  # the assignment last sent to it
    left: bool = False  # a static member away for a while (epoch -2)
    revoking_since: float | None = None  # when it was told to give partitions up
    last_seen: float = field(default_factory=time.monotonic)

    def assigned_partitions(self, protocol_type: str = "consumer") -> dict[str, list[int]]:
        return {t: sorted(ps) for t, ps in self.assigned.items()}


@dataclass
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)  # at the last assignment
    protocol_type: str = "consumer"

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.assignment_epoch != self.epoch:
            return ASSIGNING
        if any(m.epoch != self.assignment_epoch or m.assigned != self.target.get(mid, {})
               for mid, m in self.members.items()):
            return RECONCILING
        return STABLE


class ConsumerGroups:
    def __init__(self, on_assignments: Callable[[ConsumerGroup], None],
                 partitions: Callable[[str], int],
                 topic_names: Callable[[], list[str]] = list,
                 may_describe: Callable[[str, str, str], bool] = lambda *_: True) -> None:
        self.groups: dict[str, ConsumerGroup] = {}
        self.on_assignments = on_assignments
        self.partitions = partitions  # topic name -> partition count (0: no such topic)
        self.topic_names = topic_names  # every topic, for subscriptions by regular expression
        self.may_describe = may_describe  # (principal, host, topic): the topic ACL check
        # regex -> (the topic names it was matched against, those it matched): every member
        # heartbeats each 5 s, and matching each regex against every topic name each time
        # would cost members x topics per heartbeat.
        self._resolved: dict[str, tuple[list[str], frozenset[str]]] = {}

    def _matching(self, regex: str, names: list[str]) -> frozenset[str]:
        hit = self._resolved.get(regex)
        if hit is not None and hit[0] == names:
            return hit[1]
        rx = compile_regex(regex)  # RE2, linear time: see shim.client_regex
        found = frozenset(t for t in names if rx.fullmatch(t) is not None)
        self._resolved.pop(regex, None)
        if len(self._resolved) >= RESOLVED_REGEXES:
            del self._resolved[next(iter(self._resolved))]  # the one resolved longest ago
        self._resolved[regex] = (names, found)
        return found

    def topics_of(self, m: ConsumerMember, names: list[str] | None = None) -> set[str]:
        """A member's subscription: its names, and the topics its regex matches whole among
        those its principal may describe (as Kafka resolves regexes; names it may not
        describe are refused before they get here, by the heartbeat's handler)."""
        found = set(m.subscribed)
        if m.regex:
            names = self.topic_names() if names is None else names
            found |= {t for t in self._matching(m.regex, names)
                      if self.may_describe(m.principal, m.client_host, t)}
        return found

    def _notify(self, g: ConsumerGroup) -> None:
        try:
            self.on_assignments(g)
        except Exception:
            log.exception("group %s: updating subscriptions failed", g.group_id)

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, *,
                  instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                  subscribed: tuple[str, ...] | None, regex: str | None,
                  owned: Assignment | None, client_id: str, client_host: str,
                  principal: str = "User:ANONYMOUS", connection: int = 0) -> dict:
        """One ConsumerGroupHeartbeat: the answer's member_id, member_epoch and assignment
        (None: unchanged); GroupError for an error answer."""
        if not group_id:
            raise GroupError("invalid_group_id")
        if regex:
            try:
                compile_regex(regex)
            except InvalidRegex as exc:
                raise GroupError("invalid_regular_expression", str(exc)) from None
        if group_id not in self.groups and member_epoch != JOIN_EPOCH:
            # Kafka answers GROUP_ID_NOT_FOUND, which librdkafka takes as fatal; but Kafka
            # keeps its groups across restarts and camus does not, so a member of a group
            # camus forgot is told to rejoin instead, as classic members are.
            raise GroupError("unknown_member_id", f"group {group_id} is not known (any more)")
        g = self.groups.setdefault(group_id, ConsumerGroup(group_id))
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(g, member_id, instance_id, member_epoch)
        if member_epoch == JOIN_EPOCH:
            m = self._join(g, member_id, instance_id, rack_id, client_id, client_host)
        else:
            m = g.members.get(member_id)
            if m is None:
                raise GroupError("unknown_member_id", f"member {member_id} is not in the group")
            if member_epoch != m.epoch and not (
                    member_epoch == m.previous_epoch and owned is not None
                    and owned == m.assigned):
                raise GroupError("fenced_member_epoch",
                                 f"epoch {member_epoch}; the member's is {m.epoch}")
        m.last_seen, m.left = time.monotonic(), False
        m.principal, m.client_host, m.connection = principal, client_host, connection
        m.rebalance_timeout_ms = rebalance_timeout_ms if rebalance_timeout_ms > 0 else 300000
        if owned is not None:
            m.owned = {t: ps for t, ps in owned.items() if ps}
        if subscribed is not None and tuple(sorted(subscribed)) != m.subscribed:
            m.subscribed = tuple(sorted(subscribed))
            g.epoch += 1
        if regex is not None and regex != (m.regex or ""):
            m.regex = regex or None
            g.epoch += 1
        if g.epoch != g.assignment_epoch or self._counts(g) != g.partition_counts:
            self._assign(g)
        before = m.assigned
        self._reconcile(g, m)
        if m.assigned != before:
            self._notify(g)
        send = member_epoch == JOIN_EPOCH or m.assigned != m.sent or (
            owned is not None and owned != m.assigned)
        if send:
            m.sent = m.assigned
        return {"member_id": m.member_id, "member_epoch": m.epoch,
                "assignment": m.assigned if send else None}

    def _join(self, g: ConsumerGroup, member_id: str, instance_id: str | None,
              rack_id: str | None, client_id: str, client_host: str) -> ConsumerMember:
        member_id = member_id or str(uuid.uuid4())
        if instance_id is not None:
            old = next((m for m in g.members.values() if m.instance_id == instance_id), None)
            if old is not None and old.member_id != member_id:
                if not old.left:
                    raise GroupError("unreleased_instance_id",
                                     f"instance {instance_id} is still held by {old.member_id}")
                # A static member back as itself: it keeps its epoch and assignment.
                del g.members[old.member_id]
                m = ConsumerMember(member_id, instance_id, rack_id, client_id, client_host,
                                   subscribed=old.subscribed, regex=old.regex, epoch=old.epoch,
                                   previous_epoch=old.previous_epoch, assigned=old.assigned)
                g.members[member_id] = m
                g.target[member_id] = g.target.pop(old.member_id, {})
                return m
        m = g.members.get(member_id)
        if m is not None:  # a member that lost its state joins again: it starts over
            m.epoch, m.previous_epoch, m.assigned, m.owned, m.sent = 0, -1, {}, {}, None
        else:
            m = g.members[member_id] = ConsumerMember(member_id, instance_id, rack_id, client_id,
                                                      client_host)
        g.epoch += 1
        log.info("group %s: member %s joined (epoch %d)", g.group_id, member_id, g.epoch)
        return m

    def _leave(self, g: ConsumerGroup, member_id: str, instance_id: str | None,
               epoch: int) -> dict:
        m = g.members.get(member_id)
        if m is None:
            raise GroupError("unknown_member_id", f"member {member_id} is not in the group")
        if epoch == STATIC_LEAVE_EPOCH and m.instance_id is not None:
            m.left = True  # keeps its partitions until it returns or its session ends
        else:
            self._remove(g, member_id)
        return {"member_id": member_id, "member_epoch": epoch, "assignment": None}

    def _remove(self, g: ConsumerGroup, member_id: str) -> None:
        g.members.pop(member_id, None)
        g.target.pop(member_id, None)
        g.epoch += 1
        log.info("group %s: member %s left (epoch %d)", g.group_id, member_id, g.epoch)
        if g.members:
            self._assign(g)
        self._notify(g)

    def _counts(self, g: ConsumerGroup) -> dict[str, int]:
        names = self.topic_names()
        topics = {t for m in g.members.values() for t in self.topics_of(m, names)}
        return {t: self.partitions(t) for t in sorted(topics)}

    def _assign(self, g: ConsumerGroup) -> None:
        """The target assignment: per topic, even shares for its subscribers, sticky."""
        counts = self._counts(g)
        names = self.topic_names()
        wants = {mid: self.topics_of(m, names) for mid, m in g.members.items()}
        if counts != g.partition_counts and g.epoch == g.assignment_epoch:
            g.epoch += 1  # a subscribed topic appeared, vanished or grew
        g.partition_counts = counts
        target: dict[str, dict[str, set[int]]] = {mid: {} for mid in g.members}
        for topic, n in counts.items():
            subs = sorted(mid for mid in g.members if topic in wants[mid])
            if not subs or n <= 0:
                continue
            quota = {mid: n // len(subs) + (1 if i < n % len(subs) else 0)
                     for i, mid in enumerate(subs)}
            free = set(range(n))
            for mid in subs:  # keep what each had, up to its share
                had = sorted(p for p in g.target.get(mid, {}).get(topic, ()) if p in free)
                keep = had[:quota[mid]]
                target[mid].setdefault(topic, set()).update(keep)
                free -= set(keep)
            for mid in subs:
                mine = target[mid].setdefault(topic, set())
                while len(mine) < quota[mid] and free:
                    p = min(free)
                    free.discard(p)
                    mine.add(p)
        g.target = {mid: {t: frozenset(ps) for t, ps in a.items() if ps}
                    for mid, a in target.items()}
        g.assignment_epoch = g.epoch

    @staticmethod
    def _reconcile(g: ConsumerGroup, m: ConsumerMember) -> None:
        target = g.target.get(m.member_id, {})
        keep = _meet(m.assigned, target)
        if keep != m.assigned:
            m.assigned = keep  # first it gives up what it must lose; its epoch stays
            m.revoking_since = m.revoking_since or time.monotonic()
            return
        if _minus(m.owned, m.assigned):
            return  # it still holds partitions it was told to give up
        m.revoking_since = None
        if m.epoch != g.assignment_epoch:
            m.previous_epoch, m.epoch = m.epoch, g.assignment_epoch
        held: dict[str, set[int]] = {}
        for other in g.members.values():
            if other is not m:
                for part in (other.assigned, other.owned):
                    for t, ps in part.items():
                        held.setdefault(t, set()).update(ps)
        new = dict(keep)
        for t, ps in _minus(target, keep).items():
            free = frozenset(p for p in ps if p not in held.get(t, ()))
            if free:
                new[t] = new.get(t, frozenset()) | free
        m.assigned = new

    # --- describe, commits, expiry --------------------------------------------------------

    def commit_error(self, group_id: str, member_id: str, epoch: int) -> str | None:
        """Why an OffsetCommit from (member_id, epoch) is refused (an ErrorCode name), or
        None; as Kafka's ConsumerGroup.validateOffsetCommit."""
        g = self.groups.get(group_id)
        if epoch < 0 and (g is None or not g.members):
            return None
        m = g.members.get(member_id) if g is not None else None
        if m is None:
            return "unknown_member_id"
        if epoch != m.epoch:
            return "stale_member_epoch"
        return None

    def delete(self, group_id: str) -> None:
        g = self.groups.get(group_id)
        if g is not None and g.members:
            raise GroupError("non_empty_group", f"group {group_id} has members")
        self.groups.pop(group_id, None)

    def expire(self) -> list[tuple[str, str]]:
        now, gone = time.monotonic(), []
        for g in list(self.groups.values()):
            for mid, m in list(g.members.items()):
                # Silent for its session, or holding partitions it was told to give up for
                # longer than its rebalance timeout: fenced, as Kafka fences it.
                if (now - m.last_seen > SESSION_TIMEOUT_MS / 1000 or m.revoking_since is not None
                        and now - m.revoking_since > m.rebalance_timeout_ms / 1000):
                    self._remove(g, mid)
                    gone.append((g.group_id, mid))
        return gone
