"""Incremental fetch sessions (KIP-227), as Kafka's FetchSessionCache keeps them.

A consumer of many partitions sends one full Fetch (session_id 0, epoch 0); the broker
remembers its partitions (fetch offset, max bytes) under a new session id and answers
with that id. Later Fetches name the session and the next epoch and carry only what
changed: partitions added or whose fetch offset moved, and `forgotten_topics_data` to
drop. The answer to such an incremental Fetch holds only the partitions with something
to say: records, an error, or a high watermark, last stable offset or log start offset
that moved since the session last answered them. So a consumer of a thousand
partitions sends and receives a few bytes per idle poll.

    session_id 0, epoch -1       a full fetch, no session (sessionless)
    session_id 0, epoch 0        a full fetch that opens a session
    session_id S, epoch 0        closes S, and opens a new session
    session_id S, epoch -1       closes S; a full, sessionless fetch
    session_id S, epoch N > 0    incremental: S must exist (else FETCH_SESSION_ID_NOT_FOUND)
                                 and expect N (else INVALID_FETCH_SESSION_EPOCH)

A session named by topic ids (Fetch v13+) cannot be continued by names, nor the reverse
(FETCH_SESSION_TOPIC_ID_ERROR). At most `max.incremental.fetch.session.cache.slots`
(Kafka's 1,000) sessions are kept; the least recently used goes first. Nothing here
reads a log: `shim.handlers.fetch` asks `open` which partitions to read and `answered`
which of them to answer.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

from shim.protocol import ErrorCode

FINAL_EPOCH, INITIAL_EPOCH, NO_SESSION = -1, 0, 0
MAX_SESSIONS = 1000  # Kafka's max.incremental.fetch.session.cache.slots


@dataclass
class SessionPartition:
    """One partition of a session; its attributes are named as a Fetch request's."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    # What the session last answered for it (None: never answered).
    answered: tuple[int, int, int] | None = None


@dataclass
class Session:
    session_id: int
    by_topic_id: bool
    epoch: int = 1  # the epoch the next incremental Fetch must carry
    # (topic name or id, partition) -> the topic ref and the partition, in request order.
    partitions: OrderedDict = field(default_factory=OrderedDict)


@dataclass
class Plan:
    """What one Fetch reads: `items` as (topic ref, partition) pairs, and how to answer."""

    items: list
    session: Session | None = None
    incremental: bool = False
    error: ErrorCode = ErrorCode.none

    @property
    def session_id(self) -> int:
        return self.session.session_id if self.session is not None else NO_SESSION


def _key(ref: dict, by_topic_id: bool, partition: int) -> tuple:
    return (ref["topic_id"] if by_topic_id else ref["name"], partition)


class FetchSessions:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[int, Session] = OrderedDict()  # least recently used first

    def open(self, session_id: int, epoch: int, by_topic_id: bool, asked: list,
             forgotten: list) -> Plan:
        """The plan for a Fetch: `asked` is its (topic ref, partition entry) pairs,
        `forgotten` its (topic ref, partition numbers) pairs."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self.sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH or not asked:
                return Plan(asked)  # sessionless (Kafka opens no session for nothing)
            session = Session(self._new_id(), by_topic_id)
            self._update(session, asked, [])
            self.sessions[session.session_id] = session
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)
            return Plan(asked, session)
        session = self.sessions.get(session_id)
        if session is None:
            return Plan([], error=ErrorCode.fetch_session_id_not_found)
        if epoch != session.epoch:
            return Plan([], error=ErrorCode.invalid_fetch_session_epoch)
        if session.by_topic_id != by_topic_id:
            return Plan([], error=ErrorCode.fetch_session_topic_id_error)
        self.sessions.move_to_end(session_id)
        self._update(session, asked, forgotten)
        session.epoch += 1
        return Plan([(ref, p) for ref, p in session.partitions.values()], session, True)

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    @staticmethod
    def _update(session: Session, asked: list, forgotten: list) -> None:
        for ref, parts in forgotten:
            for p in parts:
                session.partitions.pop(_key(ref, session.by_topic_id, p), None)
        for ref, p in asked:
            key = _key(ref, session.by_topic_id, p.partition)
            known = session.partitions.get(key)
            if known is None:
                session.partitions[key] = (ref, SessionPartition(p.partition, p.fetch_offset,
                                                                 p.partition_max_bytes))
            else:
                known[1].fetch_offset = p.fetch_offset
                known[1].partition_max_bytes = p.partition_max_bytes

    @staticmethod
    def answered(plan: Plan, responses: list) -> list:
        """The topics to answer: in a session, each partition's marks are remembered;
        an incremental answer keeps only partitions with records, an error, or marks
        that moved since the session last answered them."""
        if plan.session is None:
            return responses
        by_key = {key: sp for key, (_, sp) in plan.session.partitions.items()}
        out = []
        for t in responses:
            kept = []
            for p in t["partitions"]:
                sp = by_key.get(_key(t, plan.session.by_topic_id, p["partition_index"]))
                marks = (p["high_watermark"], p["last_stable_offset"], p["log_start_offset"])
                changed = sp is None or sp.answered != marks
                if sp is not None:
                    sp.answered = marks
                if not plan.incremental or changed or p["records"] or p["error_code"]:
                    kept.append(p)
            if kept:
                out.append({**t, "partitions": kept})
        return out
