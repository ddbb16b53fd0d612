"""The broker's state and operations, independent of sockets and of the wire format.

`Broker` owns the topic catalog, the source partition logs (on disk with a data dir),
the view logs (derived: rebuilt from the source through the target at start-up and when
a view is created), the data path and its target (`Config.target`, opened by
`controller.targets.open_target`), the group coordinator, committed offsets and
idempotent-producer state. Handlers (`shim.handlers`) translate requests into calls
here. Everything runs on one asyncio loop, so no locks: a call that does not await
happens atomically.

Produce: offsets are assigned in the source partition log (the producer's batch bytes
are stored as sent, base offset patched); the batch's records then go through the data
path, and when the target has reported, each view endpoint appends what it received,
with the source offsets, to its own partition log, and every view's end moves past the
batch. With the embedded switch that happens before Produce answers; with a target that
reports later, a view's log grows later, in order, and never shows an end past records
it has yet to receive. Fetch on a topic reads its source log, on a view the view's log;
either way a long-poll waits on `changed`, set whenever any log grows.

A view whose filter reads state (docs/stateful.md, "Kafka views") is fed: its source's
records go through the target once more for it alone, under the view's own topic number,
one packet per record, each partition in offset order, and what its port receives is
its log. Its replay is the same feed from the source's start, after which every batch
appended to the source is fed to it as it is appended; so its instances see each record
of the source exactly once and in order, and a view fed again from the start (a restart,
a changed filter, state the target lost) holds exactly the records it held.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from compiler.estimate import DEFAULT_MAX_ENTRIES
from controller.target import TargetError
from controller.targets import open_target
from shim import compaction
from shim.datapath import DataPath, Delivered, PortsExhausted
from shim.fetch_sessions import FetchSessions
from shim.consumer_groups import ConsumerGroups
from shim.group_coordinator import Coordinator, Group
from shim.limits import Limits
from shim.log import PartitionLog, StorageError
from shim.producers import Producers
from shim.protocol.records import Codec, Record, RecordBatch, decode_batches, encode_batch
from shim.reframe import TIME_MODULUS
from shim.schema import describe_source
from shim.security import acl
from shim.security.acl import AclStore, Authorizer
from shim.security.listeners import Security
from shim.security.quotas import QuotaStore
from shim.security.users import UserStore
from shim.subscriptions import LANE_FIELDS
from shim.topics import FILTER, SCHEMA, Catalog, Topic, TopicError
from shim.transactions import TransactionCoordinator
from shim.txn_log import ABORT, COMMIT, TRANSACTIONAL_BIT, marker_batch

log = logging.getLogger("camus.broker")


@dataclass
class Config:
    host: str = "127.0.0.1"
    port: int = 9092
    node_id: int = 0
    cluster_id: str = "camus"
    data_dir: Path | None = None
    auto_create: bool = True
    default_partitions: int = 4  # clients' test suites produce to partition 1 of auto-created topics
    target: str = "embedded:native"  # an `open_target` spec
    topics: list = field(default_factory=list)  # from --config: [{"name", "partitions", "configs"}]
    # Broker-wide topic config defaults from --config (`log.flush.interval.*` -> `flush.*`).
    topic_defaults: dict = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    metrics: tuple[str, int] | None = None  # serve Prometheus metrics at this address
    security: Security = field(default_factory=Security)  # listeners, TLS, SASL, ACLs
    max_entries: int = DEFAULT_MAX_ENTRIES  # the switch's entry budget (shim.approximation)


class Broker:
    def __init__(self, config: Config) -> None:
        self.config = config
        if config.data_dir:
            config.data_dir.mkdir(parents=True, exist_ok=True)
        self.datapath = DataPath(open_target(config.target), config.max_entries)
        self.catalog = Catalog(config.data_dir, self.datapath.spec, config.topic_defaults,
                               self.datapath.target.topic_number)
        self.datapath.set_arrivals(self._from_network)
        self.datapath.state_lost = self._state_lost
        self.coordinator = Coordinator(self._assignments_changed)
        self.consumer_groups = ConsumerGroups(self._assignments_changed, self._partition_count,
                                              lambda: [t.name for t in self.catalog],
                                              self._may_describe_topic)
        self.producers = Producers(config.data_dir)
        self.users = UserStore(config.data_dir)  # SCRAM credentials
        self.acls = AclStore(config.data_dir)
        sec = config.security
        if any(lst.sasl for lst in sec.listeners):
            self.users.load_secret()  # unknown users' SCRAM salts (a data dir it cannot write fails here)
        self.quotas = QuotaStore(config.data_dir, sec.quota_window_num, sec.quota_window_seconds)
        self.authorizer = (Authorizer(self.acls, sec.super_users, sec.allow_if_no_acl)
                           if sec.authorizer else None)
        self.fetch_sessions = FetchSessions()
        self.transactions = TransactionCoordinator(
            config.data_dir, lambda: self.producers.init()[0], self._write_markers,
            self._apply_txn_offsets)
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.view_ports: dict[int, str] = {}  # target port -> view name
        self.replaying: set[str] = set()  # views whose source replay is under way
        # Views with state whose replay has been sent: every batch appended since is fed to
        # them as it is appended (`_feed`).
        self.fed: set[str] = set()
        self._waiting: dict[str, list[asyncio.Future]] = {}  # view -> `view_ready` callers
        self.members_without_port = 0  # member topics left off the switch: no port free
        self._next_port_warning = 0.0
        self.member_ports: dict[tuple[str, str], dict[str, int]] = {}  # (group, member) -> topic -> port
        # Member ports held per principal and per connection (Limits.member_ports_per_*).
        self._port_holder: dict[int, tuple[str, int]] = {}  # port -> (principal, connection)
        self.ports_by_principal: Counter[str] = Counter()
        self.ports_by_connection: Counter[int] = Counter()
        # group -> (topic, partition) -> (offset, metadata, committed leader epoch)
        self.offsets: dict[str, dict[tuple[str, int], tuple[int, str, int]]] = {}
        self.changed = asyncio.Event()
        # Per topic or view: bytes and records produced, bytes fetched (`topic_counters`).
        self.traffic: dict[str, dict[str, int]] = {}
        self.requests: dict[str, int] = {}  # requests answered, by API name
        self.metrics = None  # shim.metrics.Metrics, with --metrics
        self._miss_warned: dict[tuple[str, str], tuple[float, int]] = {}  # -> (when, misses then)
        self._load_offsets()
        # A topic whose logs or view cannot be opened is reported and left out of this run
        # (its files and catalog entry stay as they are): one bad entry never stops a restart.
        for t in self.catalog:
            if not t.is_view:
                self._start(t, lambda t=t: [self._open_log(t, p) for p in range(t.partitions)])
        for t in self.catalog:
            if t.is_view:
                self._start(t, lambda t=t: self._attach_view(t))
        for t in config.topics:  # the --config file's topics, created once
            if self.catalog.get(t["name"]) is None:
                self.create_topic(t["name"], int(t.get("partitions", config.default_partitions)),
                                  {k: str(v) for k, v in t.get("configs", {}).items()},
                                  partitions_given="partitions" in t)
        self._recover_transactions()

    # --- topics -----------------------------------------------------------------------

    def _start(self, t: Topic, open_it) -> None:
        try:
            open_it()
        except Exception:
            log.exception("topic %r cannot be opened; it is left out until the next restart", t.name)
            self.catalog.set_aside(t)
            self.replaying.discard(t.name)
            self.fed.discard(t.name)
            for port in [port for port, v in self.view_ports.items() if v == t.name]:
                del self.view_ports[port]
                self.datapath.unsubscribe(port)
            for p in range(t.partitions):
                self.logs.pop((t.name, p), None)

    def _log_dir(self, t: Topic, p: int) -> Path | None:
        d = self.config.data_dir
        if d is None:
            return None
        # name-id, cut to the 255 bytes a file name may have (a legal topic name has up to
        # 249 characters; the id keeps cut names apart).
        suffix = f"-{t.topic_id.hex}"
        return d / "logs" / f"{t.name[:255 - len(suffix)]}{suffix}" / str(p)

    @staticmethod
    def _log_settings(t: Topic) -> dict:
        """A source partition log's settings from its topic's configs. cleanup.policy=compact
        alone: nothing expires, the cleaner alone removes records."""
        retention = t.int_config("retention.bytes") if t.deletes else -1
        seg = t.int_config("segment.bytes")
        if retention > 0:
            seg = max(1, min(seg, retention // 4 or 1))  # so retention can drop whole segments
        return {"retention_bytes": retention,
                "retention_ms": t.int_config("retention.ms") if t.deletes else -1,
                "segment_bytes": seg, "flush_messages": t.int_config("flush.messages"),
                "flush_ms": t.int_config("flush.ms")}

    def _open_log(self, t: Topic, p: int) -> PartitionLog:
        lg = PartitionLog(self._log_dir(t, p), **self._log_settings(t))
        self.logs[(t.name, p)] = lg
        for h in lg.headers():  # idempotent producers' recent sequences, as Kafka rebuilds them
            if h.producer_id >= 0 and not h.is_control:
                # last_offset_delta, not record_count: a batch compaction emptied keeps it
                self.producers.record(h.producer_id, h.producer_epoch, t.name, p,
                                      h.base_sequence, h.last_offset_delta + 1, h.base_offset,
                                      h.max_timestamp)
        return lg

    def create_topic(self, name: str, partitions: int, configs: dict[str, str],
                     validate_only: bool = False, partitions_given: bool = False) -> Topic:
        topic = self.catalog.check(name, partitions, configs, not partitions_given)
        if validate_only:
            return topic
        # Every step that can fail comes before the catalog records the topic; a failure
        # undoes the steps before it, so the catalog never names a topic that cannot open.
        try:
            if topic.is_view:
                self._attach_view(topic)
            else:
                for p in range(topic.partitions):
                    self._open_log(topic, p)
            self.catalog.add(topic)
        except OSError as exc:
            self._discard(topic)
            raise TopicError(f"cannot create {name!r}: {exc}", "kafka_storage_error") from exc
        except PortsExhausted as exc:
            self._discard(topic)
            raise TopicError(f"cannot create view {name!r}: {exc}", "policy_violation") from exc
        except BaseException:
            self._discard(topic)
            raise
        log.info("created %s %r (%d partitions)", "view" if topic.is_view else "topic", name,
                 topic.partitions)
        return topic

    def _discard(self, topic: Topic) -> None:
        """Undo a half-made topic: its port, its logs and their files."""
        self.replaying.discard(topic.name)
        self.fed.discard(topic.name)
        self._ready(topic.name)
        for port in [p for p, v in self.view_ports.items() if v == topic.name]:
            del self.view_ports[port]
            self.datapath.unsubscribe(port)
        for p in range(topic.partitions):
            lg = self.logs.pop((topic.name, p), None)
            if lg is not None:
                lg.delete()

    def auto_create(self, name: str) -> Topic | None:
        if not self.config.auto_create:
            return None
        try:
            return self.create_topic(name, self.config.default_partitions, {})
        except TopicError as exc:
            log.info("not auto-creating %r: %s", name, exc)
            return None

    def delete_topic(self, topic: Topic) -> None:
        views = self.catalog.views_of(topic.name)
        if views:
            raise TopicError(f"topic {topic.name!r} is the source of views "
                             f"{', '.join(v.name for v in views)}; delete them first",
                             "policy_violation")
        if topic.is_view:
            port = next(p for p, v in self.view_ports.items() if v == topic.name)
            del self.view_ports[port]
            self.replaying.discard(topic.name)
            self.fed.discard(topic.name)
            self._ready(topic.name)
            self.datapath.unsubscribe(port)
        for p in range(self.catalog.partitions_of(topic)):
            lg = self.logs.pop((topic.name, p), None)
            if lg is not None:
                lg.delete()
        self.catalog.remove(topic)
        self.traffic.pop(topic.name, None)
        self._refresh_member_subscriptions()
        log.info("deleted topic %r", topic.name)

    def alter_topic(self, topic: Topic, configs: dict[str, str], validate_only: bool = False) -> bool:
        """Give `topic` this whole set of dynamic configs (AlterConfigs; IncrementalAlterConfigs
        computes the set), checked as CreateTopics checks them, without recreating it. A
        source's logs take new retention, segment and flush settings at once; a view whose
        filter changed is re-subscribed and its logs rebuilt from its source, as at creation
        (the old ones serve until then). True when the caller should await `view_ready`."""
        candidate = self.catalog.check(topic.name, topic.partitions, configs, existing=topic)
        if candidate.source != topic.source:
            raise TopicError(f"{topic.name!r}: camus.source cannot change (it is "
                             f"{topic.source!r}); delete the topic and create it again",
                             "invalid_config")
        schema_changed = configs.get(SCHEMA) != topic.configs.get(SCHEMA)
        views = self.catalog.views_of(topic.name)
        if schema_changed and views:
            raise TopicError(f"{topic.name!r}: camus.schema cannot change while views "
                             f"{', '.join(v.name for v in views)} read it", "invalid_config")
        stateful = [v.name for v in views if v.stateful]
        if candidate.compacted and not topic.is_view and stateful:
            raise TopicError(f"{topic.name!r}: cleanup.policy={candidate.config('cleanup.policy')} "
                             f"would compact away records that views with state "
                             f"({', '.join(stateful)}) counted", "invalid_config")
        if validate_only:
            return False
        refilter = topic.is_view and candidate.configs[FILTER] != topic.configs[FILTER]
        self.catalog.set_configs(topic, candidate)
        if not topic.is_view:
            for p in range(topic.partitions):
                lg = self.logs[(topic.name, p)]
                for key, value in self._log_settings(topic).items():
                    setattr(lg, key, value)
                if lg.enforce_retention(by_time=False):
                    for v in views:
                        self.logs[(v.name, p)].drop_before(lg.start_offset)
        if refilter:
            self._reattach(topic)
        if refilter or schema_changed:
            self._refresh_member_subscriptions()
        log.info("altered the configs of %r: %s", topic.name, configs)
        return refilter

    def delete_records(self, topic: Topic, partition: int, offset: int) -> int:
        """DeleteRecords: the partition starts at `offset` (at most its end), and so do its
        views; the new log start offset."""
        start = self.logs[(topic.name, partition)].delete_records(offset)
        for v in self.catalog.views_of(topic.name):
            self.logs[(v.name, partition)].drop_before(start)
        self.changed.set()
        return start

    def add_partitions(self, topic: Topic, count: int) -> None:
        if topic.is_view:
            raise TopicError("a view has its source's partitions", "invalid_request")
        if count <= topic.partitions:
            raise TopicError(f"topic has {topic.partitions} partitions; {count} is not more",
                             "invalid_partitions")
        old = topic.partitions
        try:
            for p in range(old, count):
                self._open_log(topic, p)
            self.catalog.set_partitions(topic, count)
        except OSError as exc:
            for p in range(old, count):
                lg = self.logs.pop((topic.name, p), None)
                if lg is not None:
                    lg.delete()
            topic.partitions = old
            raise TopicError(f"cannot add partitions to {topic.name!r}: {exc}",
                             "kafka_storage_error") from exc
        for v in self.catalog.views_of(topic.name):
            if v.stateful:  # rules for the new partitions: fed again, with fresh instances
                self._reattach(v)
                continue
            for p in range(old, count):
                self.logs[(v.name, p)] = PartitionLog()

    def _reattach(self, view: Topic) -> None:
        """Subscribe a view anew and derive its logs again from its source (a changed
        filter; for a view with state also new partitions of its source, or instances the
        target lost). The old logs serve until the replay is under way."""
        for port in [p for p, v in self.view_ports.items() if v == view.name]:
            del self.view_ports[port]
            self.datapath.unsubscribe(port)
        self.fed.discard(view.name)
        self._attach_view(view)

    def _state_lost(self, ports: set[int]) -> None:
        """The data path's word that these views' instances on the target are gone: each
        is fed again from its source's start, which gives it the same records."""
        for name in sorted({self.view_ports[p] for p in ports if p in self.view_ports}):
            view = self.catalog.get(name)
            if view is not None:
                log.warning("view %r: its state on the switch was lost; rebuilding it from "
                            "its source %r", name, view.source)
                self._reattach(view)

    def _attach_view(self, view: Topic) -> None:
        """Subscribe a view's port and derive its logs from the source's, through the target.

        Until the replay is reported, batches sent before it leave the view's end alone:
        their reports come first and hold nothing for the view (see `_delivered`). The replay
        starts once the view's subscription is on the target (`when_applied`: at once while
        the broker starts, after the worker's compile once it serves); it reads the source up
        to its end then, so records produced while the view's entries were compiled are in
        it, and later ones reach the view through the target. A view with state is fed
        (see the module text): its replay is its feed from the source's start."""
        source = self.catalog.get(view.source)
        port = self.datapath.allocate_port()
        self.view_ports[port] = view.name
        self.replaying.add(view.name)
        if view.stateful:
            self.datapath.subscribe_fed(port, view.number, source.number, source.partitions,
                                        view.filter)
        else:
            self.datapath.subscribe(port, source.number, None, view.filter)
        self.datapath.when_applied(partial(self._replay, view, source, port))

    def _replay(self, view: Topic, source: Topic, port: int) -> None:
        if self.view_ports.get(port) != view.name:
            return  # deleted before its entries were on the target
        failed = self.datapath.failed.get(port)
        if failed is not None:  # its entries are not on the target: nothing to replay
            log.error("view %r: its filter did not compile: %s", view.name, failed)
            self.replaying.discard(view.name)
            self._ready(view.name, TopicError(f"view {view.name!r}: its filter did not "
                                              f"compile: {failed}", "policy_violation"))
            return
        for p in range(source.partitions):
            src_log = self.logs[(source.name, p)]
            # The view starts where its source starts (as a compacted topic starts at its
            # log's start), not at its first matching record: see shim/log.py.
            vlog = self.logs[(view.name, p)] = PartitionLog(start_offset=src_log.start_offset)
            data = src_log.read(src_log.start_offset, 1 << 62)
            # A view with state is fed under its own number, one packet per record.
            number, feed = (view.number, {"lanes": view.lanes, "single": True}) \
                if view.stateful else (source.number, {})
            for batch in decode_batches(data) if data else []:
                if batch.is_control:  # a transaction's marker: after its records, in order
                    self.datapath.after(partial(self._copy_marker, vlog, batch))
                    continue
                self.datapath.send(number, p, source.schema, batch.records, only=port,
                                   then=lambda got, vlog=vlog, producer=_producer(batch):
                                   self._append_view(vlog, got.get(port, []), producer), **feed)
            self.datapath.after(partial(vlog.advance, src_log.next_offset))
        if view.stateful:  # from here on each batch appended to the source is fed as it comes
            self.fed.add(view.name)
        self.datapath.after(partial(self._replayed, view.name))

    def _replayed(self, name: str) -> None:
        self.replaying.discard(name)
        self._ready(name)
        self.changed.set()

    def _ready(self, name: str, failed: TopicError | None = None) -> None:
        for waiter in self._waiting.pop(name, ()):
            if not waiter.done():
                if failed is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(failed)

    async def view_ready(self, name: str, timeout: float | None = None) -> None:
        """Return once the view `name` holds its source's records (its replay is reported).
        TopicError if its filter did not compile, or (REQUEST_TIMED_OUT) if that takes more
        than `timeout` seconds: the caller decides what becomes of the view."""
        if name in self.replaying:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(name, []).append(waiter)
            try:
                await asyncio.wait_for(waiter, timeout)
            except TimeoutError:
                raise TopicError(f"view {name!r}: its filter's entries were not on the switch "
                                 f"within {timeout:g} s", "request_timed_out") from None

    # --- produce ----------------------------------------------------------------------

    def append(self, topic: Topic, partition: int, raw: bytes, batches: list[RecordBatch],
               from_network: bool = False) -> int:
        """Assign offsets to the batches in `raw`, store them (all or, with StorageError,
        none) and deliver their records; the base offset. `from_network`: records the
        network delivered (a fabric target), delivered to this broker's endpoints only."""
        lg = self.logs[(topic.name, partition)]
        base = offset = lg.next_offset
        stored, pos = [], 0
        for b in batches:
            data = bytearray(raw[pos:pos + b.size])
            data[0:8] = offset.to_bytes(8, "big", signed=True)
            stored.append((bytes(data), offset + b.last_offset_delta, b.max_timestamp))
            pos += b.size
            offset += b.last_offset_delta + 1
        lg.append_all(stored)
        for b, (data, last, _) in zip(batches, stored):
            first = last - b.last_offset_delta
            self._deliver(topic, partition, b, first, last + 1, from_network)
        self.changed.set()
        self.count(topic.name, bytes_in=len(raw), records_in=offset - base)
        if topic.schema is not None and topic.schema.misses:
            self._warn_misses(topic)
        return base

    def count(self, name: str, **amounts: int) -> None:
        counters = self.traffic.setdefault(name, {})
        for key, n in amounts.items():
            counters[key] = counters.get(key, 0) + n

    def _warn_misses(self, topic: Topic) -> None:
        """A schema field that records lack (a path typo, `$.Price` for `price`) silently
        empties views; say so in the log, at most once a minute per field."""
        now = time.monotonic()
        for f in topic.schema.fields:
            n = topic.schema.misses.get(f.name, 0)
            when, before = self._miss_warned.get((topic.name, f.name), (-60.0, 0))
            if n > before and now - when >= 60:
                log.warning("topic %r: %d record(s) had no value for schema field %r "
                            "(source %s) and were given %s; check camus.schema", topic.name,
                            n - before, f.name, describe_source(f),
                            "spaces" if f.is_string else "0")
                self._miss_warned[(topic.name, f.name)] = (now, n)

    def topic_counters(self, topic: Topic) -> dict[str, int]:
        """What the broker counted for a topic or view, for DescribeConfigs and `camus topic
        describe`: traffic, per-field schema misses, a view's switch port and its packets."""
        out = dict(self.traffic.get(topic.name, {}))
        if topic.schema is not None and not topic.is_view:
            for f in topic.schema.fields:
                out[f"misses.{f.name}"] = topic.schema.misses.get(f.name, 0)
        for port, view in self.view_ports.items():
            if view == topic.name:
                out["switch_port"] = port
                out["switch_packets_out"] = self.datapath.stats.packets_out.get(port, 0)
        return out

    def view_state(self, topic: Topic) -> dict[str, str]:
        """A view with state: its instances as the switch holds them, read from its
        registers, one line per partition and state (`camus.state.PARTITION.STATE` in
        DescribeConfigs, shown by `camus topic describe`); {} for any other topic."""
        port = next((p for p, v in self.view_ports.items() if v == topic.name), None)
        if not topic.stateful or port is None:
            return {}
        if topic.name in self.replaying:
            return {"all": "being rebuilt from the source (its replay is under way)"}
        try:
            got = self.datapath.state_of(port)
        except TargetError as exc:
            return {"all": f"not readable: {exc}"}
        schema = topic.schema
        slot_names = {f.slot: f.name for f in schema.fields} if schema else {}
        shown = {"records": "records", "arrivals": "rate(arrivals)"}
        for lane, slot in zip(LANE_FIELDS, topic.lanes):
            shown[f"avg({lane})"] = f"avg({slot_names.get(slot, lane)})"
        spec = self.datapath.spec.state_vars
        out = {}
        for partition, name, cells in got:
            for bucket, cell in enumerate(cells):
                key = f"{partition}.{shown.get(name, name)}" + (f".{bucket}" if len(cells) > 1 else "")
                out[key] = describe_cell(spec[name], *cell)
        return out

    def _deliver(self, topic: Topic, partition: int, batch: RecordBatch, base: int,
                 end: int, local: bool = False) -> None:
        if not self.datapath.wants(topic.number) and not self.catalog.views_of(topic.name):
            return  # a plain topic: nobody receives its records, no view moves past them
        self.datapath.send_batch(topic.number, partition, topic.schema, batch,
                                 then=partial(self._delivered, topic.name, partition, end,
                                              _producer(batch)),
                                 shift=base - batch.base_offset, local=local)
        for port, name in list(self.view_ports.items()):
            if name in self.fed:
                view = self.catalog.get(name)
                if view is not None and view.source == topic.name:
                    self._feed(view, port, topic, partition, batch, base, end)

    def _feed(self, view: Topic, port: int, source: Topic, partition: int, batch: RecordBatch,
              base: int, end: int) -> None:
        """One appended batch to a view with state (see the module text); its report
        appends what the view's port received and moves the view's end past the batch."""
        vlog, src = self.logs[(view.name, partition)], self.logs[(source.name, partition)]

        def fed(out: Delivered, producer=_producer(batch)) -> None:
            self._append_view(vlog, out.get(port, []), producer)
            vlog.advance(end)
            vlog.drop_before(src.start_offset)
            self.changed.set()

        self.datapath.send_batch(view.number, partition, source.schema, batch, then=fed,
                                 shift=base - batch.base_offset, only=port, lanes=view.lanes,
                                 single=True)

    def _from_network(self, runs: list) -> None:
        """Records the network delivered to this host (a fabric target): stored in the
        topic's log here, at this broker's offsets, and delivered to this broker's views and
        members like records produced here (but never sent back into the network). The
        network sent only records some subscription of this broker matched; the local
        switch re-checks each endpoint's filter exactly."""
        by_number = {t.number: t for t in self.catalog if not t.is_view}
        for number, partition, recs in runs:
            topic = by_number.get(number)
            if topic is None or partition >= topic.partitions:
                self.count(f"#{number}", network_records_dropped=len(recs))
                log.warning("%d record(s) from the network for topic number %d partition %d, "
                            "which this broker does not have: dropped", len(recs), number,
                            partition)
                continue
            records = [Record(i, r.timestamp, r.key, r.value, r.headers)
                       for i, r in enumerate(recs)]
            raw = encode_batch(records, compression=Codec.NONE)
            try:
                self.append(topic, partition, raw, decode_batches(raw), from_network=True)
            except StorageError as exc:
                self.count(topic.name, network_records_dropped=len(recs))
                log.error("%s/%d: %d record(s) from the network not stored: %s", topic.name,
                          partition, len(recs), exc)
                continue
            self.count(topic.name, network_records_in=len(recs))

    def _delivered(self, name: str, partition: int, end: int, producer: tuple | None,
                   out: Delivered) -> None:
        """The target's report on a produced batch: views append, and end past it."""
        views = self.catalog.views_of(name)
        if not views:  # only group members receive it (or it was deleted under way)
            return
        for port, got in out.items():
            view = self.view_ports.get(port)
            if view is not None:
                self._append_view(self.logs[(view, partition)], got, producer)
            # Group members' ports are subscribed with log=False: the data path counts what
            # they receive; members read the topic's or view's log, so committed offsets stay
            # valid across rebalances.
        src = self.logs[(name, partition)]
        for v in views:
            # A view with state ends where what was fed to it ends (`_feed`).
            if v.name not in self.replaying and not v.stateful:
                vlog = self.logs[(v.name, partition)]
                vlog.advance(end)
                vlog.drop_before(src.start_offset)
        self.changed.set()

    @staticmethod
    def _append_view(vlog: PartitionLog, got: list, producer: tuple[int, int] | None = None) -> None:
        """Append what a view's port received from one source batch; a transactional
        batch's records keep its producer and the transactional bit, so the view's own
        transaction index (shim/txn_log.py) gives its read_committed consumers the same
        answers as its source's."""
        if not got:
            return
        records = [r for _, r in got]
        pid, epoch = producer or (-1, -1)
        data = encode_batch(records, compression=Codec.NONE, producer_id=pid,
                            producer_epoch=epoch, attributes=TRANSACTIONAL_BIT if producer else 0)
        vlog.append(data, records[-1].offset, max(r.timestamp for r in records))

    @staticmethod
    def _copy_marker(vlog: PartitionLog, marker: RecordBatch) -> None:
        """A source's transaction marker into a view's log, at the source's offset (once:
        a view replayed after the marker was written has it from the replay)."""
        if vlog.next_offset <= marker.base_offset:
            vlog.append(encode_batch(marker.records, producer_id=marker.producer_id,
                                     producer_epoch=marker.producer_epoch,
                                     attributes=marker.attributes),
                        marker.base_offset, marker.max_timestamp)

    # --- transactions -----------------------------------------------------------------

    def _write_markers(self, partitions: set, producer_id: int, epoch: int, commit: bool) -> None:
        """A COMMIT or ABORT marker at the end of each partition of a transaction, and so of
        each of its views (after the records the data path is still delivering)."""
        now = int(time.time() * 1000)
        for name, p in sorted(partitions):
            lg = self.logs.get((name, p))
            if lg is None:
                continue  # the topic was deleted under the transaction
            offset = lg.next_offset
            data = marker_batch(offset, now, producer_id, epoch, COMMIT if commit else ABORT)
            lg.append(data, offset, now)
            marker = decode_batches(data)[0]
            for v in self.catalog.views_of(name):
                self.datapath.after(partial(self._marker_to_view, v.name, p, marker))
        self.changed.set()

    def _marker_to_view(self, view: str, partition: int, marker: RecordBatch) -> None:
        vlog = self.logs.get((view, partition))
        if vlog is not None:
            self._copy_marker(vlog, marker)
            self.changed.set()

    def _apply_txn_offsets(self, offsets: dict) -> None:
        for group, parts in offsets.items():
            for (name, p), (offset, metadata, leader_epoch) in parts.items():
                self.commit(group, name, p, offset, metadata, leader_epoch)
        if offsets:
            self.save_offsets()

    def _recover_transactions(self) -> None:
        """Finish transactions a crash left between their Prepare and Complete states."""
        try:
            self.transactions.recover()
        except StorageError as exc:
            log.error("transaction markers could not be written yet: %s", exc)

    def _compact(self, t: Topic, p: int, lg: PartitionLog, now_ms: int, force: bool = False) -> None:
        """A cleaning pass on a compacted partition when its dirty ratio calls for one; its
        views lose the same records (shim/compaction.py)."""
        try:
            removed = compaction.compact(lg, now_ms, t.int_config("delete.retention.ms"),
                                         float(t.config("min.cleanable.dirty.ratio")), force)
        except OSError as exc:
            log.error("%s/%d: compaction failed, the log is as it was: %s", t.name, p, exc)
            return
        if removed:
            log.debug("%s/%d: compaction removed %d records", t.name, p, len(removed))
            for v in self.catalog.views_of(t.name):
                vlog = self.logs.get((v.name, p))
                if vlog is not None:
                    compaction.drop_records(vlog, removed)

    # --- fetch ------------------------------------------------------------------------

    def log_for(self, topic: Topic, partition: int) -> PartitionLog | None:
        return self.logs.get((topic.name, partition))

    async def wait_for_data(self, timeout: float) -> None:
        self.changed.clear()
        try:
            await asyncio.wait_for(self.changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    # --- groups -----------------------------------------------------------------------

    def _assignments_changed(self, group: Group) -> None:
        """Every member's assignment becomes one subscription per assigned topic."""
        self._member_subscriptions(group)
        self.datapath.update()

    def _may_describe_topic(self, principal: str, host: str, name: str) -> bool:
        return self.authorizer is None or self.authorizer.allows(principal, host, acl.DESCRIBE,
                                                                 acl.TOPIC, name)

    def _partition_count(self, name: str) -> int:
        t = self.catalog.get(name)
        return self.catalog.partitions_of(t) if t is not None else 0

    def _member_subscriptions(self, group: Group) -> None:
        live = set()
        for m in group.members.values():
            key = (group.group_id, m.member_id)
            live.add(key)
            assigned = m.assigned_partitions(group.protocol_type)
            ports = self.member_ports.setdefault(key, {})
            for name in list(ports):
                if name not in assigned or self.catalog.get(name) is None:
                    self._release_member_port(ports.pop(name))
            for name, parts in assigned.items():
                t = self.catalog.get(name)
                if t is None:
                    continue
                if t.stateful:
                    # A member's rule would have instances of its own, not the view's: its
                    # member reads the view's log through Fetch, without a port.
                    if name in ports:
                        self._release_member_port(ports.pop(name))
                    continue
                source = self.catalog.get(t.source) if t.is_view else t
                if name not in ports:
                    # A member's port only mirrors its subscription on the switch (it reads
                    # the logs through Fetch either way): without one it is served the same.
                    port = self._member_port(m)
                    if port is None:
                        continue
                    ports[name] = port
                self.datapath.subscribe(ports[name], source.number, frozenset(parts), t.filter,
                                        log=False)
        for key in [k for k in self.member_ports if k[0] == group.group_id and k not in live]:
            for port in self.member_ports.pop(key).values():
                self._release_member_port(port)

    def _member_port(self, m) -> int | None:
        """A switch port for one of member `m`'s topics, or None when its principal or its
        connection holds all it may (`Limits.member_ports_per_*`), or none is free: one
        client's groups never take the ports views need."""
        limits = self.config.limits
        if self.ports_by_principal[m.principal] >= limits.member_ports_per_principal:
            self._no_member_port(f"{m.principal}'s members hold {limits.member_ports_per_principal}"
                                 " ports, camus.member.ports.per.principal")
            return None
        if self.ports_by_connection[m.connection] >= limits.member_ports_per_connection:
            self._no_member_port(f"connection {m.connection}'s members hold "
                                 f"{limits.member_ports_per_connection} ports, "
                                 "camus.member.ports.per.connection")
            return None
        try:
            port = self.datapath.allocate_port()
        except PortsExhausted as exc:
            self._no_member_port(str(exc))
            return None
        self._port_holder[port] = (m.principal, m.connection)
        self.ports_by_principal[m.principal] += 1
        self.ports_by_connection[m.connection] += 1
        return port

    def _release_member_port(self, port: int) -> None:
        self.datapath.unsubscribe(port)
        principal, connection = self._port_holder.pop(port)
        for held, key in ((self.ports_by_principal, principal),
                          (self.ports_by_connection, connection)):
            held[key] -= 1
            if not held[key]:
                del held[key]

    def _no_member_port(self, why: str) -> None:
        self.members_without_port += 1
        now = time.monotonic()
        if now >= self._next_port_warning:  # at most once a minute
            self._next_port_warning = now + 60
            log.warning("a consumer group member's topic gets no switch port (%d so far): %s",
                        self.members_without_port, why)

    def _refresh_member_subscriptions(self) -> None:
        for g in [*self.coordinator.groups.values(), *self.consumer_groups.groups.values()]:
            self._member_subscriptions(g)
        self.datapath.update()

    # --- committed offsets ------------------------------------------------------------

    def commit(self, group: str, topic: str, partition: int, offset: int, metadata: str,
               leader_epoch: int = -1) -> None:
        self.offsets.setdefault(group, {})[(topic, partition)] = (offset, metadata or "",
                                                                  leader_epoch)

    def save_offsets(self) -> None:
        if not self.config.data_dir:
            return
        doc = {g: [[t, p, o, md, e] for (t, p), (o, md, e) in parts.items()]
               for g, parts in self.offsets.items()}
        path = self.config.data_dir / "offsets.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)

    def _load_offsets(self) -> None:
        path = self.config.data_dir / "offsets.json" if self.config.data_dir else None
        if path and path.exists():
            for g, items in json.loads(path.read_text()).items():
                # [topic, partition, offset, metadata(, leader epoch: files before it had none)]
                self.offsets[g] = {(t, p): (o, md, rest[0] if rest else -1)
                                   for t, p, o, md, *rest in items}

    # --- housekeeping -----------------------------------------------------------------

    def tick(self) -> None:
        """Periodic work: session expiry, time-based retention, `flush.ms` fsyncs."""
        for gid, mid in [*self.coordinator.expire(), *self.consumer_groups.expire()]:
            log.info("group %s: member %s expired", gid, mid)
        try:
            for txn_id in self.transactions.expire():
                log.info("transaction of %r timed out and was aborted", txn_id)
            self.transactions.recover()
        except StorageError as exc:
            log.error("transaction markers could not be written: %s", exc)
        now = int(time.time() * 1000)
        for (name, p), lg in list(self.logs.items()):
            t = self.catalog.get(name)
            if (t is not None and not t.is_view and lg.time_retention_due(now)
                    and lg.enforce_retention(now)):
                for v in self.catalog.views_of(name):
                    self.logs[(v.name, p)].drop_before(lg.start_offset)
            if t is not None and t.compacted and not t.is_view:
                self._compact(t, p, lg, now)
            if lg.flush_due():
                try:
                    lg.flush()
                except StorageError as exc:
                    log.error("%s/%d: %s", name, p, exc)


def describe_cell(var, tag: int, n: int, s: int, now_ms: int | None = None) -> str:
    """One instance, for people: its window (index, and start in UTC: the header's time is
    the record's modulo `reframe.TIME_MODULUS`, so the start shown is the one nearest now)
    and its accumulators, with the value a rule compares."""
    if not (tag or n or s):
        return "empty (no record in its scope yet)"
    start_ms = tag * var.window_us // 1000
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    start_ms += round((now_ms - start_ms) / TIME_MODULUS) * TIME_MODULUS
    when = datetime.fromtimestamp(start_ms / 1000, timezone.utc).isoformat(timespec="milliseconds")
    text = f"window {tag} (from {when.replace('+00:00', 'Z')}, {var.window_us} us): n={n}"
    if var.kind == "average":
        text += f" s={s} avg={s / n:.6g}" if n else f" s={s} avg=0"
    elif var.kind == "meter":
        text += f" rate={n * 1_000_000 / var.window_us:.6g}/s"
    return text


def _producer(batch: RecordBatch) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional batch, None for any other."""
    return (batch.producer_id, batch.producer_epoch) if batch.is_transactional else None
