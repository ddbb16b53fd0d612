"""A camus deployment's views and source schemas, kept in the Kafka cluster itself.

Kafka refuses topic configs it does not know, so `camus.source`, `camus.filter` and
`camus.schema` cannot live on the cluster's topics as they do on the embedded broker's.
They live in one compacted topic per deployment, `__camus-catalog-<deployment>` (one
partition, the cluster's replication): key `view/<name>` holds a view's definition as
JSON {"source", "filter", "schema"} (the source's schema text when the view was made, so a
view's meaning never depends on a later lookup), key `schema/<topic>` a source topic's
schema {"schema"}; a null value (a tombstone) removes the entry. Every camus instance of
the deployment reads the same topic, from its start, and follows it: the catalog is
Kafka's, replicated and ordered by Kafka, with no protocol of camus's own around it.

`create_view`, `set_schema` and `delete_view` are the operations the command line (and
any front door that accepts CreateTopics with camus's configs) performs: each checks its
input first (a filter or schema that does not parse fails with its line and column, as
on the embedded broker), then changes the cluster's topics, then records the change.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from shim.cluster.connection import ClusterSettings
from shim.schema import Schema, parse_schema
from shim.subscriptions import check_compilable, kafka_spec, view_filter

CATALOG_PREFIX = "__camus-catalog-"
LEGAL_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
TIMEOUT = 30.0  # seconds an admin or catalog operation may take
# librdkafka's own log lines (a broker going away, a coordinator moving) go to Python's
# logging under this name instead of straight to stderr.
KAFKA_LOG = logging.getLogger("camus.cluster.kafka")


class CatalogError(Exception):
    """A catalog operation that cannot be done; the message says why, and `code` names the
    Kafka error (a `shim.protocol.ErrorCode` member name) a CreateTopics or DeleteTopics
    through the front door answers with."""

    def __init__(self, message: str, code: str = "invalid_config") -> None:
        super().__init__(message)
        self.code = code


def _kafka_code(exc: KafkaException) -> str:
    """The ErrorCode member name of a confluent-kafka error (librdkafka names the broker's
    errors as Kafka does, in capitals; its own, negative ones, are not Kafka's)."""
    err = exc.args[0]
    return err.name().lower() if err.code() > 0 else "unknown_server_error"


def check_name(what: str, name: str) -> str:
    if not LEGAL_NAME.fullmatch(name):
        raise CatalogError(f"illegal {what} {name!r}: up to 249 of [A-Za-z0-9._-]")
    return name


def catalog_topic(deployment: str) -> str:
    return CATALOG_PREFIX + check_name("deployment name", deployment)


def group_id(deployment: str, view: str) -> str:
    """The consumer group that materialises `view` in `deployment`: its committed offsets
    on the source are how far the view is complete."""
    return f"camus.{deployment}.view.{view}"


def transactional_id(deployment: str, view: str, instance: str) -> str:
    """The transactional producer of one instance for one view."""
    return f"camus.{deployment}.view.{view}.{instance}"


@dataclass(frozen=True)
class View:
    name: str
    source: str
    filter: str
    schema: str | None  # the source's camus.schema text when the view was created

    def parsed_schema(self) -> Schema | None:
        return parse_schema(self.schema) if self.schema else None

    def to_json(self) -> bytes:
        return json.dumps({"source": self.source, "filter": self.filter,
                           "schema": self.schema}).encode()


@dataclass
class State:
    """What the catalog says, as of the offset read up to (`next_offset`)."""

    schemas: dict[str, str] = field(default_factory=dict)
    views: dict[str, View] = field(default_factory=dict)
    next_offset: int = 0

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One catalog record; one that is not camus's (no known key) is skipped."""
        kind, _, name = (key or b"").decode(errors="replace").partition("/")
        doc = json.loads(value) if value else None
        if kind == "view":
            if doc is None:
                self.views.pop(name, None)
            else:
                self.views[name] = View(name, doc["source"], doc["filter"], doc.get("schema"))
        elif kind == "schema":
            if doc is None:
                self.schemas.pop(name, None)
            else:
                self.schemas[name] = doc["schema"]


class Catalog:
    """One deployment's catalog topic: read it (`read`, `follow`) and write it."""

    def __init__(self, conn: ClusterSettings, deployment: str) -> None:
        self.conn = conn
        self.deployment = deployment
        self.topic = catalog_topic(deployment)
        self._consumer = None
        self.state = State()

    # --- the topic --------------------------------------------------------------------

    def ensure_topic(self, admin=None) -> None:
        """Create the catalog topic if the cluster lacks it (compacted, one partition, as
        many replicas as the cluster's default allows, up to 3)."""
        admin = admin or _admin(self.conn)
        md = admin.list_topics(timeout=TIMEOUT)
        if self.topic in md.topics:
            return
        replicas = min(3, len(md.brokers))
        topic = NewTopic(self.topic, 1, replicas, config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([topic], operation_timeout=TIMEOUT)[self.topic].result(TIMEOUT)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another instance won
                raise CatalogError(f"cannot create the catalog topic {self.topic}: "
                                   f"{exc.args[0].str()}") from None

    # --- reading ----------------------------------------------------------------------

    def _reader(self):
        if self._consumer is None:
            # A group id is required by the client, but nothing joins or commits: the
            # catalog is read whole by every instance, from its start.
            self._consumer = Consumer(self.conn.client_config(logger=KAFKA_LOG, **{
                "group.id": f"camus.{self.deployment}.catalog-reader",
                "enable.auto.commit": False, "enable.partition.eof": False}))
            self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        return self._consumer

    def follow(self, timeout: float = TIMEOUT) -> State:
        """Read what was added to the catalog since the last call (everything, the first
        time), up to its end as of this call; `state` afterwards."""
        consumer = self._reader()
        deadline = time.monotonic() + timeout
        while True:
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, 0),
                                                         timeout=timeout)
                break
            except KafkaException as exc:
                # A catalog topic created a moment ago may not be in every broker's
                # metadata yet (UNKNOWN_PARTITION), or its leader may be moving.
                if time.monotonic() > deadline:
                    raise CatalogError(f"the catalog {self.topic} cannot be read: "
                                       f"{exc.args[0].str()}") from None
                time.sleep(0.2)
        while self.state.next_offset < high:
            if time.monotonic() > deadline:
                raise CatalogError(f"the catalog {self.topic} was not read to its end "
                                   f"({self.state.next_offset} of {high}) in {timeout:g} s")
            for msg in consumer.consume(1000, 0.2):
                if msg.error():
                    if msg.error().fatal():
                        raise KafkaException(msg.error())
                    continue
                self.state.apply(msg.key(), msg.value())
                self.state.next_offset = msg.offset() + 1
        return self.state

    def read(self, timeout: float = TIMEOUT) -> State:
        return self.follow(timeout)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # --- writing ----------------------------------------------------------------------

    def _write(self, key: str, value: bytes | None) -> None:
        """One catalog record, acknowledged by every in-sync replica before this returns."""
        errors: list = []
        producer = Producer(self.conn.client_config(True, logger=KAFKA_LOG, **{"acks": "all",
                                                               "enable.idempotence": True}))
        producer.produce(self.topic, value, key.encode(), partition=0,
                         on_delivery=lambda err, _msg: errors.append(err))
        left = producer.flush(TIMEOUT)
        if left or not errors or errors[0] is not None:
            raise CatalogError(f"writing {key} to {self.topic} failed: "
                               f"{errors[0].str() if errors and errors[0] else 'timed out'}")

    def put_schema(self, topic: str, text: str | None) -> None:
        self._write(f"schema/{topic}", json.dumps({"schema": text}).encode() if text else None)

    def put_view(self, view: View) -> None:
        self._write(f"view/{view.name}", view.to_json())

    def remove_view(self, name: str) -> None:
        self._write(f"view/{name}", None)


