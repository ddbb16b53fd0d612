"""`camus serve --kafka`: camus as the front door of an Apache Kafka cluster.

The cluster keeps topics, records, groups, offsets and transactions; camus is a
protocol-level proxy in front of it (docs/cluster.md, "The front door", says why a proxy
rather than a client of its own). To a client camus is a one-broker cluster: Metadata says
camus leads every partition, FindCoordinator says camus coordinates every group and
transaction, DescribeCluster lists camus alone. Behind that, each request goes, at the
version the client sent, to the broker that really owns it:

- by partition leader: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords,
  DescribeProducers. A request whose partitions have different leaders is split, one part
  per leader, and the answers are merged into one.
- by coordinator: the group APIs by group id, the transaction APIs by transactional id
  (InitProducerId without one goes anywhere); several groups or ids in one request are
  split like partitions.
- to every broker: ListGroups and ListTransactions, whose answers are concatenated.
- to any broker: everything else (topic administration, configs, ACLs, ...), which the
  cluster itself forwards to its controller where needed.
- to the view hook (`FrontDoor.views`, shim/cluster/views.py): the topics of a CreateTopics
  with camus.* configs, and views (and sources of views) named in a DeleteTopics, which the
  cluster would refuse or must not see alone; the rest of such a request goes on as above.

Each client connection gets its own connections to the brokers it needs, as the client
would have had without camus, so a parked JoinGroup or a long-polling Fetch delays only
that client, and one producer's requests reach a partition's leader in the order it sent
them (idempotent sequence numbers and transactions are checked by the broker, unchanged).
A request is forwarded as the client's own bytes, only the correlation id replaced, unless
it must be split or is a Fetch: Fetch goes without a fetch session (KIP-227 sessions belong
to one broker, and a client's partitions may be led by several), which the protocol allows
and every client handles by sending full fetches. Answers are rewritten only where they
name brokers.

Failures: a broker camus cannot reach before sending answers that request with the
retriable error a client expects (NOT_LEADER_OR_FOLLOWER for a partition,
COORDINATOR_NOT_AVAILABLE for a coordinator); a broker connection that breaks with requests
in flight closes the client's connection, since nobody knows whether they took effect: the
client sees what it would have seen had the broker died under it, and retries
(idempotently where it is idempotent).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from shim.protocol import REGISTRY, Api, ErrorCode, ProtocolError, Registry, ServerConnection
from shim.protocol import api_versions, build, encode_response
from shim.protocol.framing import frame

from .connection import (BrokerConnection, BrokerUnavailable, ClusterSettings,
                         answer_with_correlation, decode_response, encode_request)

log = logging.getLogger("camus.front_door")

# APIs a client may use that camus does not forward: SASL is between the client and camus's
# listener, not the cluster's (camus authenticates to the cluster itself); WriteTxnMarkers is
# between brokers; share groups (KIP-932) and streams groups (KIP-1071) need routing
# (share sessions, share-partition leaders) that the front door does not do yet.
NOT_FORWARDED = {17, 36, 27, *range(76, 80), *range(83, 93)}
API_VERSIONS, METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 18, 3, 10, 60
PRODUCE, FETCH, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 1, 19, 22
# A view hook (`FrontDoor.views`, shim.cluster.views.Views) answers what the cluster would
# refuse: topics with camus.* configs in CreateTopics, and views named in DeleteTopics. Its
# methods: `create(name, partitions, replication, configs, validate_only)` -> (ErrorCode,
# message or None, partitions, replication factor), `delete(name)` -> (ErrorCode, message or
# None), `view_sources()` -> {view: source}.
DESCRIBE_TOPIC_PARTITIONS, LIST_GROUPS, LIST_TRANSACTIONS = 75, 16, 66
DESCRIBE_CONFIGS, BROKER_RESOURCES = 32, (4, 8)  # resource types BROKER, BROKER_LOGGER

# Partition-routed APIs: request topics field, partitions field, partition index field (None:
# the partitions are plain ints), response topics field, response partitions field.
PARTITIONED = {
    0: ("topic_data", "partition_data", "index", "responses", "partition_responses"),
    1: ("topics", "partitions", "partition", "responses", "partitions"),
    2: ("topics", "partitions", "partition_index", "topics", "partitions"),
    21: ("topics", "partitions", "partition_index", "topics", "partitions"),
    23: ("topics", "partitions", "partition", "topics", "partitions"),
    61: ("topics", "partition_indexes", None, "topics", "partitions"),
}
GROUP, TRANSACTION = 0, 1  # FindCoordinator key types
# Coordinator-routed APIs naming one key: the field holding it, and its key type.
ONE_KEY = {8: ("group_id", GROUP), 11: ("group_id", GROUP), 12: ("group_id", GROUP),
           13: ("group_id", GROUP), 14: ("group_id", GROUP), 28: ("group_id", GROUP),
           47: ("group_id", GROUP), 68: ("group_id", GROUP),
           25: ("transactional_id", TRANSACTION), 26: ("transactional_id", TRANSACTION)}
# Coordinator-routed APIs naming several keys: request list field, how an item names its key
# (None: the items are the keys), response list field, key type.
MANY_KEYS = {15: ("groups", None, "groups", GROUP), 42: ("groups_names", None, "results", GROUP),
             69: ("group_ids", None, "groups", GROUP),
             65: ("transactional_ids", None, "transaction_states", TRANSACTION),
             9: ("groups", "group_id", "groups", GROUP),  # OffsetFetch v8+ (v0-7: ONE_KEY)
             24: ("transactions", "transactional_id", "results_by_transaction", TRANSACTION)}
FAN_OUT = {LIST_GROUPS: "groups", LIST_TRANSACTIONS: "transaction_states"}
RETRIABLE_COORDINATOR = {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available}

DELETE_TOPICS = 20


CLOSE = object()  # dispatch's answer meaning: close the client's connection


class FrontDoorError(Exception):
    """camus cannot stand in front of the cluster (unreachable, refused, too old)."""


def _replace(item: Any, **changes: Any) -> Any:
    """`dataclasses.replace` with only the fields this version has (Metadata v0 has no
    controller_id, DescribeGroups v0 no throttle_time, ...)."""
    names = {f.name for f in dataclasses.fields(item)}
    return dataclasses.replace(item, **{k: v for k, v in changes.items() if k in names})


def _throttle(answers: list[Any]) -> Any:
    return max((a.throttle_time for a in answers if hasattr(a, "throttle_time")), default=None)


def _topic_name(item: Any) -> str | None:
    name = getattr(item, "name", None)
    return getattr(item, "topic", None) if name is None else name


def _partition_indexes(item: Any, field: str, index: str | None) -> list[int]:
    return [p if index is None else getattr(p, index) for p in getattr(item, field)]


class ClusterState:
    """What camus knows of the cluster: brokers, leaders, topic ids, coordinators. Learnt
    from every Metadata and FindCoordinator answer, the clients' and camus's own."""

    def __init__(self) -> None:
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.names: dict[uuid.UUID, str] = {}
        self.coordinators: dict[tuple[int, str], int] = {}
        self.cluster_id: str | None = None
        self.refreshed = 0.0

    def learn_metadata(self, body: Any) -> None:
        if body.brokers:
            self.brokers = {b.node_id: (b.host, b.port) for b in body.brokers}
        self.cluster_id = getattr(body, "cluster_id", None) or self.cluster_id
        for topic in body.topics:
            if topic.error_code != ErrorCode.none or topic.name is None:
                continue
            topic_id = getattr(topic, "topic_id", None)
            if topic_id is not None and topic_id.int:
                self.names[topic_id] = topic.name
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                if p.leader_id >= 0:
                    self.leaders[key] = p.leader_id
                else:
                    self.leaders.pop(key, None)
        self.refreshed = time.monotonic()

    def name_of(self, item: Any) -> str | None:
        name = _topic_name(item)
        if name is None and getattr(item, "topic_id", None) is not None:
            return self.names.get(item.topic_id)
        return name


class FrontDoor:
    """The cluster seen from camus: settings, state, and camus's own connections."""

    def __init__(self, settings: ClusterSettings, node_id: int = 0, views: Any = None) -> None:
        self.settings = settings
        self.node_id = node_id
        self.views = views  # the view hook (above), or None: camus.* configs are refused
        self.state = ClusterState()
        self.registry = Registry()
        self._control: dict[Any, BrokerConnection] = {}  # node id or (host, port) -> connection
        self._metadata_version = 12
        self._find_version = 3

    # --- startup ----------------------------------------------------------------------

    async def start(self) -> None:
        """Reach the cluster through a bootstrap server, learn the versions it speaks and its
        brokers; FrontDoorError says why not."""
        problems = []
        for host, port in self.settings.bootstrap:
            try:
                conn = await BrokerConnection(self.settings, host, port).open()
                versions = await conn.request(API_VERSIONS, 3, {
                    "client_software_name": "camus", "client_software_version": "front-door"})
            except BrokerUnavailable as exc:
                problems.append(str(exc))
                continue
            if versions.error_code != ErrorCode.none:
                conn.close()
                problems.append(f"{host}:{port}: ApiVersions answered {versions.error_code.name}")
                continue
            self._control[(host, port)] = conn
            self._build_registry({k.api_key: (k.min_version, k.max_version) for k in versions.api_keys})
            await self.refresh_metadata([])
            return
        raise FrontDoorError("no bootstrap server answered: " + "; ".join(problems))

    def _build_registry(self, cluster: dict[int, tuple[int, int]]) -> None:
        """Every API both the cluster and camus's codec speak, at the versions both speak;
        ApiVersions is camus's own."""
        from kio.schema.index import api_key_map, schema_name_map
        for key, (lo, hi) in sorted(cluster.items()):
            if key in NOT_FORWARDED or key == API_VERSIONS:
                continue
            known = sorted(schema_name_map.get(api_key_map.get(key, ""), {}))
            ours = REGISTRY.get(key)
            lo2, hi2 = max(lo, known[0] if known else 1), min(hi, known[-1] if known else -1)
            if ours is not None:  # the codec's floors (Produce v3, Fetch v4) hold here too
                lo2, hi2 = max(lo2, ours.min_version), min(hi2, ours.max_version)
            if lo2 > hi2:
                continue
            name = ours.name if ours is not None else api_key_map[key].replace("_", " ").title().replace(" ", "")
            error = ours.error_response if ours is not None else _error_builder(key)
            expects = ours.expects_response if ours is not None else (lambda body: True)
            self.registry.register(Api(key, name, lo2, hi2, error, expects,
                                       advertised_min=ours.advertised_min if ours else None))
            if key == METADATA:
                self._metadata_version = min(hi2, 12)
            if key == FIND_COORDINATOR:
                self._find_version = min(hi2, 3)
        api = REGISTRY.get(API_VERSIONS)
        self.registry.register(api)

    # --- camus's own questions ----------------------------------------------------------

    async def control(self, node: int | None = None) -> BrokerConnection:
        """A connection for camus's own requests: to `node`, or to any broker."""
        candidates: list[Any] = [node] if node is not None else [
            *[k for k, c in self._control.items() if c.usable], *sorted(self.state.brokers),
            *self.settings.bootstrap]
        problems = []
        for key in candidates:
            conn = self._control.get(key)
            if conn is not None and conn.usable:
                return conn
            address = self.state.brokers.get(key) if isinstance(key, int) else key
            if address is None:
                continue
            try:
                conn = await BrokerConnection(self.settings, *address).open()
            except BrokerUnavailable as exc:
                problems.append(str(exc))
                continue
            other = self._control.get(key)
            if other is not None and other.usable:  # another client's request opened one meanwhile
                conn.close()
                return other
            self._control[key] = conn
            return conn
        raise BrokerUnavailable("; ".join(problems) or "no broker known")

    async def refresh_metadata(self, topics: list[str] | None) -> Any:
        """Ask the cluster about `topics` ([]: brokers only, None: every topic)."""
        conn = await self.control()
        body = await conn.request(METADATA, self._metadata_version, {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False})
        self.state.learn_metadata(body)
        return body

    async def coordinator(self, key_type: int, key: str) -> int | ErrorCode:
        """The broker coordinating `key`, or the error FindCoordinator gave."""
        found = self.state.coordinators.get((key_type, key))
        if found is not None:
            return found
        conn = await self.control()
        body = await conn.request(FIND_COORDINATOR, self._find_version,
                                  {"key": key, "key_type": key_type})
        if body.error_code != ErrorCode.none:
            return ErrorCode(body.error_code)
        self.state.brokers.setdefault(body.node_id, (body.host, body.port))
        self.state.coordinators[(key_type, key)] = body.node_id
        return body.node_id

    def close(self) -> None:
        for conn in self._control.values():
            conn.close()


