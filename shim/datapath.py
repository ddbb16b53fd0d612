"""The one way records flow: reframed into packets, through the target, to endpoints.

Theory of operation. The broker drives one target (`controller.target.Target`, opened by
`controller.targets.open_target`: today the embedded software switch) programmed with the
static Kafka pipeline: `p4/kafka/kafka.p4` compiled with `static=True`, so the pipeline
never changes and a subscription change only changes table entries and multicast groups.
Every egress port is one subscription endpoint: a view (all partitions of its source,
through its filter) or a consumer-group member (its assigned partitions of one topic or
view, through the view's filter if any). `subscribe(port, ...)` and `unsubscribe(port)`
edit the subscription set; `sync()` applies the endpoints that changed since the last
compile to the incremental compiler (`compiler.incremental`: one rule per endpoint, from
`shim.subscriptions.rules_for`, removed and added), which answers with the entry writes
the change needs, in time proportional to the change, not to the subscriptions; those go
to the target; a write the target refuses (`TargetError`) makes it reload the whole state.
While an endpoint's filter is too wide for normal form (`compiler.formula`), which the
incremental compiler refuses, every change compiles all the rules from scratch instead and
writes the difference (`shim.approximation.WholeCompile`).
Once the broker serves (`compile_in_background()`), nothing compiles on the event loop: a
change compiles on a worker thread from a snapshot of the changed endpoints while the target
keeps its old entries, the result is written on the loop, and `when_applied(fn)` runs `fn`
once the subscriptions of its time are on the target (what a new view's replay waits for); a
released port is reused only after the entries that sent to it are gone.

`send(topic, partition, records, then=...)` extracts each record's slots with the topic's
schema, reframes it (`shim.reframe`, fragments for large records) and hands the frames to
the target, packed (one buffer, one u32 length per frame). The target reports what its
egress ports emitted for them, inline (the embedded switch) or later (a remote one), and
`then` gets what each log endpoint (a view) received, {port: [(offset, record)]} in offset
order. Reports come back in send order, and `after(fn)` runs `fn` once everything sent so
far is reported, so the broker's code is the same whichever target it drives; each send
keeps the log endpoints of its own time, so a report arriving after a subscription
change is judged as it was sent, and a released port is reused only once nothing sent
before its release is under way. With the native extension the frames are built in one
call (`reframe.frame_records`, the bytes `reframe.packets` makes), and when the target
reports each copy's input frame (the embedded switch does) the copies are tallied in one
(`reframe._native.tally_copies`): a log endpoint that got each of its records' fragments
whole, unaltered and in order gets the sent records back without reassembly, which is all
reassembly could give; anything else (copies without their input frame, from a remote
target) is reassembled. Group members' ports are subscribed with `log=False`: Fetch
serves a member from its topic's or view's log (which holds the same records for the
partitions it was assigned, and stays valid across rebalances), so what their ports
receive is counted per port (`Stats.packets_out`) and not decoded. Topics nobody
subscribes to skip the target entirely (there is nobody to deliver to); their records are
still in the source log that plain consumers read.

Past the entry budget (`max_entries`, `camus serve --max-entries`) the compiler is given
approximated rules, a superset of each endpoint's (`shim.approximation.Budget`); each send
then carries the exact filters of the views whose rule on the target is approximated, and
what those views received is re-checked against them (`_exact`) before `then` sees it, the
false positives dropped and counted (`Stats.rechecked`, `Stats.false_positives`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from compiler.ast import Const, Filter, Rule, rule_state
from compiler.compile import no_cyclic_gc
from compiler.estimate import DEFAULT_MAX_ENTRIES
from compiler.incremental import Incremental
from compiler.rules import deep_recursion
from controller.diff import Changes
from controller.target import INGRESS_PORT, LOCAL_INGRESS, Emitted, Target, TargetError
from shim import reframe
from shim.approximation import Budget, Held, format_alpha, recheck
from shim.protocol.records import Record, RecordBatch, batch_records, batch_records_at
from shim.schema import SLOTS, Schema
from shim.subscriptions import Fed, Subscription, kafka_spec

log = logging.getLogger("camus.datapath")
MAX_SENDERS = 1024  # reassemblers kept for records from the network, one per sending host
# Endpoints are the switch's ports 1..509: v1model names 9-bit ports, 0 is where produced
# records enter, 510 where records go in that must not leave the broker (LOCAL_INGRESS), and
# bmv2 drops what is sent to 511 (a fabric's logical up port, too).
LAST_ENDPOINT = LOCAL_INGRESS - 1


class PortsExhausted(RuntimeError):
    """Every port the switch has for endpoints (views, group members' topics) is taken."""

Delivered = dict[int, list[tuple[int, Record]]]  # log endpoint -> [(offset, record)]


@dataclass
class Stats:
    records_in: int = 0
    packets_in: int = 0
    deliveries: int = 0  # records reassembled at log endpoints
    packets_out: dict[int, int] = field(default_factory=dict)  # port -> packets it received
    syncs: int = 0
    writes: int = 0  # entry and group writes, summed over syncs
    arrived: int = 0  # records that came from the network (a fabric target)
    arrived_by_reference: int = 0  # by-reference packets from the network: not recoverable
    # The edge's exact re-check while the switch holds an approximation (shim.approximation):
    rechecked: dict[int, int] = field(default_factory=dict)  # view port -> records re-checked
    false_positives: dict[int, int] = field(default_factory=dict)  # view port -> records dropped
    approximations: int = 0  # times the switch went from exact rules to approximated ones


@dataclass(eq=False)
class _Sent:
    """Frames under way, and what their report is judged by."""

    frames: bytes
    lengths: bytes
    owner: bytes | None  # u32 LE record index per frame (native framing), else None
    records_at: Callable[[list[int]], Sequence[Record]]  # the sent records, by index
    count: int  # how many records were sent
    shift: int
    logs: list[int]  # the log endpoints when sent
    then: Callable[[Delivered], None]
    recheck: dict[int, Filter] = field(default_factory=dict)  # log endpoint -> exact filter


@dataclass
class _Prepared:
    """A change compiled (the compiler holds it), ready to commit to the target."""

    changes: Changes
    commit: Callable[[], None] | None  # None: the target could not stage; reload it
    subs: dict[int, Subscription | None]  # the endpoints it changed, as they are now
    held: Held  # α and the endpoints re-checked at the edge, once committed
    # every endpoint's exact rule after it, as the network is to route (`published_of`)
    rules: list[Rule] = field(default_factory=list)
    instances: dict = field(default_factory=dict)  # `DataPath.instances` after it


class DataPath:
    def __init__(self, target: Target, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.spec = kafka_spec()
        # What the compiler holds: one rule per endpoint (touched on the worker only, one
        # change at a time), approximated when the exact ones pass `max_entries` (0: no
        # budget; see shim.approximation); what the target holds lags it until a change is
        # committed, and `held` is what it holds.
        self.compiler = Incremental(self.spec, [], static=True)
        self.budget = Budget(self.spec, max_entries)
        self.held = Held({}, {}, 0)
        self.pipeline = self.compiler.pipeline
        self.target = target
        target.set_receiver(self._report)
        target.load(self.pipeline, self.compiler.entries())
        self._reload = False  # the target may differ from the compiler: load it whole
        self.subscriptions: dict[int, Subscription] = {}
        self._changed_ports: set[int] = set()  # endpoints changed since the last compile
        self._topics: Counter = Counter()  # topic -> endpoints on the target
        self._on_target: dict[int, int] = {}  # endpoint -> its topic, on the target
        self.reassemblers: dict[int, reframe.Reassembler] = {}
        self.topics_wanted: set[int] = set()
        self.log_ports: set[int] = set()  # endpoints whose packets are reassembled into records
        self.stats = Stats()
        self._dirty = False
        # Subscription changes are numbered; `_applied` is the last number on the target.
        self._epoch = self._applied = 0
        self._on_applied: list[tuple[int, Callable[[], None]]] = []
        self._worker: ThreadPoolExecutor | None = None  # set by compile_in_background()
        self._compiling = False
        # Endpoints whose last compile failed (the error), until one of theirs commits.
        self.failed: dict[int, str] = {}
        self._free_ports: list[int] = []
        self._next_port = 1
        # Sends not yet reported, in order, with the `after` callbacks queued behind them.
        self._under_way: deque[_Sent | Callable[[], None]] = deque()
        self._generation = 0  # numbers the subscriptions of views with state (`Fed`)
        # `state_lost(ports)`: the instances of these fed views' rules on the target are no
        # longer what their records made them (the target was reloaded, or a rebuild of the
        # compiler moved them); the broker then feeds those views again from their start.
        self.state_lost: Callable[[set[int]], None] | None = None
        # fed view port -> [(partition, state name, register, base, buckets)]: where its rules'
        # instances are on the target (entries.json's `state_instances`), as committed.
        self.instances: dict[int, list[tuple[int, str, str, int, int]]] = {}

    # --- control ----------------------------------------------------------------------

    def allocate_port(self) -> int:
        """A free endpoint port; PortsExhausted when all LAST_ENDPOINT are taken."""
        if self._free_ports:
            return self._free_ports.pop()
        if self._next_port > LAST_ENDPOINT:
            raise PortsExhausted(
                f"the switch has {LAST_ENDPOINT} ports for views and consumer group members' "
                f"topics, and every one is taken (or being released); delete a view or stop "
                f"a consumer first")
        self._next_port += 1
        return self._next_port - 1

    def subscribe_fed(self, port: int, view_number: int, source_number: int, partitions: int,
                      filter: Filter) -> None:
        """Port `port` is a view with state: the records fed to it (`send` of its source's
        records under `view_number`, `only=port`) that pass `filter`, with instances of its
        own per source partition (`shim.subscriptions.Fed`). Every call makes new rules, so
        a view subscribed again starts with empty instances."""
        self._generation += 1
        self.subscriptions[port] = Subscription(view_number, port, None, filter,
                                                Fed(partitions, source_number, self._generation))
        self._changed(port)
        self.log_ports.add(port)

    def subscribe(self, port: int, topic_number: int, partitions: frozenset[int] | None = None,
                  filter: Filter = Const(True), log: bool = True) -> None:
        """Port `port` is to receive `topic_number`'s records (of `partitions`, or all) that
        pass `filter`; `log=False` only counts what it receives (see the module text)."""
        sub = Subscription(topic_number, port, partitions, filter)
        if self.subscriptions.get(port) != sub:
            self.subscriptions[port] = sub
            self._changed(port)
        if log:
            self.log_ports.add(port)
        else:
            self.log_ports.discard(port)

    def unsubscribe(self, port: int, release: bool = True) -> None:
        if self.subscriptions.pop(port, None) is not None:
            self._changed(port)
        self.reassemblers.pop(port, None)
        self.failed.pop(port, None)
        self.log_ports.discard(port)
        self.stats.packets_out.pop(port, None)
        self.stats.false_positives.pop(port, None)
        self.stats.rechecked.pop(port, None)
        if release:  # not while the target's entries, or copies under way, still reach it
            self.when_applied(partial(self.after, partial(self._free_ports.append, port)),
                              update=False)

    def _changed(self, port: int) -> None:
        self._dirty = True
        self._epoch += 1
        self._changed_ports.add(port)

    @property
    def entries(self) -> dict:
        """entries.json of the subscriptions compiled last (made afresh: for tests and
        tools, not for the data path)."""
        return self.compiler.entries()

    def _snapshot(self) -> dict[int, Subscription | None]:
        """The endpoints changed since the last snapshot, as they are now (None: gone)."""
        changed, self._changed_ports = self._changed_ports, set()
        return {p: self.subscriptions.get(p) for p in changed}

    def compile_in_background(self) -> None:
        """From now on compile on a worker thread, never on the calling (event loop) thread."""
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="camus-compile")

    def when_applied(self, fn: Callable[[], None], update: bool = True) -> None:
        """`fn()` once the subscriptions as they are now are on the target: now, if they
        are. `update=False` leaves the update to whoever calls `update()` next (or, once
        compiling in the background, to the compile any change starts)."""
        if self._applied >= self._epoch:
            fn()
            return
        self._on_applied.append((self._epoch, fn))
        if update or self._worker is not None:
            self.update()

    def sync(self) -> int:
        """Bring the target in line with the subscriptions, compiling here; the number of
        writes. (A broker that serves calls `update` instead.)"""
        if not self._dirty:
            return 0
        return self._commit(self._prepare(self._snapshot()), self._epoch)

    def update(self) -> None:
        """Bring the target in line: here (`sync`), or once compiling in the background by
        starting a compile of the changed endpoints on the worker, unless one is under way
        (its result is written first, then the next change compiles)."""
        if self._worker is None:
            self.sync()
            return
        if not self._dirty or self._compiling:
            return
        subs = self._snapshot()
        epoch, loop = self._epoch, asyncio.get_running_loop()
        future = loop.run_in_executor(self._worker, self._prepare, subs)
        self._compiling = True
        future.add_done_callback(partial(self._compiled, subs, epoch))

    def _prepare(self, subs: dict[int, Subscription | None]) -> _Prepared:
        """Apply the changed endpoints `subs` to the compiler and stage the writes it answers
        with: everything but the commit, on whatever thread calls it.

        The cycle collector is paused throughout, as `compile_rules` pauses it: the compiler
        holds large acyclic structures, and a full collection walking them would hold the
        GIL, and so the event loop, for a second or more. If the compiler fails, it is
        rebuilt from the rules it held before, which the target holds."""
        # Filters nest up to MAX_NESTING parentheses: normalising, estimating and rounding
        # them recurse as deep, as the parser does.
        with no_cyclic_gc(), deep_recursion():
            try:
                self.compiler, changes, held = self.budget.change(self.compiler, subs)
            except BaseException:
                self.compiler = self.budget.rebuild()
                # A compiler rebuilt from the rules places their instances afresh: where a
                # fed view's now differ from the target's, the target is loaded whole at
                # the next commit, and the fed views are fed again (`state_lost`).
                rebuilt = self._instance_map()
                if any(rebuilt.get(p) != cells for p, cells in self.instances.items()):
                    self._reload = True
                raise
            try:
                commit = self.target.stage(self.pipeline, self.compiler.entries, changes)
            except TargetError:
                commit = None  # the commit reloads
        return _Prepared(changes, commit, subs, held,
                         [r for rules in self.budget.published.values() for r in rules],
                         self._instance_map())

    def _instance_map(self) -> dict[int, list[tuple[int, str, str, int, int]]]:
        """Where the compiler put each fed view's instances (see `instances`): on the thread
        that compiles, from the compiler's live stateful rules, known by rule text."""
        rules = {(r.text, r.line): (p, k) for p, rs in self.budget.exact.items()
                 for k, r in enumerate(rs) if rule_state(r)}
        if not rules:
            return {}
        state = getattr(self.compiler, "state", None)
        if state is not None:  # the incremental compiler: only its stateful rules are walked
            found = state.instances(self.compiler.app.name)
        else:
            found = self.compiler.entries().get("state_instances", [])
        registers = {(v.name, b): r for app in self.pipeline.applications if app.state
                     for v in app.state.vars for b, r in enumerate(v.registers)}
        out: dict[int, list[tuple[int, str, str, int, int]]] = {}
        for i in found:
            where = rules.get((i["rule"], i["line"]))
            if where is not None:
                port, partition = where
                out.setdefault(port, []).append((partition, i["state"],
                                                 registers[(i["state"], i["bank"])],
                                                 i["base"], i["buckets"]))
        for cells in out.values():
            cells.sort()
        return out

    def state_of(self, port: int) -> list[tuple[int, str, list[tuple[int, int, int]]]]:
        """A fed view's instances as the target holds them: (partition, state name, cells
        (window tag, n, s) per bucket), read from the target's registers; TargetError where
        the target cannot read them."""
        return [(partition, name, self.target.read_cells(register, base, buckets))
                for partition, name, register, base, buckets in self.instances.get(port, ())]

    def _compiled(self, subs: dict[int, Subscription | None], epoch: int, future) -> None:
        self._compiling = False
        if future.cancelled():
            self._reload = True
            return
        if future.exception() is not None:
            # The old entries stay; the change that caused it is reported and left out
            # until the next change, which compiles it again.
            log.error("compiling %d changed subscriptions failed; the target keeps its "
                      "entries: %s", len(subs), future.exception())
            self.failed.update({p: str(future.exception()) for p, s in subs.items() if s})
            self._changed_ports.update(subs)
            self._applied = epoch
            self._dirty = epoch != self._epoch  # not retried until the next change
            self._run_applied()
        elif epoch > self._applied:
            self._commit(future.result(), epoch)
        else:  # not committed, though the compiler holds it
            self._reload = True
        self.update()

    def _commit(self, prepared: _Prepared, epoch: int) -> int:
        changes, commit = prepared.changes, prepared.commit
        lost = set(prepared.held.lost)
        try:
            if commit is None or self._reload:
                raise TargetError("the target could not stage the writes")
            commit()
        except TargetError as exc:
            # The target refused a write the diff believed valid: never run half-updated;
            # load the whole compiled state instead.
            if not self._reload:
                log.error("incremental target update failed (%s); reloading all entries", exc)
            self.target.load(self.pipeline, self.compiler.entries())
            self._reload = False
            # A target loaded whole starts its registers empty: every fed view the change
            # did not (re)subscribe lost what its records had made of its instances.
            lost |= {p for p, s in self._on_target_subs().items() if p not in prepared.subs}
        for port, sub in prepared.subs.items():
            self.failed.pop(port, None)
            old = self._on_target.pop(port, None)
            if old is not None:
                self._topics[old] -= 1
                if not self._topics[old]:
                    del self._topics[old]
            if sub is not None:
                self._on_target[port] = sub.topic_id
                self._topics[sub.topic_id] += 1
        self.topics_wanted = set(self._topics)
        self._held(prepared.held)
        self.instances = prepared.instances
        self.target.subscribed(prepared.rules)
        self._applied = epoch
        self._dirty = epoch != self._epoch
        self._run_applied()
        self.stats.syncs += 1
        self.stats.writes += len(changes)
        log.debug("target updated: %d writes for %d changed subscriptions", len(changes),
                  len(prepared.subs))
        lost &= {p for p, s in self.subscriptions.items() if s.fed is not None}
        if lost and self.state_lost is not None:
            log.warning("the state of %d view(s) on the target was lost (reloaded or moved); "
                        "they are fed their sources again from the start", len(lost))
            self.state_lost(lost)
        return len(changes)

    def _on_target_subs(self) -> dict[int, Subscription]:
        """The fed views' subscriptions whose rules the target held before this commit."""
        return {p: s for p, s in self.subscriptions.items()
                if s.fed is not None and p in self._on_target}

    def _held(self, held: Held) -> None:
        """The target now holds `held`: log a change of approximation."""
        was, self.held = self.held, held
        if held.alpha == was.alpha:
            return
        budget = self.budget.max_entries
        if not was.alpha:
            self.stats.approximations += 1
            log.warning("the subscriptions' exact rules do not fit the budget of %d entries "
                        "(--max-entries): the switch now holds a superset approximated "
                        "with alpha %s (%d entries), and %d view(s) re-check every record they "
                        "receive", budget, format_alpha(held.alpha), held.entries,
                        len(held.recheck))
        elif not held.alpha and budget and held.entries > budget:  # a wide filter: see Budget
            log.warning("the switch holds the subscriptions' exact rules again (%d entries, "
                        "over the budget of %d): a filter too wide for normal form is never "
                        "approximated; no re-check", held.entries, budget)
        elif not held.alpha:
            log.warning("the subscriptions' exact rules fit the budget of %d entries again: "
                        "the switch holds them exactly (%d entries), no re-check", budget,
                        held.entries)
        else:
            log.warning("approximation changed to alpha %s (%d entries, budget %d), %d view(s) "
                        "re-checked", format_alpha(held.alpha), held.entries, budget,
                        len(held.recheck))

    def _run_applied(self) -> None:
        ready = [fn for e, fn in self._on_applied if e <= self._applied]
        self._on_applied = [(e, fn) for e, fn in self._on_applied if e > self._applied]
        for fn in ready:
            fn()

    def close(self) -> None:
        """Release the target (a remote one's connections and threads) and the worker."""
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
        self.target.close()

    # --- data -------------------------------------------------------------------------

    def wants(self, topic_number: int) -> bool:
        """Whether a subscription on the target selects records of this topic (starting the
        compile of any change not there yet)."""
        if self._dirty:
            self.update()
        return topic_number in self.topics_wanted or self.target.carries(topic_number)

    def after(self, fn: Callable[[], None]) -> None:
        """`fn()` once everything sent so far is reported: now, if nothing is under way."""
        if self._under_way:
            self._under_way.append(fn)
        else:
            fn()

    def send(self, topic_number: int, partition: int, schema: Schema | None,
             records: Sequence[Record], then: Callable[[Delivered], None],
             only: int | None = None, shift: int = 0, local: bool = False,
             lanes: tuple[int, ...] = (), single: bool = False) -> None:
        """Records of one source partition through the target; `then(delivered)` once it
        has reported (see the module text), {} at once (in turn) if nobody subscribes.

        `shift` is added to every record's offset (a batch as the producer numbered it, sent
        before its stored copy was renumbered); `only` keeps what one port receives
        (replaying a source log into a new view). With `only` or `local` the frames go in on
        `LOCAL_INGRESS`: a fabric target keeps them to this broker's endpoints (a replay, or
        records that came from the network, must not go back out). `lanes` and `single`
        frame the records as a view with state is fed them (`reframe.packets`).
        """
        if not self.wants(topic_number) or not records:
            return self.after(partial(then, {}))
        native = reframe._native is not None
        slots: list[list[int]] | bytes | None = None
        if schema is not None:
            slots = schema.extract_packed([r.value for r in records]) if native else None
            if slots is None:
                slots = [schema.extract(r.key, r.value, list(r.headers)) for r in records]
        self.stats.records_in += len(records)
        packed = (reframe.frame_records(topic_number, partition, records, slots, shift,
                                        lanes=lanes, single=single) if native else None)
        if packed is None:  # the reference: a Python bytes object per packet
            if isinstance(slots, bytes):
                slots = [list(s) for s in struct.iter_unpack("<8Q", slots)]
            frames: list[bytes] = []
            for i, r in enumerate(records):
                frames += reframe.packets(topic_number, partition, r.offset + shift,
                                          slots[i] if slots else [0] * SLOTS,
                                          reframe.Record(r.timestamp, r.key, r.value, tuple(r.headers)),
                                          lanes=lanes, single=single)
            packed = (b"".join(frames), struct.pack(f"<{len(frames)}I", *map(len, frames)), None)
        self._send(packed, lambda js: [records[j] for j in js], len(records), shift, only, then,
                   local)

    def send_batch(self, topic_number: int, partition: int, schema: Schema | None,
                   batch: RecordBatch, then: Callable[[Delivered], None], shift: int = 0,
                   local: bool = False, only: int | None = None, lanes: tuple[int, ...] = (),
                   single: bool = False) -> None:
        """`send(..., batch_records(batch), then, shift=shift, ...)` of a produced batch: with
        the extension, a batch whose records were left unbuilt is framed from its records
        section (`reframe.frame_body`) and only the records a view receives are built."""
        if not self.wants(topic_number) or not batch.record_count:
            return self.after(partial(then, {}))
        paths = schema.packed_paths() if schema is not None else None
        packed = None
        if (reframe._native is not None and batch.records is None
                and (schema is None or paths is not None)):
            packed = reframe.frame_body(topic_number, partition, batch, paths, shift,
                                        lanes=lanes, single=single)
        if packed is None:
            return self.send(topic_number, partition, schema, batch_records(batch), then,
                             only=only, shift=shift, local=local, lanes=lanes, single=single)
        *packed, missed = packed
        if schema is not None:
            schema.count_misses(missed)
        self.stats.records_in += batch.record_count
        self._send(packed, partial(batch_records_at, batch), batch.record_count, shift, only,
                   then, local)

    def _send(self, packed, records_at, count: int, shift: int, only: int | None,
              then: Callable[[Delivered], None], local: bool = False) -> None:
        """Packed frames (buffer, u32 lengths, u32 record index per frame or None) to the
        target; `records_at(indices)`: the sent records."""
        buf, lengths, owner = packed
        self.stats.packets_in += len(lengths) // 4
        logs = [p for p in self.log_ports if only is None or p == only]
        checks = self.held.recheck  # empty unless the switch holds an approximation
        sent = _Sent(buf, lengths, owner, records_at, count, shift, logs, then,
                     {p: checks[p] for p in logs if p in checks} if checks else {})
        self._under_way.append(sent)
        try:
            ingress = LOCAL_INGRESS if local or only is not None else INGRESS_PORT
            self.target.send(ingress, buf, lengths, sent)
        except BaseException:
            if sent in self._under_way:  # refused before it was under way: never reported
                self._under_way.remove(sent)
            raise

    # --- records from the network (a fabric target) --------------------------------------

    def set_arrivals(self, handler: Callable[[list[tuple[int, int, list[reframe.Record]]]], None]
                     ) -> None:
        """`handler(runs)` for the records the network delivers to this broker: runs of
        (topic number, partition, records in arrival order), records reassembled from the
        frames (their offsets are the sender's, which this broker does not keep)."""
        self._arrival_handler = handler
        # One reassembler per sender (the frame's Ethernet source, which a fabric target
        # sets to its host's): two brokers number one partition's records independently, so
        # their fragments must not meet under one (topic, partition, offset).
        self._network_reassemblers: dict[bytes, reframe.Reassembler] = {}
        self.target.set_arrivals(self._arrived)

    def _arrived(self, frames: list[bytes]) -> None:
        runs: list[tuple[int, int, list[reframe.Record]]] = []
        for frame in frames:
            sender = bytes(frame[6:12])
            reassembler = self._network_reassemblers.get(sender)
            if reassembler is None:
                if len(self._network_reassemblers) >= MAX_SENDERS:  # strangers on a link
                    del self._network_reassemblers[next(iter(self._network_reassemblers))]
                reassembler = self._network_reassemblers[sender] = reframe.Reassembler()
            done = reassembler.push(frame)
            if done is None:
                continue
            topic, partition, _, rec = done
            if rec is None:  # its record is in the sender's broker, out of reach from here
                self.stats.arrived_by_reference += 1
                continue
            if not runs or runs[-1][:2] != (topic, partition):
                runs.append((topic, partition, []))
            runs[-1][2].append(rec)
            self.stats.arrived += 1
        if runs:
            self._arrival_handler(runs)

    def _report(self, sent: _Sent, emitted: Emitted) -> None:
        """The target's receiver: what `sent` made it emit, then what waited behind it."""
        head = self._under_way.popleft()
        assert head is sent, "the target reported out of send order"
        try:
            sent.then(self._exact(sent, self._received(sent, emitted)))
        finally:
            while self._under_way and not isinstance(self._under_way[0], _Sent):
                self._under_way.popleft()()

    def _exact(self, sent: _Sent, out: Delivered) -> Delivered:
        """`out` without the records a re-checked view (the switch holding a superset of its
        filter when `sent` was sent) received that its exact filter rejects."""
        slots, values = None, {}
        for port, f in sent.recheck.items():
            got = out.get(port)
            if got:
                if slots is None:  # read once per send, from the frames the switch matched
                    slots = reframe.slots_of(sent.frames, sent.lengths)
                kept = recheck(slots, got, f, values)
                checked = self.stats.rechecked
                checked[port] = checked.get(port, 0) + len(got)
                if len(kept) < len(got):
                    dropped = self.stats.false_positives
                    dropped[port] = dropped.get(port, 0) + len(got) - len(kept)
                    if kept:
                        out[port] = kept
                    else:
                        del out[port]
        return out

    def _received(self, sent: _Sent, emitted: Emitted) -> Delivered:
        """What each of `sent.logs` received, from the copies the target emitted."""
        out: Delivered = {}
        buf, copies = emitted.buf, emitted.copies
        tallied = sent.owner is not None
        if tallied:
            # The copies counted per port without a Python object per packet. A log port's
            # records are the sent records themselves when `tally_copies` finds that it
            # received each one whole, unaltered and in order, which is all reassembly could
            # yield; it declines copies without their input frame (NO_INDEX), which are
            # then reassembled.
            counts, got = reframe._native.tally_copies(sent.frames, sent.lengths, sent.owner,
                                                       buf, copies, sent.logs, reframe.MAX_RECORD)
            for port, n in counts:
                self.stats.packets_out[port] = self.stats.packets_out.get(port, 0) + n
            if got is not None and not any(self.reassemblers[p].pending
                                           for p in sent.logs if p in self.reassemblers):
                for port, _ in counts:
                    if port in sent.logs:
                        self.reassemblers.setdefault(port, reframe.Reassembler())
                for (port, _), r in zip(got, sent.records_at([j for _, j in got])):
                    offset = r.offset + sent.shift
                    out.setdefault(port, []).append(
                        (offset, Record(offset, r.timestamp, r.key, r.value, r.headers)))
                self.stats.deliveries += len(got)
                return out
        counts = self.stats.packets_out
        logs = set(sent.logs)
        view = memoryview(buf)
        for _, port, off, n in struct.iter_unpack("<4I", copies):
            if not tallied:
                counts[port] = counts.get(port, 0) + 1
            if port in logs:
                self._receive(port, bytes(view[off:off + n]), sent, out)
        return out

    def _receive(self, port: int, frame: bytes, sent: _Sent, out: Delivered) -> None:
        """One copy at log endpoint `port`, reassembled into `out` once whole."""
        done = self.reassemblers.setdefault(port, reframe.Reassembler()).push(frame)
        if done is not None:
            _, _, offset, rec = done
            if rec is None:  # a by-reference packet: the record is one `sent` holds
                rec = next((r for r in sent.records_at(list(range(sent.count)))
                            if r.offset + sent.shift == offset), None)
                if rec is None:
                    self.reassemblers[port].malformed += 1
                    return
            out.setdefault(port, []).append(
                (offset, Record(offset, rec.timestamp, rec.key, rec.value, rec.headers)))
            self.stats.deliveries += 1