# --- operations -------------------------------------------------------------------------

def _admin(conn: ClusterSettings) -> AdminClient:
    return AdminClient(conn.client_config(logger=KAFKA_LOG))


def _topic(admin: AdminClient, name: str, patience: float = 5.0):
    """The cluster's metadata of topic `name`, or None. A topic created a moment ago (by the
    same client, just before) may not be in the answering broker's metadata yet: missing
    topics are asked about again for `patience` seconds. The question names no topic: a
    Metadata request naming a missing one creates it on a cluster that auto-creates topics."""
    deadline = time.monotonic() + patience
    while True:
        topic = admin.list_topics(timeout=TIMEOUT).topics.get(name)
        if topic is not None and topic.error is None and topic.partitions:
            return topic
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def _create_topic(admin: AdminClient, what: str, name: str, partitions: int, replication: int,
                  configs: dict[str, str], validate_only: bool) -> None:
    try:
        admin.create_topics([NewTopic(name, partitions, replication, config=dict(configs))],
                            operation_timeout=TIMEOUT,
                            validate_only=validate_only)[name].result(TIMEOUT)
    except KafkaException as exc:
        raise CatalogError(f"cannot create {what} {name!r}: {exc.args[0].str()}",
                           _kafka_code(exc)) from None


def check_view(name: str, source: str, filter_text: str, schema_text: str | None) -> View:
    """The view these define, or the parser's error (line and column in the filter, or in
    the schema); nothing is read from or written to the cluster."""
    check_name("view name", name)
    schema = parse_schema(schema_text) if schema_text else None
    check_compilable(view_filter(kafka_spec(), schema, filter_text))
    return View(name, source, filter_text, schema_text)