def _error_builder(key: int):
    """The whole-request error answer for an API camus's broker does not implement (the
    family modules in shim.protocol build the others): per partition where it has them."""
    if key in PARTITIONED:
        topics_f, parts_f, index_f, resp_topics, resp_parts = PARTITIONED[key]

        def partitioned(body: Any, version: int, code: ErrorCode, message: str | None):
            return {resp_topics: [
                {"topic": _topic_name(t), "name": _topic_name(t), resp_parts: [
                    {"partition": i, "partition_index": i, "error_code": code, "leader_epoch": -1,
                     "end_offset": -1} for i in _partition_indexes(t, parts_f, index_f)]}
                for t in getattr(body, topics_f)]}
        return partitioned

    def whole(body: Any, version: int, code: ErrorCode, message: str | None):
        return {"error_code": code, "error_message": message}
    return whole


def _replace_leader(item: Any, node_id: int) -> Any:
    """A partition answer's KIP-951 leader hint, emptied: it names a cluster broker."""
    leader = getattr(item, "current_leader", None)
    changes = {}
    if leader is not None and leader.leader_id >= 0:
        changes["current_leader"] = dataclasses.replace(leader, leader_id=-1, leader_epoch=-1)
    if getattr(item, "preferred_read_replica", -1) >= 0:
        changes["preferred_read_replica"] = -1
    return dataclasses.replace(item, **changes) if changes else item


