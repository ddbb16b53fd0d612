"""Views materialised into an Apache Kafka cluster, exactly once, by camus's switch.

Theory of operation. A view (`shim.cluster.catalog.View`: a source topic and a filter over
its schema) becomes a topic in the cluster holding the source's records that pass the
filter. One `ViewWorker` per view and camus instance runs Kafka's consume-transform-produce
loop with the switch as the transform:

1. consume a batch of the source (a consumer in the view's group, read_committed, no
   automatic commits);
2. send each partition's records through the data path (`shim.datapath.DataPath`, the
   embedded software switch unless `--target` names a remote one or a fabric) to the view's
   own endpoint port, exactly as the embedded broker fills a view's log (`Broker._replay`
   sends with `only=port` too), and take what the switch delivered to that port;
3. in one Kafka transaction of the instance's transactional producer: write the delivered
   records to the view topic (same partition as in the source, in source order, with the
   headers `camus.source.partition` and `camus.source.offset`, the source's key, value,
   headers and timestamp), add the source offsets after the batch to the transaction
   (`send_offsets_to_transaction` with the consumer's group metadata), commit.

The view's records and the group's committed offsets become visible together or not at
all, so after any crash the group resumes exactly after the last committed batch, and what
that batch wrote is in the view once. If a transaction is aborted (the producer's error
says it must be), the batch's partitions are rewound to the batch's first offsets and read
again: nothing aborted is ever visible to a read_committed reader of the view.

Several instances. The view's consumer group is `camus.<deployment>.view.<view>`: one per
view per deployment, so Kafka's group protocol shares each view's source partitions among
the deployment's instances, and the group's committed offsets are exactly how far that one
view is complete (a view created later starts from the source's beginning in its own group,
without touching other views' progress). An instance that dies is removed from the group
after its session times out and its partitions go to the others, which resume from the
committed offsets. Its transactional id is `camus.<deployment>.view.<view>.<instance>`.
Fencing follows KIP-447: the offsets are sent with the consumer's group metadata (member
id and generation), so a zombie that lost its partitions in a rebalance cannot commit them
any more; and a consumer of the group reading committed offsets (read_committed asks for
stable offsets) waits while a transaction that holds offsets for its partitions is open,
until it is committed or aborted (a dead instance's open transaction is aborted by the
cluster after `transaction.timeout.ms`). The group uses the eager assignors (Kafka's
"range" and "roundrobin"): every rebalance revokes every partition, and since a worker
only polls between transactions, no transaction is ever open across a rebalance.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from compiler.errors import CamusError
from compiler.estimate import DEFAULT_MAX_ENTRIES
from controller.targets import open_target
from shim.cluster.catalog import (KAFKA_LOG, Catalog, CatalogError, State, View, group_id,
                                  transactional_id)
from shim.cluster.connection import ClusterSettings
from shim.datapath import DataPath, Delivered
from shim.protocol.records import Record
from shim.subscriptions import view_filter

log = logging.getLogger("camus.cluster")

SOURCE_PARTITION = "camus.source.partition"  # headers of every view record: decimal ASCII
SOURCE_OFFSET = "camus.source.offset"
TIMEOUT = 30.0  # seconds one transactional call may block before it is tried again
GIVE_UP = 600.0  # seconds of retriable errors on one call before the worker stops


def default_instance() -> str:
    """This host and process: unique, but new at every start (see docs/cluster.md on naming
    instances, which lets a restarted instance fence its previous self at once)."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class Settings:
    deployment: str = "camus"
    instance: str = field(default_factory=default_instance)
    batch: int = 5000  # source records per transaction, at most
    poll: float = 0.1  # seconds a worker waits for a first record before polling again
    transaction_timeout_ms: int = 10_000
    session_timeout_ms: int = 6_000
    max_poll_interval_ms: int = 300_000  # Kafka's default: a worker stuck longer leaves the group
    catalog_interval: float = 1.0  # seconds between reads of the catalog for new views
    report_interval: float = 10.0  # seconds between progress lines in the log (0: none)