def create_view(conn: ClusterSettings, deployment: str, name: str, source: str,
                filter_text: str, replication: int | None = None,
                configs: dict[str, str] | None = None, validate_only: bool = False
                ) -> tuple[View, int, int]:
    """Make `name` a view of `source` through `filter_text`: the view topic is created in
    the cluster with the source's partition count and replication factor (or
    `replication`) and Kafka's own topic `configs` (retention and the like), then the view is
    recorded in the deployment's catalog, where the deployment's materialisers find it.
    CatalogError (or the parser's error) if it cannot be; a view topic created before a
    failed catalog write is deleted again. `validate_only`: check everything, change
    nothing (CreateTopics' validate_only). The view, its partition count and replication
    factor."""
    catalog = Catalog(conn, deployment)
    admin = _admin(conn)
    try:
        catalog.ensure_topic(admin)
        state = catalog.read()
        check_name("view name", name)
        if source in state.views:
            raise CatalogError(f"camus.source={source!r} is itself a view; name its source")
        md = admin.list_topics(timeout=TIMEOUT)
        if name in md.topics or name in state.views:
            raise CatalogError(f"topic {name!r} already exists", "topic_already_exists")
        src = _topic(admin, source)
        if src is None:
            raise CatalogError(f"camus.source={source!r}: no such topic in the cluster")
        view = check_view(name, source, filter_text, state.schemas.get(source))
        partitions = len(src.partitions)
        rf = replication or len(next(iter(src.partitions.values())).replicas)
        _create_topic(admin, "view topic", name, partitions, rf, configs or {}, validate_only)
        if validate_only:
            return view, partitions, rf
        try:
            catalog.put_view(view)
        except BaseException:
            admin.delete_topics([name], operation_timeout=TIMEOUT)
            raise
        return view, partitions, rf
    finally:
        catalog.close()


def set_schema(conn: ClusterSettings, deployment: str, topic: str, text: str | None) -> None:
    """Give source topic `topic` the schema `text` (None: none). Refused while views of the
    topic exist, as on the embedded broker: their filters were checked against the old one."""
    if text:
        parse_schema(text)  # SchemaError with the column, before anything is written
    catalog = Catalog(conn, deployment)
    admin = _admin(conn)
    try:
        catalog.ensure_topic(admin)
        state = catalog.read()
        if topic in state.views:
            raise CatalogError(f"{topic!r} is a view: a view takes its source's camus.schema")
        users = sorted(v.name for v in state.views.values() if v.source == topic)
        if users and state.schemas.get(topic) != text:
            raise CatalogError(f"camus.schema of {topic!r} cannot change while views use it "
                               f"({', '.join(users)})")
        if _topic(admin, topic) is None:
            raise CatalogError(f"no topic {topic!r} in the cluster",
                               "unknown_topic_or_partition")
        catalog.put_schema(topic, text)
    finally:
        catalog.close()


def create_source(conn: ClusterSettings, deployment: str, name: str, partitions: int,
                  replication: int, configs: dict[str, str], schema_text: str,
                  validate_only: bool = False) -> None:
    """A plain topic of the cluster with Kafka's `configs`, given the camus.schema
    `schema_text` in the catalog (a CreateTopics with camus.schema through the front door:
    the cluster would refuse the config itself). The topic is deleted again if its schema
    cannot be recorded."""
    parse_schema(schema_text)  # SchemaError with the column, before anything is created
    admin = _admin(conn)
    _create_topic(admin, "topic", name, partitions, replication, configs, validate_only)
    if validate_only:
        return
    try:
        set_schema(conn, deployment, name, schema_text)
    except BaseException:
        admin.delete_topics([name], operation_timeout=TIMEOUT)
        raise


def delete_view(conn: ClusterSettings, deployment: str, name: str,
                group_timeout: float = TIMEOUT) -> None:
    """Remove the view from the catalog (its materialisers stop), then its topic and its
    consumer group (the group only once no materialiser is a member any more, waiting up
    to `group_timeout` seconds for them to leave; 0: not at all)."""
    catalog = Catalog(conn, deployment)
    admin = _admin(conn)
    try:
        state = catalog.read()
        if name not in state.views:
            raise CatalogError(f"no view {name!r} in deployment {deployment!r}",
                               "unknown_topic_or_partition")
        catalog.remove_view(name)
    finally:
        catalog.close()
    try:
        admin.delete_topics([name], operation_timeout=TIMEOUT)[name].result(TIMEOUT)
    except KafkaException as exc:
        raise CatalogError(f"view {name!r} left the catalog, but its topic was not deleted: "
                           f"{exc.args[0].str()}", _kafka_code(exc)) from None
    if group_timeout > 0:
        delete_group(conn, deployment, name, group_timeout)


def delete_group(conn: ClusterSettings, deployment: str, name: str,
                 timeout: float = TIMEOUT) -> None:
    """Delete a removed view's consumer group once its members (materialisers, which leave
    when they read the view's tombstone) are gone."""
    admin = _admin(conn)
    deadline = time.monotonic() + timeout
    group = group_id(deployment, name)
    while True:  # members leave when their instances read the tombstone
        try:
            admin.delete_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
            return
        except KafkaException as exc:
            if "GROUP_ID_NOT_FOUND" in exc.args[0].name():
                return
            if time.monotonic() > deadline:
                raise CatalogError(f"view {name!r} is deleted, but its consumer group {group} "
                                   f"still has members: {exc.args[0].str()}") from None
            time.sleep(0.5)
