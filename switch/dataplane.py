"""The in-process data-plane interface that every switch implementation satisfies.

`DataPlane` is built from a pipeline.json document and then programmed and fed exactly like
a P4 target: table entries in entries.json form are inserted, modified and deleted (P4Runtime
semantics: insert of an existing entry, modify or delete of a missing one are errors),
multicast groups are set and deleted, packets go in with their ingress port and come out as
`(egress_port, bytes)` copies (or, many at once, packed: `process_packed`), and counters are
read back. The P4Runtime server and the broker's target (`controller.embedded`) embed a
`DataPlane`; the CLI and the tests use `load(pipeline, entries)`.

Theory of operation: this class owns the control state (the entries and groups as written,
validated once here) and hands each change to its implementation through four hooks
(`_install`, `_uninstall`, `_install_group`, `_uninstall_group`). An implementation therefore
never sees an invalid or conflicting entry, and both implementations accept and refuse
exactly the same writes. Packet processing and counters are the implementation's own; the
semantics they must agree on are docs/pipeline-ir.md, with `switch.reference` as the
executable definition and one shared test suite (tests/switch/) holding them together.

Counters (`counters()`) are a dict:
  {"tables": {name: {"hits": n, "misses": n}},
   "ports": {port: {"rx_packets": n, "tx_packets": n}},
   "drops": {"malformed": n, "truncated": n, "oversized": n, "no_route": n}}
A stage, default, leaf or egress table counts one lookup per message (egress: per copy); the
IPv4 table one per packet it forwards or fails to forward.

State (IR 4, docs/pipeline-ir.md "State"): packets go in with their time, `ts_us`
(microseconds; a pipeline whose spec declares a time field reads the message's field
instead). A caller that has a time gives it: `camus switch run` a pcap record's, the broker a
record's timestamp. A caller that gives none gets the implementation's clock: the native
switch's is the real-time clock in µs since the Unix epoch (modulo 2^48), read as the frame
is processed, so that windows on live input (`camus switch serve`) fall where a replay of its
capture puts them; the Python switch's counts µs from its creation. Register cells are
read, written and zeroed by register name and index (`read_cell`, `write_cell`,
`reset_cells`: the control plane's resets and P4Runtime's RegisterEntry), a cell as the
integer docs/pipeline-ir.md packs (tag, n and s from the high bits).
"""

from __future__ import annotations

import abc
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from pipeline.document import from_json
from pipeline.entries import Entry, check_version, normalise_replicas, parse_entry, parse_group
from pipeline.interpreter import new_table
from pipeline.match_kinds import MATCH_KINDS
from pipeline.model import EntryError, Pipeline

DEFAULT_MAX_FRAME = 9216  # jumbo frame; anything longer is dropped as oversized
DROP_REASONS = ("malformed", "truncated", "oversized", "no_route")
IMPLEMENTATIONS = ("native", "python")

Output = list[tuple[int, bytes]]


