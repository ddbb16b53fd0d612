"""Topic definitions: names, ids, partition counts, configs, schemas and views.

A topic is created through CreateTopics, auto-created by Metadata, or declared in the
`--config` file; its configs are Kafka's (`retention.ms`, `retention.bytes`,
`segment.bytes`, anything else is kept and described back) plus camus's:

  camus.schema   the filterable fields (`shim.schema`), e.g. `price:u32=$.price`
  camus.source   makes the topic a view of that source topic
  camus.filter   the view's filter over the source's schema, e.g. `price > 100`, or
                 with state, `stock == "GOOGL" and avg(price) > 50` (docs/stateful.md,
                 "Kafka views")

Everything is checked here, before the topic exists, so a bad schema or filter fails
the CreateTopics call with the parser's line and column. A view has no partitions of
its own: it mirrors its source's, and its logs are derived from the source by the data
path. Definitions persist in `<data-dir>/topics.json` (rewritten atomically).
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from compiler.ast import Const, Filter
from compiler.errors import CamusError
from shim.schema import Schema, parse_schema
from shim.subscriptions import check_compilable, kafka_spec, parse_view

log = logging.getLogger("camus.topics")

LEGAL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def legal_topic_name(name: str) -> bool:
    """Kafka's rule: 1-249 of [A-Za-z0-9._-], and not "." or ".."."""
    return bool(LEGAL_NAME.match(name)) and name not in (".", "..")
SCHEMA, SOURCE, FILTER = "camus.schema", "camus.source", "camus.filter"

# Defaults described back by DescribeConfigs (Kafka's, where we honour them).
DEFAULTS = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "segment.bytes": str(8 << 20),
    "max.message.bytes": str(1 << 20 | 12),
    "message.timestamp.type": "CreateTime",
    "compression.type": "producer",
    # Kafka's defaults: never fsync on a count or a timer (the OS writes back; see shim/log.py).
    "flush.messages": str(2**63 - 1),
    "flush.ms": str(2**63 - 1),
    # Log compaction (shim/compaction.py), with Kafka's defaults.
    "min.cleanable.dirty.ratio": "0.5",
    "delete.retention.ms": "86400000",
}
CLEANUP_POLICIES = {"delete": (False, True), "compact": (True, False),
                    "compact,delete": (True, True), "delete,compact": (True, True)}
MIN_SEGMENT_BYTES = 14  # Kafka's lower bound for segment.bytes

# Broker-wide defaults a --config file may set, by Kafka's broker property names.
BROKER_DEFAULTS = {"log.flush.interval.messages": "flush.messages",
                   "log.flush.interval.ms": "flush.ms"}


class TopicError(Exception):
    def __init__(self, message: str, code_name: str) -> None:
        super().__init__(message)
        self.code_name = code_name  # an ErrorCode member name


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    number: int  # the 32-bit topic id the camus Kafka header carries
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    schema: Schema | None = None
    filter: Filter = Const(True)
    lanes: tuple[int, ...] = ()  # a view's averaged slots, in lane order (shim.subscriptions)
    reads_state: bool = False  # a view's filter reads state (found once: filters may be large)
    defaults: dict[str, str] = field(default_factory=lambda: DEFAULTS, repr=False)

    @property
    def source(self) -> str | None:
        return self.configs.get(SOURCE)

    @property
    def is_view(self) -> bool:
        return SOURCE in self.configs

    @property
    def stateful(self) -> bool:
        """A view whose filter reads state: its source's records are fed to it on their own."""
        return self.is_view and self.reads_state

    def config(self, name: str) -> str:
        return self.configs.get(name, self.defaults.get(name, ""))

    def int_config(self, name: str) -> int:
        try:
            return int(self.config(name))
        except ValueError:
            return int(self.defaults[name])

    @property
    def compacted(self) -> bool:
        """cleanup.policy holds `compact` (a view: its source's, see Broker)."""
        return CLEANUP_POLICIES.get(self.config("cleanup.policy").replace(" ", ""),
                                    (False, True))[0]

    @property
    def deletes(self) -> bool:
        """cleanup.policy holds `delete`: retention.ms and retention.bytes apply."""
        return CLEANUP_POLICIES.get(self.config("cleanup.policy").replace(" ", ""),
                                    (False, True))[1]

    def to_json(self) -> dict:
        return {"name": self.name, "topic_id": str(self.topic_id), "number": self.number,
                "partitions": self.partitions, "configs": self.configs}