class ClientSession:
    """One client connection: its own broker connections, and the requests in flight."""

    def __init__(self, door: FrontDoor, host: str, port: int) -> None:
        self.door = door
        self.host, self.port = host, port  # the listener the client came in on: advertised
        self.upstream: dict[tuple[int, str], BrokerConnection] = {}
        self._any: int | None = None
        # Fetch over several leaders (_split_fetch): per leader, the question still waiting
        # there and its answer to come; per partition, the watermarks last seen.
        self._parked: dict[int, tuple[Any, asyncio.Future]] = {}
        self._marks: dict[tuple[Any, int], tuple[int, int, int]] = {}

    def close(self) -> None:
        for conn in self.upstream.values():
            conn.close()

    # --- connections ------------------------------------------------------------------

    async def connection(self, node: int, lane: str = "main") -> BrokerConnection:
        """This client's connection to `node`: "main" for everything but the two steps of a
        Fetch over several leaders, which have a connection each ("now", "wait")."""
        conn = self.upstream.get((node, lane))
        if conn is not None and conn.usable:
            return conn
        address = self.door.state.brokers.get(node)
        if address is None:
            await self.door.refresh_metadata([])
            address = self.door.state.brokers.get(node)
            if address is None:
                raise BrokerUnavailable(f"broker {node} is not in the cluster's metadata")
        conn = await BrokerConnection(self.door.settings, *address).open()
        self.upstream[(node, lane)] = conn
        return conn

    async def any_node(self) -> int:
        """A broker for requests any broker answers: one this client already talks to."""
        for (node, lane), conn in self.upstream.items():
            if conn.usable and lane == "main":
                return node
        if not self.door.state.brokers:
            await self.door.refresh_metadata([])
        if self._any in self.door.state.brokers:
            nodes = [self._any, *sorted(self.door.state.brokers)]
        else:
            nodes = sorted(self.door.state.brokers)
        problems = []
        for node in nodes:
            try:
                await self.connection(node)
            except BrokerUnavailable as exc:
                problems.append(str(exc))
                continue
            self._any = node
            return node
        raise BrokerUnavailable("; ".join(problems) or "the cluster has no broker")

    # --- dispatch ---------------------------------------------------------------------

    async def dispatch(self, request, payload: bytes) -> Awaitable[bytes | None] | bytes | None:
        """Send `request` on its way; what comes back is the framed answer, or an awaitable
        of it (awaiting it keeps answers in request order), or None (no answer: acks=0).
        Everything sent to the cluster is sent before this returns, so the requests of one
        client reach each broker in the order the client sent them."""
        key = request.api_key
        try:
            if key == API_VERSIONS:
                return encode_response(request, api_versions.response(request, self.door.registry))
            if key in PARTITIONED:
                return await self._by_partition(request, payload)
            if key == 9 and request.api_version < 8:
                return await self._by_key(request, payload, request.body.group_id, GROUP)
            if key == 24 and request.api_version < 4:
                return await self._by_key(request, payload, request.body.v3_and_below_transactional_id,
                                          TRANSACTION)
            if key in ONE_KEY:
                field, key_type = ONE_KEY[key]
                return await self._by_key(request, payload, getattr(request.body, field), key_type)
            if key == INIT_PRODUCER_ID and request.body.transactional_id is not None:
                return await self._by_key(request, payload, request.body.transactional_id, TRANSACTION)
            if key in MANY_KEYS:
                return await self._by_keys(request, payload)
            if key in FAN_OUT:
                return await self._fan_out(request, payload)
            if key == CREATE_TOPICS:
                return await self._create_topics(request, payload)
            if key == DELETE_TOPICS and self.door.views is not None:
                return await self._delete_topics(request, payload)
            if key == DESCRIBE_CONFIGS:
                return await self._describe_configs(request, payload)
            return await self._anywhere(request, payload)
        except BrokerUnavailable as exc:
            log.warning("%s v%d from %s: %s", request.api.name, request.api_version,
                        request.client_id, exc)
            return self._unavailable(request)

    def _unavailable(self, request) -> bytes | None:
        """The answer when the cluster cannot be reached before anything was sent."""
        key = request.api_key
        if key == METADATA:
            return CLOSE  # an empty topic list would read as "no topics": close, the client retries
        code = (ErrorCode.not_leader_or_follower if key in PARTITIONED
                else ErrorCode.coordinator_not_available if key in ONE_KEY or key in MANY_KEYS
                or key in (9, 24, INIT_PRODUCER_ID, FIND_COORDINATOR) or key in FAN_OUT
                else ErrorCode.request_timed_out)
        if not request.expects_response:
            return None
        return encode_response(request, request.error_response(code, "the Kafka cluster is unreachable"))

    def _raw(self, conn: BrokerConnection, request, payload: bytes, rewrite=None):
        """Forward the client's bytes; the answer with the client's correlation id, rewritten
        by `rewrite(body) -> body or None (unchanged)` when given."""
        future = conn.send(payload, request.expects_response)
        correlation = request.correlation_id

        async def answer() -> bytes:
            await conn.drain()
            reply = await future
            if rewrite is not None:
                body = decode_response(request.api_key, request.api_version, reply)
                changed = rewrite(body)
                if changed is not None:
                    return encode_response(request, changed)
            return frame(answer_with_correlation(reply, correlation))
        if future is None:
            return _drained(conn)
        return answer()

    async def _anywhere(self, request, payload: bytes):
        node = await self.any_node()
        rewrite = {METADATA: self._rewrite_metadata,
                   FIND_COORDINATOR: self._rewrite_coordinator(request),
                   DESCRIBE_CLUSTER: self._rewrite_cluster,
                   DESCRIBE_TOPIC_PARTITIONS: self._rewrite_topic_partitions}.get(request.api_key)
        return self._raw(await self.connection(node), request, payload, rewrite)

    # --- rewriting answers that name brokers ---------------------------------------------

    def _camus_broker(self) -> dict[str, Any]:
        return {"node_id": self.door.node_id, "broker_id": self.door.node_id,
                "host": self.host, "port": self.port, "rack": None}

    def _rewrite_metadata(self, body: Any) -> Any:
        self.door.state.learn_metadata(body)
        topics = tuple(dataclasses.replace(t, partitions=tuple(
            dataclasses.replace(p, leader_id=self.door.node_id) if p.leader_id >= 0 else p
            for p in t.partitions)) for t in body.topics)
        return _replace(body, topics=topics, controller_id=self.door.node_id,
                        brokers=(build(_element(body, "brokers"), self._camus_broker()),))

    def _rewrite_coordinator(self, request) -> Callable[[Any], Any]:
        return lambda body: self._coordinator_answer(request, body)

    def _coordinator_answer(self, request, body: Any) -> Any:
        state, camus = self.door.state, self._camus_broker()
        key_type = getattr(request.body, "key_type", GROUP)
        if hasattr(body, "coordinators"):  # v4+: one entry per key
            entries = []
            for c in body.coordinators:
                if c.error_code == ErrorCode.none:
                    state.coordinators[(key_type, c.key)] = c.node_id
                    state.brokers.setdefault(c.node_id, (c.host, c.port))
                    c = dataclasses.replace(c, node_id=camus["node_id"], host=camus["host"],
                                            port=camus["port"])
                entries.append(c)
            return dataclasses.replace(body, coordinators=tuple(entries))
        if body.error_code != ErrorCode.none:
            return None
        state.coordinators[(key_type, request.body.key)] = body.node_id
        state.brokers.setdefault(body.node_id, (body.host, body.port))
        return dataclasses.replace(body, node_id=camus["node_id"], host=camus["host"], port=camus["port"])

    def _rewrite_cluster(self, body: Any) -> Any:
        return _replace(body, controller_id=self.door.node_id,
                        brokers=(build(_element(body, "brokers"), self._camus_broker()),))

    def _rewrite_topic_partitions(self, body: Any) -> Any:
        return dataclasses.replace(body, topics=tuple(dataclasses.replace(t, partitions=tuple(
            dataclasses.replace(p, leader_id=self.door.node_id) if p.leader_id >= 0 else p
            for p in t.partitions)) for t in body.topics))

    # --- by partition leader ------------------------------------------------------------

    async def _by_partition(self, request, payload: bytes):
        key, body, state = request.api_key, request.body, self.door.state
        topics_f, parts_f, index_f, resp_topics, resp_parts = PARTITIONED[key]
        topics = getattr(body, topics_f)
        unknown = {state.name_of(t) for t in topics
                   if any((state.name_of(t), i) not in state.leaders
                          for i in _partition_indexes(t, parts_f, index_f))}
        # Ask the cluster before routing to a fallback broker, at most every 100 ms (a
        # client producing to a topic that does not exist must not make camus ask per
        # request). A topic named by an id camus has not seen (Produce v13, Fetch v13+,
        # after camus restarted) can only be found by asking about every topic.
        if unknown and time.monotonic() - state.refreshed > 0.1:
            await self.door.refresh_metadata(None if None in unknown else sorted(unknown))
        plan: dict[int | None, list[Any]] = {}
        for t in topics:
            name = state.name_of(t)
            split: dict[int | None, list[Any]] = {}
            for p in getattr(t, parts_f):
                index = p if index_f is None else getattr(p, index_f)
                split.setdefault(state.leaders.get((name, index)), []).append(p)
            for node, parts in split.items():
                plan.setdefault(node, []).append(dataclasses.replace(t, **{parts_f: tuple(parts)}))
        if None in plan:  # unknown topics or partitions: a broker answers for itself
            fallback = await self.any_node()
            plan.setdefault(fallback, []).extend(plan.pop(None))
        session_free = key != FETCH or request.api_version < 7 or (
            body.session_id == 0 and body.session_epoch == -1)
        if len(plan) == 1 and session_free:
            (node,) = plan
            conn = await self.connection(node)
            return self._raw(conn, request, payload, self._partition_rewriter(request))
        parts = []
        for node, items in plan.items():
            changes = {topics_f: tuple(items)}
            if key == FETCH and request.api_version >= 7:
                changes.update(session_id=0, session_epoch=-1, forgotten_topics_data=())
            parts.append((node, dataclasses.replace(body, **changes)))
        merge = lambda answers: self._merge_partitions(request, answers, resp_topics, resp_parts)  # noqa: E731
        if key == FETCH and len(parts) > 1 and body.max_wait.total_seconds() > 0:
            return await self._split_fetch(request, parts, merge)
        return await self._split(request, parts, merge)

    async def _split_fetch(self, request, parts: list[tuple[int, Any]], merge):
        """A Fetch over several leaders, answered as soon as one has something to say (records
        or an error), as a broker answers a Fetch once any partition has data.

        First every leader is asked without waiting (max_wait 0); if one has news, that is
        the answer. Otherwise each is asked with the client's max_wait, and the first answer
        with news is the answer: the partitions of leaders still long-polling are answered
        empty (with the watermarks they last gave), and their pending answers are kept
        ("parked"). The client's next Fetch, if it asks a leader the same question (same
        partitions, same offsets), waits on that parked answer instead of asking again; a
        leader with a different question still parked is not asked to wait again until it
        answers, so at most one long poll per leader is pending. The two steps use their own
        broker connections ("now" and "wait"), so an immediate question never queues behind
        a long poll. A quiet broker's long poll never holds back a busy one's records."""
        version = request.api_version
        now = [(node, dataclasses.replace(body, max_wait=datetime.timedelta(0)))
               for node, body in parts]
        answers = await (await self._split(request, now, lambda answers: answers, lane="now"))
        self._learn_marks(answers)
        if any(_has_news(a) for a in answers):
            return encode_response(request, merge(answers))
        waiting: dict[asyncio.Future, tuple[int, Any]] = {}
        for node, body in parts:
            key, parked = _fetch_key(body), self._parked.get(node)
            if parked is not None and not parked[1].done():
                if parked[0] == key:
                    waiting[parked[1]] = (node, body)
                continue  # another question still waits there: none queues behind it
            try:
                conn = await self.connection(node, "wait")
            except BrokerUnavailable:
                continue  # answered empty; the next Fetch's first step says NOT_LEADER
            future = conn.send(encode_request(FETCH, version, body, request.client_id,
                                              request.correlation_id))
            self._parked[node] = (key, future)
            waiting[future] = (node, body)
            await conn.drain()

        async def answer() -> bytes:
            got: list[Any] = []
            pending = set(waiting)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    node, body = waiting[future]
                    if self._parked.get(node, (None, None))[1] is future:
                        del self._parked[node]
                    got.append(self._parked_answer(request, future, body))
                self._learn_marks(got)
                if any(_has_news(a) for a in got):
                    break
            return encode_response(request, merge(got + self._empty_parts(request, parts, got)))
        return answer()

    def _parked_answer(self, request, future: asyncio.Future, body: Any) -> Any:
        """A finished sub-fetch's answer; a broker connection that broke answers its
        partitions NOT_LEADER_OR_FOLLOWER (nothing was read, so nothing is lost)."""
        if future.exception() is not None:
            return build(request.response_class, request.api.error_response(
                body, request.api_version, ErrorCode.not_leader_or_follower, None))
        return decode_response(FETCH, request.api_version, future.result())

    def _learn_marks(self, answers: list[Any]) -> None:
        for a in answers:
            for t in a.responses:
                for p in t.partitions:
                    if p.error_code == ErrorCode.none and p.high_watermark >= 0:
                        self._marks[(_topic_key(t), p.partition_index)] = (
                            p.high_watermark, p.last_stable_offset, p.log_start_offset)

    def _empty_parts(self, request, parts: list[tuple[int, Any]], answered: list[Any]) -> list[Any]:
        """Answers for the parts no leader has answered yet: each partition without records
        or error, with the watermarks its leader last gave."""
        seen = {(_topic_key(t), p.partition_index) for a in answered for t in a.responses
                for p in t.partitions}
        empties = []
        for _, body in parts:
            data = request.api.error_response(body, request.api_version, ErrorCode.none, None)
            for t in data["responses"]:
                key = t.get("topic_id") or t.get("topic")
                t["partitions"] = [dict(p, **dict(zip(("high_watermark", "last_stable_offset",
                                                        "log_start_offset"),
                                                       self._marks.get((key, p["partition_index"]),
                                                                       (-1, -1, -1)))))
                                   for p in t["partitions"] if (key, p["partition_index"]) not in seen]
            data["responses"] = [t for t in data["responses"] if t["partitions"]]
            if data["responses"]:
                empties.append(build(request.response_class, data))
        return empties

    def _partition_rewriter(self, request):
        key = request.api_key
        if key not in (PRODUCE, FETCH):
            return None
        resp_parts = PARTITIONED[key][4]

        def rewrite(body: Any) -> Any | None:
            changed = False
            topics = []
            for t in body.responses:
                parts = []
                for p in getattr(t, resp_parts):
                    q = _replace_leader(p, self.door.node_id)
                    if q is not p:
                        changed = True
                        self._forget_leader(self.door.state.name_of(t), getattr(
                            p, "index", getattr(p, "partition_index", -1)))
                    if p.error_code == ErrorCode.not_leader_or_follower:
                        self._forget_leader(self.door.state.name_of(t), getattr(
                            p, "index", getattr(p, "partition_index", -1)))
                    parts.append(q)
                topics.append(dataclasses.replace(t, **{resp_parts: tuple(parts)}))
            if getattr(body, "node_endpoints", None):
                changed = True
            if not changed:
                return None
            changes = {"responses": tuple(topics)}
            if hasattr(body, "node_endpoints"):
                changes["node_endpoints"] = ()
            if key == FETCH and request.api_version >= 7:
                changes["session_id"] = 0
            return dataclasses.replace(body, **changes)
        return rewrite

    def _forget_leader(self, topic: str | None, partition: int) -> None:
        # The client asks Metadata next (through camus), which tells camus the new leader.
        self.door.state.leaders.pop((topic, partition), None)

    def _merge_partitions(self, request, answers: list[Any], resp_topics: str, resp_parts: str):
        merged: dict[Any, Any] = {}
        order = []
        for a in answers:
            for t in getattr(a, resp_topics):
                name = (_topic_name(t), getattr(t, "topic_id", None))
                if name in merged:
                    merged[name] = dataclasses.replace(merged[name], **{
                        resp_parts: getattr(merged[name], resp_parts) + getattr(t, resp_parts)})
                else:
                    merged[name] = t
                    order.append(name)
        first = answers[0]
        body = _replace(first, **{resp_topics: tuple(merged[n] for n in order)},
                        throttle_time=_throttle(answers),
                        error_code=next((a.error_code for a in answers
                                         if getattr(a, "error_code", 0)), ErrorCode.none))
        rewrite = self._partition_rewriter(request)
        if rewrite is not None:
            body = rewrite(body) or body
        if request.api_key == FETCH and request.api_version >= 7:
            body = dataclasses.replace(body, session_id=0)
        return body

    async def _split(self, request, parts: list[tuple[int, Any]], merge, lane: str = "main"):
        """Send one part per broker (each encoded at the client's version); the merged answer.
        A broker camus cannot reach answers its part with the request's retriable error."""
        unreachable = (ErrorCode.not_leader_or_follower if request.api_key in PARTITIONED
                       else ErrorCode.coordinator_not_available)
        futures = []
        for node, body in parts:
            if isinstance(node, ErrorCode):  # a part already refused (FindCoordinator's error)
                futures.append((node, body))
                continue
            try:
                conn = await self.connection(node, lane)
            except BrokerUnavailable as exc:
                log.warning("%s: %s", request.api.name, exc)
                futures.append((unreachable, body))
                continue
            payload = encode_request(request.api_key, request.api_version, body,
                                     request.client_id, request.correlation_id)
            futures.append((conn, conn.send(payload, request.expects_response)))
        if not request.expects_response:
            return None

        async def answer() -> Any:
            answers = []
            for conn, future in futures:
                if isinstance(conn, ErrorCode):  # `future` is the part's body: answer it with an error
                    data = request.api.error_response(future, request.api_version, conn,
                                                      "the broker is unreachable" if conn == unreachable
                                                      else None)
                    answers.append(build(request.response_class, data))
                    continue
                await conn.drain()
                answers.append(decode_response(request.api_key, request.api_version, await future))
            merged = merge(answers)
            return merged if isinstance(merged, list) else encode_response(request, merged)
        return answer()

    # --- by coordinator -----------------------------------------------------------------

    async def _by_key(self, request, payload: bytes, key: str, key_type: int):
        node = await self.door.coordinator(key_type, key)
        if isinstance(node, ErrorCode):
            return encode_response(request, request.error_response(node))
        try:
            conn = await self.connection(node)
        except BrokerUnavailable:
            self.door.state.coordinators.pop((key_type, key), None)
            raise

        def watch(body: Any) -> None:
            if _has_error(body, RETRIABLE_COORDINATOR):
                self.door.state.coordinators.pop((key_type, key), None)
            return None
        return self._raw(conn, request, payload, watch)

    async def _by_keys(self, request, payload: bytes):
        list_f, item_key, resp_f, key_type = MANY_KEYS[request.api_key]
        plan: dict[int, list[Any]] = {}
        refused: list[tuple[Any, ErrorCode]] = []
        for item in getattr(request.body, list_f):
            key = item if item_key is None else getattr(item, item_key)
            node = await self.door.coordinator(key_type, key)
            if isinstance(node, ErrorCode):
                refused.append((item, node))
            else:
                plan.setdefault(node, []).append(item)
        if len(plan) == 1 and not refused:
            (node,) = plan
            return self._raw(await self.connection(node), request, payload)
        parts = [(node, dataclasses.replace(request.body, **{list_f: tuple(items)}))
                 for node, items in plan.items()]
        for item, code in refused:  # answered with FindCoordinator's error
            parts.append((code, dataclasses.replace(request.body, **{list_f: (item,)})))

        def merge(answers: list[Any]) -> Any:
            return _replace(answers[0], **{resp_f: tuple(x for a in answers for x in getattr(a, resp_f))},
                            throttle_time=_throttle(answers))
        return await self._split(request, parts, merge)

    async def _fan_out(self, request, payload: bytes):
        if not self.door.state.brokers:
            await self.door.refresh_metadata([])
        parts = [(node, request.body) for node in sorted(self.door.state.brokers)]
        resp_f = FAN_OUT[request.api_key]

        def merge(answers: list[Any]) -> Any:
            # unknown_state_filters (ListTransactions) is the same from every broker: the first's.
            return _replace(answers[0], **{resp_f: tuple(x for a in answers for x in getattr(a, resp_f))},
                            throttle_time=_throttle(answers),
                            error_code=next((a.error_code for a in answers if a.error_code),
                                            ErrorCode.none))
        return await self._split(request, parts, merge)

    # --- broker configs ----------------------------------------------------------------

    async def _describe_configs(self, request, payload: bytes):
        """A broker's configs live on that broker. Clients know one broker, camus: its node
        id stands for any one of the cluster's brokers (the answer names camus again); a
        cluster broker's own id, which a client may have from the cluster's tools, is sent
        to that broker; topics and the cluster-wide default (empty name) go anywhere."""
        camus = str(self.door.node_id)
        anywhere = await self.any_node()
        plan: dict[int, list[Any]] = {}
        renamed = False
        for r in request.body.resources:
            node = anywhere
            if r.resource_type in BROKER_RESOURCES and r.resource_name:
                if r.resource_name == camus:
                    r, renamed = dataclasses.replace(r, resource_name=str(anywhere)), True
                elif r.resource_name.isdigit() and int(r.resource_name) in self.door.state.brokers:
                    node = int(r.resource_name)
            plan.setdefault(node, []).append(r)
        if len(plan) == 1 and not renamed:
            (node,) = plan
            return self._raw(await self.connection(node), request, payload)
        parts = [(node, dataclasses.replace(request.body, resources=tuple(items)))
                 for node, items in plan.items()]

        def merge(answers: list[Any]) -> Any:
            results = []
            for a in answers:
                for r in a.results:
                    if renamed and r.resource_type in BROKER_RESOURCES and r.resource_name == str(anywhere):
                        r = dataclasses.replace(r, resource_name=camus)
                    results.append(r)
            return _replace(answers[0], results=tuple(results), throttle_time=_throttle(answers))
        return await self._split(request, parts, merge)

    # --- views -------------------------------------------------------------------------

    async def _create_topics(self, request, payload: bytes):
        views, plain = [], []
        for t in request.body.topics:
            configs = {c.name: c.value for c in t.configs}
            (views if any(k.startswith("camus.") for k in configs) else plain).append((t, configs))
        if not views:
            return await self._anywhere(request, payload)
        results = []
        for t, configs in views:
            partitions = replication = -1
            if self.door.views is None:
                code, message = ErrorCode.invalid_config, (
                    f"topic {t.name!r}: camus.* configs ({', '.join(sorted(k for k in configs if k.startswith('camus.')))}) "
                    "are not taken by this front door: it has no view catalog (FrontDoor.views)")
            else:
                code, message, partitions, replication = await self.door.views.create(
                    t.name, t.num_partitions, t.replication_factor, configs,
                    bool(getattr(request.body, "validate_only", False)))
            results.append({"name": t.name, "error_code": code, "error_message": message,
                            "num_partitions": partitions, "replication_factor": replication})
        local = build(request.response_class, {"topics": results})
        if not plain:
            return encode_response(request, local)
        body = dataclasses.replace(request.body, topics=tuple(t for t, _ in plain))
        return await self._forward_rest(request, body, "topics", local)

    async def _forward_rest(self, request, body: Any, field: str, local: Any):
        """`body` (the request less what camus answered itself, in `local`) to any broker;
        the answer is the broker's with camus's results after its own."""
        conn = await self.connection(await self.any_node())
        future = conn.send(encode_request(request.api_key, request.api_version, body,
                                          request.client_id, request.correlation_id))

        async def answer() -> bytes:
            await conn.drain()
            remote = decode_response(request.api_key, request.api_version, await future)
            return encode_response(request, dataclasses.replace(
                remote, **{field: getattr(remote, field) + getattr(local, field)}))
        return answer()

    async def _delete_topics(self, request, payload: bytes):
        """Views named in a DeleteTopics leave the catalog (and the cluster) through the view
        hook; a source of views is refused, as on the embedded broker; the other topics are
        the cluster's to delete. Topics named by id only (v6+) go to the cluster: a view's
        topic is deleted there, but stays in the catalog."""
        by_id = request.api_version >= 6
        names = ([t.name for t in request.body.topics] if by_id
                 else list(request.body.topic_names))
        sources = await self.door.views.view_sources()
        users: dict[str, list[str]] = {}
        for view, source in sorted(sources.items()):
            users.setdefault(source, []).append(view)
        mine = {n for n in names if n in sources or n in users}
        if not mine:
            return await self._anywhere(request, payload)
        results = []
        for name in names:
            if name in sources:
                code, message = await self.door.views.delete(name)
            elif name in users and not set(users[name]) <= set(names):
                code, message = ErrorCode.policy_violation, (
                    f"topic {name!r} is the source of views {', '.join(users[name])}; "
                    "delete them first")
            elif name in users:  # its views go in the same request: the cluster deletes it
                mine.discard(name)
                continue
            else:
                continue
            results.append({"name": name, "error_code": code, "error_message": message,
                            "topic_id": uuid.UUID(int=0)})
        local = build(request.response_class, {"responses": results})
        if by_id:
            rest = tuple(t for t in request.body.topics if t.name not in mine)
            body = dataclasses.replace(request.body, topics=rest)
        else:
            rest = tuple(n for n in names if n not in mine)
            body = dataclasses.replace(request.body, topic_names=rest)
        if not rest:
            return encode_response(request, local)
        return await self._forward_rest(request, body, "responses", local)