class DataPlane(abc.ABC):
    """A switch pipeline: programmable tables and groups, packets in, copies out."""

    def __init__(self, pipeline: dict | Pipeline, *, max_frame: int = DEFAULT_MAX_FRAME):
        self.pipeline = pipeline if isinstance(pipeline, Pipeline) else from_json(pipeline)
        self.max_frame = max_frame
        self._entries: dict[tuple, Entry] = {}
        # The installed keys of each table whose match kind has a conflict rule, in that
        # kind's structure, which finds the conflicts (pipeline.match_kinds).
        self._keys = {name: new_table(info) for name, info in self.pipeline.tables.items()
                      if info.match_kind and MATCH_KINDS[info.match_kind].may_conflict}
        self._groups: dict[int, tuple[tuple[int, int], ...]] = {}

    # ---- control: table entries -------------------------------------------------------

    def insert(self, entry: dict) -> None:
        """Insert one entries.json entry; EntryError if it exists or conflicts."""
        e = parse_entry(self.pipeline, entry)
        if e.key in self._entries:
            raise EntryError(f"table {e.table!r}: entry already exists: {entry}")
        keys = self._keys.get(e.table)
        if keys is not None:
            conflict = keys.conflict(e.state, e.a, e.b, e.priority)
            if conflict:
                raise EntryError(f"table {e.table!r}: {conflict}")
            keys.install(e.state, e.a, e.b, e.priority, None)
        self._entries[e.key] = e
        self._install(e)

    def modify(self, entry: dict) -> None:
        """Replace the action of an existing entry (same match and priority)."""
        e = parse_entry(self.pipeline, entry)
        if e.key not in self._entries:
            raise EntryError(f"table {e.table!r}: no such entry to modify: {entry}")
        self._entries[e.key] = e
        self._install(e)

    def delete(self, entry: dict) -> None:
        """Delete an existing entry; only its match (and priority) matter."""
        doc = dict(entry)
        e = parse_entry(self.pipeline, self._with_placeholder_action(doc))
        old = self._entries.pop(e.key, None)
        if old is None:
            raise EntryError(f"table {e.table!r}: no such entry to delete: {entry}")
        if old.table in self._keys:
            self._keys[old.table].uninstall(old.state, old.a, old.b, old.priority)
        self._uninstall(old)

    def write(self, updates: Iterable[tuple[str, dict]]) -> None:
        """Apply ("insert" | "modify" | "delete", entry) updates in order."""
        ops = {"insert": self.insert, "modify": self.modify, "delete": self.delete}
        for op, entry in updates:
            if op not in ops:
                raise EntryError(f"unknown update type {op!r}")
            ops[op](entry)

    def entries(self) -> list[dict]:
        """The installed entries in entries.json form (as written), for Read."""
        return [e.source for e in self._entries.values()]

    # ---- control: multicast groups ----------------------------------------------------

    def set_group(self, group_id: int, replicas: Sequence[tuple[int, int]]) -> None:
        """Create or replace multicast group `group_id` with (port, rid) replicas."""
        gid, _ = parse_group({"id": group_id, "replicas": []})
        reps = normalise_replicas(gid, replicas)
        self._groups[gid] = reps
        self._install_group(gid, reps)

    def delete_group(self, group_id: int) -> None:
        if group_id not in self._groups:
            raise EntryError(f"no multicast group {group_id} to delete")
        del self._groups[group_id]
        self._uninstall_group(group_id)

    def groups(self) -> dict[int, tuple[tuple[int, int], ...]]:
        return dict(self._groups)

    def load_entries(self, doc: dict) -> None:
        """Insert every entry and group of an entries.json document."""
        check_version(doc)
        for g in doc.get("multicast_groups", []):
            gid, reps = parse_group(g)  # checked and normalised once, not again by set_group
            self._groups[gid] = reps
            self._install_group(gid, reps)
        for entry in doc.get("table_entries", []):
            self.insert(entry)

    # ---- data ---------------------------------------------------------------------------

    @abc.abstractmethod
    def process(self, packet: bytes, in_port: int, ts_us: int | None = None) -> Output:
        """Run one frame, at time `ts_us` (µs; None: the implementation's clock), through
        the pipeline; return its (egress_port, frame) copies."""

    # ---- control: registers (IR 4) ------------------------------------------------------

    def reset_cells(self, cells: tuple[str, int, int]) -> None:
        """Zero cells first..first+count-1 of a register: `(register, first, count)`, as
        `Changes.steps()` gives a "reset_cells" step."""
        register, first, count = cells
        slots = self._register_slots(register)
        if not (isinstance(first, int) and isinstance(count, int) and 0 <= first
                and 0 <= count and first + count <= slots):
            raise EntryError(f"register {register!r}: cells {first}..{first}+{count} are not "
                             f"within its {slots} cells")
        self._reset_cells(register, first, count)

    def read_cell(self, register: str, index: int) -> int:
        """One register cell (docs/pipeline-ir.md: tag, n and s packed)."""
        if not 0 <= index < self._register_slots(register):
            raise EntryError(f"register {register!r} has no cell {index}")
        return self._read_cell(register, index)

    def write_cell(self, register: str, index: int, cell: int) -> None:
        """Set one register cell (packed as `read_cell` gives it; P4Runtime's RegisterEntry
        writes): EntryError for a cell the register lacks or a value wider than its cells."""
        if not 0 <= index < self._register_slots(register):
            raise EntryError(f"register {register!r} has no cell {index}")
        width = self.register_var(register).cell_width
        if not isinstance(cell, int) or not 0 <= cell < 1 << width:
            raise EntryError(f"register {register!r}: a cell is an integer of {width} bits, "
                             f"not {cell!r}")
        self._write_cell(register, index, cell)

    def register_var(self, register: str):
        """The declared state (pipeline.model.StateVar) whose bank `register` is."""
        for app in self.pipeline.applications:
            for var in app.state.vars if app.state else ():
                if register in var.registers:
                    return var
        raise EntryError(f"no register named {register!r}")

    def _register_slots(self, register: str) -> int:
        return self.register_var(register).slots

    def _reset_cells(self, register: str, first: int, count: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} holds no registers")

    def _read_cell(self, register: str, index: int) -> int:
        raise NotImplementedError(f"{type(self).__name__} holds no registers")

    def _write_cell(self, register: str, index: int, cell: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} holds no registers")

    def process_batch(self, packets: Sequence[bytes], in_port: int,
                      ts_us: Sequence[int] | None = None) -> list[Output]:
        """`process` over many frames arriving on one port, in order (`ts_us`: one time per
        frame, or None); one output list per frame."""
        times = ts_us if ts_us is not None else [None] * len(packets)
        return [self.process(p, in_port, t) for p, t in zip(packets, times)]

    def process_packed(self, buf: bytes, lengths: bytes, in_port: int,
                       ts_us: Sequence[int] | bytes | None = None) -> tuple[bytes, bytes]:
        """Frames back to back in `buf` (a u32 LE length each in `lengths`; `ts_us` one time
        per frame, a sequence or packed as u64 LE, or None); their copies back to back, and
        per copy <input index, egress port, offset, length> as u32 LE words.
        The compiled implementation does this in one call; this is `process_batch` around it."""
        frames, pos = [], 0
        for (n,) in struct.iter_unpack("<I", lengths):
            frames.append(buf[pos:pos + n])
            pos += n
        if isinstance(ts_us, bytes):
            ts_us = [t for (t,) in struct.iter_unpack("<Q", ts_us)]
        out, copies = bytearray(), bytearray()
        for i, emitted in enumerate(self.process_batch(frames, in_port, ts_us)):
            for port, frame in emitted:
                copies += struct.pack("<4I", i, port, len(out), len(frame))
                out += frame
        return bytes(out), bytes(copies)

    @abc.abstractmethod
    def counters(self) -> dict[str, Any]:
        """Table, port and drop counters (see the module docstring)."""

    @abc.abstractmethod
    def reset_counters(self) -> None:
        """Zero every counter."""

    # ---- implementation hooks -----------------------------------------------------------

    @abc.abstractmethod
    def _install(self, entry: Entry) -> None:
        """Add `entry`, or replace the action of the entry with the same key."""

    @abc.abstractmethod
    def _uninstall(self, entry: Entry) -> None:
        """Remove the entry with `entry.key`."""

    @abc.abstractmethod
    def _install_group(self, group_id: int, replicas: tuple[tuple[int, int], ...]) -> None:
        """Create or replace a multicast group."""

    @abc.abstractmethod
    def _uninstall_group(self, group_id: int) -> None:
        """Remove a multicast group (leaf entries naming it then select no port)."""

    # ---- helpers ------------------------------------------------------------------------

    def _with_placeholder_action(self, doc: dict) -> dict:
        """A delete names only the match; give it a valid action so it parses like an entry."""
        info = self.pipeline.tables.get(doc.get("table"))
        if info is not None and "action" not in doc:
            action = self.pipeline.actions[info.actions[0]]
            doc["action"] = action.name
            doc["params"] = {p.name: 0 for p in action.params}
        return doc


def new(pipeline: dict | Pipeline, impl: str = "native", **options: Any) -> DataPlane:
    """An empty data plane of the chosen implementation ("native" or "python")."""
    if impl == "python":
        from switch.reference import ReferenceDataPlane

        return ReferenceDataPlane(pipeline, **options)
    if impl == "native":
        from switch.native_dataplane import NativeDataPlane

        return NativeDataPlane(pipeline, **options)
    raise ValueError(f"unknown data-plane implementation {impl!r} (one of {IMPLEMENTATIONS})")


def load(pipeline: dict | Pipeline, entries: dict | None = None, impl: str = "native", **options: Any) -> DataPlane:
    """A data plane running `pipeline` (pipeline.json) holding `entries` (entries.json)."""
    dp = new(pipeline, impl, **options)
    if entries is not None:
        dp.load_entries(entries)
    return dp