@dataclass
class Counters:
    consumed: int = 0  # source records read
    delivered: int = 0  # records the switch delivered to the view, committed
    transactions: int = 0  # committed
    aborted: int = 0  # transactions aborted and their batches read again
    # Seconds spent, summed over batches: through the switch, and writing and committing.
    switching: float = 0.0
    writing: float = 0.0


class Fatal(Exception):
    """A worker cannot go on (its producer was fenced by another with its transactional id,
    the cluster refuses it, ...): the instance stops so that whoever runs it restarts it."""


class Materialiser:
    """Every view of one deployment's catalog (or the `only` ones), on one data path."""

    def __init__(self, conn: ClusterSettings, settings: Settings,
                 target: str = "embedded:native", only: set[str] | None = None,
                 max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.conn = conn
        self.settings = settings
        self.target_spec = target
        self.only = only
        self.max_entries = max_entries
        self.datapath: DataPath | None = None
        self.workers: dict[str, ViewWorker] = {}
        self._tasks: dict[str, asyncio.Task] = {}
        self._numbers: dict[str, int] = {}

    def topic_number(self, source: str) -> int:
        """The number a source's records carry in the Kafka header: the target's (a fabric
        numbers topics network-wide), else this instance's own, one per source."""
        if source not in self._numbers:
            number = self.datapath.target.topic_number(source)
            self._numbers[source] = (number if number is not None
                                     else max(self._numbers.values(), default=0) + 1)
        return self._numbers[source]

    async def run(self, stop: asyncio.Event, ready: Callable[[], None] | None = None) -> None:
        """Materialise until `stop` is set (or a worker fails: Fatal); `ready()` once the
        catalog was read and its views' workers started."""
        loop = asyncio.get_running_loop()
        self.datapath = DataPath(open_target(self.target_spec), self.max_entries)
        self.datapath.compile_in_background()
        catalog = Catalog(self.conn, self.settings.deployment)
        io = ThreadPoolExecutor(1, thread_name_prefix="camus-catalog")
        reporter = asyncio.ensure_future(self._report(stop))
        try:
            await loop.run_in_executor(io, catalog.ensure_topic)
            state = await loop.run_in_executor(io, catalog.follow)
            while not stop.is_set():
                self._reconcile(state)
                if ready is not None:
                    ready()
                    ready = None
                self._check_workers()
                try:
                    await asyncio.wait_for(stop.wait(), self.settings.catalog_interval)
                    break
                except TimeoutError:
                    pass
                try:
                    state = await loop.run_in_executor(io, catalog.follow)
                except (CatalogError, KafkaException) as exc:
                    # The catalog's leader moving, or the cluster out of reach: the views
                    # known so far go on (their workers retry on their own), and so does
                    # reading the catalog, at the next interval.
                    log.warning("the catalog %s could not be read (%s); trying again",
                                catalog.topic, exc)
        finally:
            reporter.cancel()
            for w in self.workers.values():
                w.stopping = True
            if self._tasks:
                await asyncio.wait(list(self._tasks.values()))
            await loop.run_in_executor(io, catalog.close)
            io.shutdown(wait=False)
            self.datapath.close()
        self._check_workers()

    def _reconcile(self, state: State) -> None:
        """Start a worker for each wanted view without one; stop those whose view is gone
        or changed (a changed definition starts again with the new one)."""
        wanted = {n: v for n, v in state.views.items() if self.only is None or n in self.only}
        for name, worker in list(self.workers.items()):
            if wanted.get(name) != worker.view:
                worker.stopping = True
                if self._tasks[name].done():
                    del self.workers[name], self._tasks[name]
        for name, view in wanted.items():
            if name not in self.workers:
                worker = ViewWorker(self, view)
                self.workers[name] = worker
                self._tasks[name] = asyncio.ensure_future(worker.run())
                log.info("view %s: materialising %s where %s", name, view.source, view.filter)

    def _check_workers(self) -> None:
        """Fatal if a worker failed, unless its view was being stopped (a view deleted while
        its worker wrote: the topic goes away under it, which ends nothing else)."""
        for name, task in list(self._tasks.items()):
            if task.done() and not task.cancelled() and task.exception() is not None:
                if self.workers[name].stopping:
                    log.info("view %s: its worker ended while stopping: %s", name,
                             task.exception())
                    del self.workers[name], self._tasks[name]
                    continue
                raise Fatal(f"view {name}: {task.exception()}") from task.exception()

    async def _report(self, stop: asyncio.Event) -> None:
        every = self.settings.report_interval
        while every > 0 and not stop.is_set():
            await asyncio.sleep(every)
            for name, w in self.workers.items():
                c = w.counters
                batches = max(1, c.transactions + c.aborted)
                log.info("view %s: %d read, %d delivered, %d transactions, %d aborted, "
                         "per batch %.1f ms through the switch and %.1f ms writing and "
                         "committing, partitions %s", name, c.consumed, c.delivered,
                         c.transactions, c.aborted, 1000 * c.switching / batches,
                         1000 * c.writing / batches, sorted(w.assigned))


class ViewWorker:
    """One view's consume-transform-produce loop (see the module text). Kafka's blocking
    calls run on the worker's own thread; the data path is driven on the event loop."""

    def __init__(self, owner: Materialiser, view: View) -> None:
        self.owner = owner
        self.view = view
        self.settings = owner.settings
        self.conn = owner.conn
        self.stopping = False
        self.counters = Counters()
        self.assigned: set[int] = set()
        self.consumer = None
        self.producer = None
        self.view_partitions = 0
        self.port: int | None = None  # the view's endpoint on the switch, once started
        self.schema = None  # the source's schema (shim.schema.Schema), once started
        self.number = 0  # the source's topic number in the Kafka header, once started
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"camus-view-{view.name}")

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    async def run(self) -> None:
        try:
            if await self.start():
                while not self.stopping:
                    await self.step()
        finally:
            await self.close()

    async def start(self) -> bool:
        """Subscribe the view's port, wait until its entries are on the target, open the
        Kafka clients; False if the view cannot be materialised (said in the log)."""
        dp = self.owner.datapath
        try:
            schema = self.view.parsed_schema()
            vfilter = view_filter(dp.spec, schema, self.view.filter)
        except CamusError as exc:  # the catalog holds a definition this camus refuses
            log.error("view %s: not materialised: %s", self.view.name, exc)
            return False
        self.schema = schema
        self.number = self.owner.topic_number(self.view.source)
        self.port = dp.allocate_port()
        dp.subscribe(self.port, self.number, None, vfilter)
        applied = asyncio.get_running_loop().create_future()
        dp.when_applied(lambda: applied.done() or applied.set_result(None))
        await applied
        if self.port in dp.failed:
            log.error("view %s: its filter did not compile: %s", self.view.name,
                      dp.failed[self.port])
            return False
        await self._call(self._open)
        return True

    async def step(self) -> None:
        """One round of the loop: a batch read, through the switch, written and committed."""
        batch = await self.read()
        if batch:
            began = time.perf_counter()
            delivered = await self.through_switch(batch)
            switched = time.perf_counter()
            await self.write(batch, delivered)
            self.counters.switching += switched - began
            self.counters.writing += time.perf_counter() - switched

    async def read(self) -> dict[int, list[Record]]:
        return await self._call(self._consume)

    async def write(self, batch: dict[int, list[Record]], delivered: dict[int, list]) -> bool:
        return await self._call(self._transact, batch, delivered)

    async def close(self) -> None:
        await self._call(self._close)
        self._io.shutdown(wait=False)
        if self.port is not None:
            self.owner.datapath.unsubscribe(self.port)
            self.port = None
        log.info("view %s: stopped", self.view.name)

    # --- the switch (event loop) --------------------------------------------------------

    async def through_switch(self, batch: dict[int, list[Record]]) -> dict[int, list]:
        """What the switch delivers to the view's port of each partition's records:
        {partition: [(source offset, record)]} in source order."""
        dp = self.owner.datapath
        got: dict[int, list[tuple[int, Record]]] = {}
        done = asyncio.get_running_loop().create_future()

        def received(partition: int, delivered: Delivered) -> None:
            mine = delivered.get(self.port)
            if mine:
                got[partition] = mine

        for partition, records in batch.items():
            dp.send(self.number, partition, self.schema, records,
                    then=partial(received, partition), only=self.port)
        dp.after(lambda: done.done() or done.set_result(None))
        await done
        return got

    # --- Kafka (the worker's thread) -----------------------------------------------------

    def _open(self) -> None:
        s, view = self.settings, self.view
        self.producer = Producer(self.conn.client_config(True, logger=KAFKA_LOG, **{
            "transactional.id": transactional_id(s.deployment, view.name, s.instance),
            "transaction.timeout.ms": s.transaction_timeout_ms,
            "linger.ms": 5,
            # Each transaction's first request meets CONCURRENT_TRANSACTIONS while the
            # cluster still writes the previous one's markers; librdkafka retries it after
            # this backoff (100 ms by default), which was most of a transaction's time here
            # (send_offsets_to_transaction: 115 ms median with 100, 45 ms with 10).
            "retry.backoff.ms": 20,
        }))
        # Fences an earlier producer with this transactional id and aborts what it left open.
        self._retry(self.producer.init_transactions, TIMEOUT)
        self.consumer = Consumer(self.conn.client_config(logger=KAFKA_LOG, **{
            "group.id": group_id(s.deployment, view.name),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range,roundrobin",  # eager: see module text
            "session.timeout.ms": s.session_timeout_ms,
            "heartbeat.interval.ms": max(100, s.session_timeout_ms // 4),
            "max.poll.interval.ms": s.max_poll_interval_ms,
        }))
        self.consumer.subscribe([view.source], on_assign=self._assigned,
                                on_revoke=self._revoked, on_lost=self._revoked)
        self._ensure_partitions(0)

    def _assigned(self, _consumer, partitions) -> None:
        self.assigned = {tp.partition for tp in partitions}
        log.info("view %s: instance %s assigned source partitions %s", self.view.name,
                 self.settings.instance, sorted(self.assigned))

    def _revoked(self, _consumer, partitions) -> None:
        self.assigned -= {tp.partition for tp in partitions}

    def _ensure_partitions(self, needed: int) -> None:
        """The view topic has as many partitions as its source (a source grown since the
        view was made grows the view, before a record goes to a partition it lacks)."""
        if needed < self.view_partitions:
            return
        admin = AdminClient(self.conn.client_config(logger=KAFKA_LOG))
        md = admin.list_topics(timeout=TIMEOUT)
        view, source = md.topics.get(self.view.name), md.topics.get(self.view.source)
        if view is None or view.error is not None:
            raise Fatal(f"view topic {self.view.name!r} is not in the cluster")
        have = len(view.partitions)
        want = max(needed + 1, len(source.partitions) if source and not source.error else 0)
        if want > have:
            try:
                admin.create_partitions([NewPartitions(self.view.name, want)],
                                        operation_timeout=TIMEOUT)[self.view.name].result(TIMEOUT)
            except KafkaException as exc:
                if "INVALID_PARTITIONS" not in exc.args[0].name():  # another instance did it
                    raise
            have = want
        self.view_partitions = have

    def _consume(self) -> dict[int, list[Record]]:
        """A batch of the source: the first record waits up to `poll` seconds, the rest are
        whatever else the client holds, up to `batch` records. {partition: records}."""
        first = self.consumer.poll(self.settings.poll)
        if first is None:
            return {}
        messages = [first, *self.consumer.consume(self.settings.batch - 1, 0)]
        batch: dict[int, list[Record]] = {}
        for m in messages:
            err = m.error()
            if err is not None:
                if err.fatal():
                    raise KafkaException(err)
                log.warning("view %s: source: %s", self.view.name, err.str())
                continue
            ts = m.timestamp()[1]
            batch.setdefault(m.partition(), []).append(
                Record(m.offset(), ts, m.key(), m.value(), tuple(m.headers() or ())))
        self.counters.consumed += sum(map(len, batch.values()))
        return batch

    def _transact(self, batch: dict[int, list[Record]], delivered: dict[int, list]) -> bool:
        """Write `delivered` and commit `batch`'s offsets in one transaction; False if it
        was aborted (its partitions were rewound to be read again)."""
        p = self.producer
        positions = [TopicPartition(self.view.source, part, recs[-1].offset + 1)
                     for part, recs in batch.items()]
        try:
            if delivered and max(delivered) >= self.view_partitions:
                self._ensure_partitions(max(delivered))
            t0 = time.perf_counter()
            p.begin_transaction()
            count = 0
            for part, got in delivered.items():
                for offset, r in got:
                    self._produce(part, offset, r)
                count += len(got)
            t1 = time.perf_counter()
            self._retry(p.send_offsets_to_transaction, positions,
                        self.consumer.consumer_group_metadata(), TIMEOUT)
            t2 = time.perf_counter()
            self._retry(p.commit_transaction, TIMEOUT)
            log.debug("view %s: transaction of %d records: produce %.1f ms, offsets %.1f ms, "
                      "commit %.1f ms", self.view.name, count, 1000 * (t1 - t0),
                      1000 * (t2 - t1), 1000 * (time.perf_counter() - t2))
        except KafkaException as exc:
            err = exc.args[0]
            if not err.txn_requires_abort():
                raise Fatal(f"view {self.view.name}: {err.str()}") from None
            log.warning("view %s: transaction aborted (%s); its %d source records are read "
                        "again", self.view.name, err.str(), sum(map(len, batch.values())))
            self._retry(p.abort_transaction, TIMEOUT)
            self._rewind(batch)
            self.counters.aborted += 1
            return False
        self.counters.transactions += 1
        self.counters.delivered += count
        return True

    def _produce(self, partition: int, offset: int, r: Record) -> None:
        headers = [*r.headers, (SOURCE_PARTITION, b"%d" % partition),
                   (SOURCE_OFFSET, b"%d" % offset)]
        while True:
            try:
                self.producer.produce(self.view.name, r.value, r.key, partition=partition,
                                      headers=headers, timestamp=max(r.timestamp, 0))
                return
            except BufferError:  # the client's queue is full: let it send
                self.producer.poll(0.05)

    def _rewind(self, batch: dict[int, list[Record]]) -> None:
        """Back to the batch's first records, on the partitions this worker still has (a
        partition it lost starts from the group's committed offset wherever it goes)."""
        for part, recs in batch.items():
            try:
                self.consumer.seek(TopicPartition(self.view.source, part, recs[0].offset))
            except KafkaException as exc:
                log.info("view %s: partition %d not rewound (%s): no longer assigned here",
                         self.view.name, part, exc.args[0].str())

    def _retry(self, call, *args):
        """`call(*args)`, again while it fails with a retriable error (a coordinator moving
        after a broker died, a timeout), for up to GIVE_UP seconds."""
        deadline = time.monotonic() + GIVE_UP
        while True:
            try:
                return call(*args)
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or time.monotonic() > deadline:
                    raise
                log.info("view %s: %s: %s; trying again", self.view.name,
                         getattr(call, "__name__", call), err.str())
                time.sleep(0.2)

    def _close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()  # leaves the group: the others take its partitions now
            self.consumer = None
        if self.producer is not None:
            self.producer.flush(TIMEOUT)
            self.producer = None