async def _drained(conn: BrokerConnection) -> None:
    await conn.drain()
    return None


def _element(body: Any, field: str) -> type:
    import typing
    hint = typing.get_type_hints(type(body))[field]
    return typing.get_args(hint)[0]


def _topic_key(item: Any) -> Any:
    """A Fetch topic's name, or its id from v13 on."""
    topic_id = getattr(item, "topic_id", None)
    return topic_id if topic_id is not None else _topic_name(item)


def _fetch_key(body: Any) -> tuple:
    """What a sub-fetch asks, for telling whether a parked one asks the same."""
    return (body.isolation_level if hasattr(body, "isolation_level") else 0,
            tuple((_topic_key(t), p.partition, p.fetch_offset) for t in body.topics
                  for p in t.partitions))


def _has_news(answer: Any) -> bool:
    """Whether a Fetch answer holds records or an error for any partition."""
    if getattr(answer, "error_code", ErrorCode.none) != ErrorCode.none:
        return True
    return any(p.records or p.error_code != ErrorCode.none
               for t in answer.responses for p in t.partitions)


def _has_error(body: Any, codes: set[ErrorCode]) -> bool:
    """Whether any error_code field anywhere in `body` is one of `codes`."""
    if dataclasses.is_dataclass(body):
        for f in dataclasses.fields(body):
            value = getattr(body, f.name)
            if f.name == "error_code" and value in codes:
                return True
            if isinstance(value, tuple) or dataclasses.is_dataclass(value):
                if _has_error(value, codes):
                    return True
    elif isinstance(body, tuple):
        return any(_has_error(x, codes) for x in body if dataclasses.is_dataclass(x))
    return False


