"""The one way records flow: reframed into packets, through the embedded switch, to endpoints.

Theory of operation. The broker embeds a software switch (`switch.dataplane`) programmed
with the static Kafka pipeline: `p4/kafka/kafka.p4` compiled with `static=True`, so the
pipeline never changes and a subscription change only changes table entries and
multicast groups. Every egress port is one subscription endpoint: a view (all partitions
of its source, through its filter) or a consumer-group member (its assigned partitions of
one topic or view, through the view's filter if any). `subscribe(port, ...)` and
`unsubscribe(port)` edit the subscription set; `sync()` recompiles the rules
(`shim.subscriptions.rules_for` + `compile_rules(static=True)`) and writes only the
difference (`controller.diff`) into the switch.

`send(topic, partition, records)` extracts each record's slots with the topic's schema,
reframes it (`shim.reframe`, fragments for large records), runs the packets through the
switch and reassembles what each log endpoint (a view) receives; it returns
{port: [(offset, record)]}, in offset order. With the native extension and switch, the
packets are framed in one call (`reframe.frame_records`, the bytes `reframe.packets` makes)
and the copies are tallied in one (`switch._native.tally_copies`): a log endpoint that got
each of its records' fragments whole, unaltered and in order gets the sent records back
without reassembly, which is all reassembly could give; anything else is reassembled. Group members' ports are subscribed with
`log=False`: Fetch serves a member from its topic's or view's log (which holds the same
records for the partitions it was assigned, and stays valid across rebalances), so what
their ports receive is counted per port (`Stats.packets_out`) and not decoded. Topics nobody subscribes to skip the switch entirely (there is nobody to
deliver to); their records are still in the source log that plain consumers read.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.ast import Const, Filter
from compiler.compile import compile_rules
from controller.diff import diff
from shim import reframe
from shim.protocol.records import Record, RecordBatch, batch_records, batch_records_at
from shim.schema import SLOTS, Schema
from shim.subscriptions import Subscription, kafka_spec, rules_for
from switch import dataplane
from pipeline.model import EntryError

log = logging.getLogger("camus.datapath")
INGRESS_PORT = 0


@dataclass
class Stats:
    records_in: int = 0
    packets_in: int = 0
    deliveries: int = 0  # records reassembled at log endpoints
    packets_out: dict[int, int] = field(default_factory=dict)  # port -> packets it received
    syncs: int = 0
    writes: int = 0  # entry and group writes, summed over syncs


class DataPath:
    def __init__(self, impl: str = "native") -> None:
        self.spec = kafka_spec()
        empty = compile_rules(self.spec, [], static=True)
        self.pipeline = empty.pipeline
        self.impl = impl
        self.switch = dataplane.load(self.pipeline, empty.entries, impl=impl)
        self.entries = empty.entries
        self.subscriptions: dict[int, Subscription] = {}
        self.reassemblers: dict[int, reframe.Reassembler] = {}
        self.topics_wanted: set[int] = set()
        self.log_ports: set[int] = set()  # endpoints whose packets are reassembled into records
        self.stats = Stats()
        self._dirty = False
        self._free_ports: list[int] = []
        self._next_port = 1

    # --- control ----------------------------------------------------------------------

    def allocate_port(self) -> int:
        if self._free_ports:
            return self._free_ports.pop()
        self._next_port += 1
        return self._next_port - 1

    def subscribe(self, port: int, topic_number: int, partitions: frozenset[int] | None = None,
                  filter: Filter = Const(True), log: bool = True) -> None:
        """Port `port` is to receive `topic_number`'s records (of `partitions`, or all) that
        pass `filter`; `log=False` only counts what it receives (see the module text)."""
        sub = Subscription(topic_number, port, partitions, filter)
        if self.subscriptions.get(port) != sub:
            self.subscriptions[port] = sub
            self._dirty = True
        if log:
            self.log_ports.add(port)
        else:
            self.log_ports.discard(port)

    def unsubscribe(self, port: int, release: bool = True) -> None:
        if self.subscriptions.pop(port, None) is not None:
            self._dirty = True
        self.reassemblers.pop(port, None)
        self.log_ports.discard(port)
        self.stats.packets_out.pop(port, None)
        if release:
            self._free_ports.append(port)

    def sync(self) -> int:
        """Bring the switch in line with the subscriptions; returns the number of writes."""
        if not self._dirty:
            return 0
        subs = sorted(self.subscriptions.values(), key=lambda s: s.port)
        compiled = compile_rules(self.spec, rules_for(self.spec, subs), static=True)
        assert compiled.pipeline == self.pipeline, "a static pipeline must not depend on rules"
        changes = diff(self.entries, compiled.entries)
        try:
            for op, item in changes.steps():
                if op == "set_group":
                    gid, reps = item
                    self.switch.set_group(gid, reps)
                elif op == "delete_group":
                    self.switch.delete_group(item)
                else:
                    getattr(self.switch, op)(item)
        except EntryError:
            # The switch refused a write the diff believed valid: never run half-updated;
            # load the whole compiled state into a fresh switch instead.
            log.exception("incremental switch update failed; reloading all %d entries",
                          len(compiled.entries["table_entries"]))
            self.switch = dataplane.load(self.pipeline, compiled.entries, impl=self.impl)
        self.entries = compiled.entries
        self.topics_wanted = {s.topic_id for s in subs}
        self._dirty = False
        self.stats.syncs += 1
        self.stats.writes += len(changes)
        log.debug("switch updated: %d writes for %d subscriptions", len(changes), len(subs))
        return len(changes)

    # --- data -------------------------------------------------------------------------

    def wants(self, topic_number: int) -> bool:
        """Whether any subscription selects records of this topic."""
        self.sync()
        return topic_number in self.topics_wanted

    def send(self, topic_number: int, partition: int, schema: Schema | None,
             records: Sequence[Record], only: int | None = None,
             shift: int = 0) -> dict[int, list[tuple[int, Record]]]:
        """Records of one source partition through the switch: {port: [(offset, record)]}.

        `shift` is added to every record's offset (a batch as the producer numbered it, sent
        before its stored copy was renumbered); `only` keeps what one port receives
        (replaying a source log into a new view).
        """
        if not self.wants(topic_number) or not records:
            return {}
        native = reframe._native is not None and hasattr(self.switch, "process_packed")
        slots: list[list[int]] | bytes | None = None
        if schema is not None:
            slots = schema.extract_packed([r.value for r in records]) if native else None
            if slots is None:
                slots = [schema.extract(r.key, r.value, list(r.headers)) for r in records]
        self.stats.records_in += len(records)
        out: dict[int, list[tuple[int, Record]]] = {}
        packed = (reframe.frame_records(topic_number, partition, records, slots, shift)
                  if native else None)
        if packed is None:  # the reference: a Python bytes object per packet and copy
            if isinstance(slots, bytes):
                slots = [list(s) for s in struct.iter_unpack("<8Q", slots)]
            frames: list[bytes] = []
            for i, r in enumerate(records):
                frames += reframe.packets(topic_number, partition, r.offset + shift,
                                          slots[i] if slots else [0] * SLOTS,
                                          reframe.Record(r.timestamp, r.key, r.value, tuple(r.headers)))
            self.stats.packets_in += len(frames)
            counts = self.stats.packets_out
            for copies in self.switch.process_batch(frames, INGRESS_PORT):
                for port, frame in copies:
                    counts[port] = counts.get(port, 0) + 1
                    self._receive(port, frame, only, out)
            return out
        return self._switch_packed(packed, only, lambda js: [records[j] for j in js], shift)

    def send_batch(self, topic_number: int, partition: int, schema: Schema | None,
                   batch: RecordBatch, shift: int = 0) -> dict[int, list[tuple[int, Record]]]:
        """`send(..., batch_records(batch), shift=shift)` of a produced batch: with the
        extension, a batch whose records were left unbuilt is framed from its records
        section (`reframe.frame_body`) and only the records a view receives are built."""
        if not self.wants(topic_number) or not batch.record_count:
            return {}
        paths = schema.packed_paths() if schema is not None else None
        packed = None
        if (reframe._native is not None and hasattr(self.switch, "process_packed")
                and batch.records is None and (schema is None or paths is not None)):
            packed = reframe.frame_body(topic_number, partition, batch, paths, shift)
        if packed is None:
            return self.send(topic_number, partition, schema, batch_records(batch), shift=shift)
        *packed, missed = packed
        if schema is not None:
            schema.count_misses(missed)
        self.stats.records_in += batch.record_count
        return self._switch_packed(packed, None, lambda js: batch_records_at(batch, js), shift)

    def _switch_packed(self, packed, only: int | None, records_at,
                       shift: int) -> dict[int, list[tuple[int, Record]]]:
        """Packed frames through the switch; `records_at(indices)`: the sent records."""
        # Native framing (byte-identical to `reframe.packets`), and the copies counted per
        # port without a Python object per packet. A log port's records are the sent records
        # themselves when `tally_copies` finds that it received each one whole, unaltered
        # and in order, which is all reassembly could yield; otherwise it reassembles.
        out: dict[int, list[tuple[int, Record]]] = {}
        buf, lengths, owner = packed
        self.stats.packets_in += len(lengths) // 4
        copies_buf, copies = self.switch.process_packed(buf, lengths, INGRESS_PORT)
        logs = [p for p in self.log_ports if only is None or p == only]
        counts, got = reframe._native.tally_copies(buf, lengths, owner, copies_buf, copies, logs,
                                                   reframe.MAX_RECORD)
        for port, n in counts:
            self.stats.packets_out[port] = self.stats.packets_out.get(port, 0) + n
        if got is None or any(self.reassemblers[p].pending for p in logs if p in self.reassemblers):
            view = memoryview(copies_buf)
            for _, port, off, n in struct.iter_unpack("<4I", copies):
                self._receive(port, bytes(view[off:off + n]), only, out)
            return out
        for port, _ in counts:
            if port in logs:
                self.reassemblers.setdefault(port, reframe.Reassembler())
        for (port, _), r in zip(got, records_at([j for _, j in got])):
            offset = r.offset + shift
            out.setdefault(port, []).append(
                (offset, Record(offset, r.timestamp, r.key, r.value, r.headers)))
        self.stats.deliveries += len(got)
        return out

    def _receive(self, port: int, frame: bytes, only: int | None,
                 out: dict[int, list[tuple[int, Record]]]) -> None:
        """One copy at `port`: reassembled into `out` if `port` is a log endpoint (or `only`)."""
        if port not in self.log_ports or (only is not None and port != only):
            return
        done = self.reassemblers.setdefault(port, reframe.Reassembler()).push(frame)
        if done is not None:
            _, _, offset, rec = done
            out.setdefault(port, []).append(
                (offset, Record(offset, rec.timestamp, rec.key, rec.value, rec.headers)))
            self.stats.deliveries += 1