class Catalog:
    """Every topic by name, id and number; the only place topics are made or removed."""

    def __init__(self, directory: Path | None = None, spec=None,
                 defaults: dict[str, str] | None = None, numbering=None) -> None:
        self.path = directory / "topics.json" if directory else None
        self.defaults = {**DEFAULTS, **(defaults or {})}  # a topic's configs fall back to these
        self.by_name: dict[str, Topic] = {}
        self.next_number = 1
        # `numbering(name)`: the number a new topic is to carry, when someone else (the
        # fabric's controller) numbers topics for every broker; None: `next_number`.
        self.numbering = numbering
        # Query fields compare by identity: filters must be parsed against the data path's spec.
        self.spec = spec or kafka_spec()
        # Entries of topics.json that no longer load: reported, skipped, and written back
        # unchanged, so a restart never fails on one and never loses one.
        self.broken: list[dict] = []
        if self.path and self.path.exists():
            doc = json.loads(self.path.read_text())
            self.next_number = doc.get("next_number", 1)
            for t in doc.get("topics", []):
                try:
                    topic = Topic(t["name"], uuid.UUID(t["topic_id"]), t["number"],
                                  t["partitions"], dict(t["configs"]), defaults=self.defaults)
                    self._derive(topic)
                except (CamusError, KeyError, TypeError, ValueError) as exc:
                    log.error("%s: skipping topic %r: %s", self.path, t.get("name") if isinstance(t, dict) else t, exc)
                    self.broken.append(t)
                    continue
                self.by_name[topic.name] = topic

    def __iter__(self):
        return iter(list(self.by_name.values()))

    def get(self, name: str | None) -> Topic | None:
        return self.by_name.get(name) if name else None

    def by_id(self, topic_id: uuid.UUID | None) -> Topic | None:
        return next((t for t in self.by_name.values() if t.topic_id == topic_id), None)

    def resolve(self, ref: dict) -> Topic | None:
        """The topic a request item names, by name or (newer versions) by id."""
        return self.get(ref.get("name")) or self.by_id(ref.get("topic_id"))

    def views_of(self, name: str) -> list[Topic]:
        return [t for t in self.by_name.values() if t.source == name]

    def partitions_of(self, topic: Topic) -> int:
        src = self.get(topic.source) if topic.is_view else None
        return src.partitions if src else topic.partitions

    def check(self, name: str, partitions: int, configs: dict[str, str],
              partitions_defaulted: bool = True, existing: Topic | None = None) -> Topic:
        """The topic `CreateTopics` would make; TopicError says why it cannot be.
        `partitions_defaulted`: the count was not given (a view takes its source's then).
        `existing`: the topic whose configs would become these (AlterConfigs)."""
        if not legal_topic_name(name):
            raise TopicError(f"illegal topic name {name!r}: up to 249 of [A-Za-z0-9._-]",
                             "invalid_topic_exception")
        if name in self.by_name and existing is None:
            raise TopicError(f"topic {name!r} already exists", "topic_already_exists")
        if partitions < 1:
            raise TopicError(f"number of partitions must be at least 1, not {partitions}",
                             "invalid_partitions")
        for key in ("retention.ms", "retention.bytes", "segment.bytes", "flush.messages", "flush.ms",
                    "delete.retention.ms"):
            if key in configs:
                try:
                    int(configs[key])
                except ValueError:
                    raise TopicError(f"{key}={configs[key]!r} is not an integer",
                                     "invalid_config") from None
        if configs.get("cleanup.policy", "delete").replace(" ", "") not in CLEANUP_POLICIES:
            raise TopicError(f"cleanup.policy={configs['cleanup.policy']!r}: expected delete, "
                             "compact or compact,delete", "invalid_config")
        if "min.cleanable.dirty.ratio" in configs:
            try:
                ratio = float(configs["min.cleanable.dirty.ratio"])
            except ValueError:
                ratio = -1.0
            if not 0 <= ratio <= 1:
                raise TopicError(f"min.cleanable.dirty.ratio={configs['min.cleanable.dirty.ratio']!r}:"
                                 " must be a number from 0 to 1", "invalid_config")
        if int(configs.get("segment.bytes", MIN_SEGMENT_BYTES)) < MIN_SEGMENT_BYTES:
            raise TopicError(f"segment.bytes={configs['segment.bytes']}: must be at least "
                             f"{MIN_SEGMENT_BYTES}, as on Kafka", "invalid_config")
        if int(configs.get("delete.retention.ms", 0)) < 0:
            raise TopicError(f"delete.retention.ms={configs['delete.retention.ms']}: must be 0 or "
                             "more", "invalid_config")
        for key in ("retention.bytes", "retention.ms", "flush.messages", "flush.ms"):
            if key in configs and int(configs[key]) < -1:
                raise TopicError(f"{key}={configs[key]}: must be -1 or more", "invalid_config")
        if (FILTER in configs) != (SOURCE in configs):
            raise TopicError(f"a view needs both {SOURCE} and {FILTER}", "invalid_config")
        topic = Topic(name, uuid.uuid4(), self._number(name), partitions, dict(configs),
                      defaults=self.defaults)
        if topic.is_view:
            source = self.get(configs[SOURCE])
            if source is None:
                raise TopicError(f"{SOURCE}={configs[SOURCE]!r}: no such topic",
                                 "invalid_config")
            if source.is_view:
                raise TopicError(f"{SOURCE}={source.name!r} is itself a view; name its source",
                                 "invalid_config")
            if SCHEMA in configs:
                raise TopicError(f"a view takes its source's {SCHEMA}", "invalid_config")
            if partitions != source.partitions and not partitions_defaulted:
                # Not an error: kafka-python's and other clients' topic types always carry a
                # count. The answer carries the real count; the log and `camus topic` say so.
                log.warning("view %r gets its source %r's %d partitions, not the %d asked for",
                            name, source.name, source.partitions, partitions)
            topic.partitions = source.partitions
        try:
            self._derive(topic)
            if topic.is_view:
                check_compilable(topic.filter, self.spec)
        except CamusError as exc:
            raise TopicError(str(exc), "invalid_config") from None
        if topic.stateful and self.get(topic.source).compacted:
            raise TopicError(f"{FILTER} reads state, and {topic.source!r} is compacted "
                             f"(cleanup.policy={self.get(topic.source).config('cleanup.policy')}): "
                             "a view with state is its filter over every record of its source, "
                             "in order, which compaction removes from under it", "invalid_config")
        return topic

    def _number(self, name: str) -> int:
        number = None
        if self.numbering is not None:
            try:
                number = self.numbering(name)
            except (OSError, ValueError) as exc:
                raise TopicError(f"no topic number for {name!r} from the network's "
                                 f"controller: {exc}", "kafka_storage_error") from None
            if any(t.number == number and t.name != name for t in self.by_name.values()):
                raise TopicError(f"topic number {number} for {name!r} is held here by another "
                                 "topic (a data directory from a run outside this network)",
                                 "invalid_request")
        return self.next_number if number is None else number

    def add(self, topic: Topic) -> Topic:
        """Record a topic (written to topics.json before this returns, or not recorded)."""
        self.by_name[topic.name] = topic
        self.next_number += 1
        try:
            self.save()
        except OSError:
            del self.by_name[topic.name]
            self.next_number -= 1
            raise
        return topic

    def set_aside(self, topic: Topic) -> None:
        """Leave a topic that cannot be opened out of this run, keeping its entry on disk."""
        if self.by_name.pop(topic.name, None) is not None:
            self.broken.append(topic.to_json())

    def remove(self, topic: Topic) -> None:
        del self.by_name[topic.name]
        self.save()

    def set_configs(self, topic: Topic, checked: Topic) -> None:
        """Give `topic` the configs, schema and filter of `checked` (from `check`), saved."""
        old = (topic.configs, topic.schema, topic.filter, topic.lanes, topic.reads_state)
        if checked.configs.get(SCHEMA) != topic.configs.get(SCHEMA):
            topic.schema = checked.schema  # else the old one, with what it counted
        topic.configs, topic.filter = checked.configs, checked.filter
        topic.lanes, topic.reads_state = checked.lanes, checked.reads_state
        try:
            self.save()
        except OSError:
            topic.configs, topic.schema, topic.filter, topic.lanes, topic.reads_state = old
            raise

    def set_partitions(self, topic: Topic, count: int) -> None:
        old = topic.partitions
        for t in [topic, *self.views_of(topic.name)]:
            t.partitions = count
        try:
            self.save()
        except OSError:
            for t in [topic, *self.views_of(topic.name)]:
                t.partitions = old
            raise

    def save(self) -> None:
        if self.path is None:
            return
        doc = {"next_number": self.next_number,
               "topics": [t.to_json() for t in self] + self.broken}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, self.path)

    def _derive(self, topic: Topic) -> None:
        """Schema and filter from the configs (a view reads through its source's schema)."""
        if SCHEMA in topic.configs:
            topic.schema = parse_schema(topic.configs[SCHEMA])
        if topic.is_view:
            source = self.get(topic.source)
            schema = source.schema if source else None
            topic.schema = schema
            view = parse_view(self.spec, schema, topic.configs[FILTER])
            topic.filter, topic.lanes, topic.reads_state = view.filter, view.lanes, view.stateful