# --- the listeners ------------------------------------------------------------------------

async def _serve_client(door: FrontDoor, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter, host: str, port: int) -> None:
    from shim.protocol.framing import FrameDecoder

    peer = writer.get_extra_info("peername") or ("?", 0)
    session = ClientSession(door, host, port)
    decoder, codec = FrameDecoder(), ServerConnection(door.registry)
    answers: asyncio.Queue = asyncio.Queue()

    async def write_answers() -> None:
        try:
            await answer_in_order()
        finally:  # however it ends, the connection ends: the reader sees it closed
            writer.close()

    async def answer_in_order() -> None:
        # Answers leave in request order; one whose broker connection broke closes the
        # client's connection (its outcome is unknown, as if the broker had died under it).
        while True:
            item = await answers.get()
            if item is CLOSE:
                return
            if not isinstance(item, bytes):
                try:
                    item = await item
                except BrokerUnavailable as exc:
                    log.warning("client %s:%s: %s; closing its connection", peer[0], peer[1], exc)
                    return
                except Exception:
                    log.exception("client %s:%s: an answer failed; closing its connection",
                                  peer[0], peer[1])
                    return
                if item is None:
                    continue
            writer.write(item)
            if answers.empty():
                await writer.drain()

    writing = asyncio.create_task(write_answers())
    try:
        while not writing.done():
            data = await reader.read(1 << 16)
            if not data:
                break
            decoder.feed(data)
            while (payload := decoder.next_frame()) is not None:
                try:
                    request = codec.decode(payload)
                except ProtocolError as exc:
                    log.warning("client %s:%s: %s (%s)", peer[0], peer[1], exc, exc.error_code.name)
                    answers.put_nowait(CLOSE if exc.response is None else exc.response)
                    continue
                result = await session.dispatch(request, payload)
                if result is not None:
                    answers.put_nowait(result)
        # The client stopped sending: let the answers it is owed go out first.
        answers.put_nowait(CLOSE)
        await writing
    except ProtocolError as exc:  # a broken frame: nothing after it can be trusted
        log.warning("client %s:%s: %s", peer[0], peer[1], exc)
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
        pass
    except Exception:
        log.exception("client %s:%s: closing its connection", peer[0], peer[1])
    finally:
        writing.cancel()
        while not answers.empty():  # answers the client will never get: not awaited, closed
            item = answers.get_nowait()
            if asyncio.iscoroutine(item):
                item.close()
        session.close()
        writer.close()


async def serve(door: FrontDoor, listeners, security=None, stop: asyncio.Event | None = None,
                on_ready=None) -> None:
    """Serve `listeners` (shim.security.listeners.Listener, PLAINTEXT or SSL) in front of the
    cluster until `stop` is set or SIGINT/SIGTERM; FrontDoorError if the cluster cannot be
    reached at startup."""
    import signal

    await door.start()
    log.info("camus in front of the Kafka cluster %s (cluster id %s, brokers %s)",
             door.settings.describe(), door.state.cluster_id,
             ", ".join(f"{n}@{h}:{p}" for n, (h, p) in sorted(door.state.brokers.items())))
    servers = []
    tasks: set[asyncio.Task] = set()

    async def client(reader, writer, lst):
        task = asyncio.current_task()
        tasks.add(task)
        try:
            await _serve_client(door, reader, writer, lst.host, lst.port)
        finally:
            tasks.discard(task)

    for lst in listeners:
        tls = None
        if lst.tls:
            from shim.security.tls import server_context
            tls = server_context(security, False)
        server = await asyncio.start_server(lambda r, w, lst=lst: client(r, w, lst), lst.host,
                                            lst.port, reuse_address=True, ssl=tls)
        lst.port = server.sockets[0].getsockname()[1]
        servers.append(server)
        print(f"camus: listening on {lst.host}:{lst.port}" if lst.protocol == "PLAINTEXT"
              else f"camus: listening on {lst.protocol}://{lst.host}:{lst.port}", flush=True)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass  # not in the main thread (tests)
    if on_ready is not None:
        on_ready(door)
    try:
        await stop.wait()
    finally:
        for server in servers:
            server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        door.close()
