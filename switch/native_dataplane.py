"""The compiled data plane behind the `DataPlane` interface.

The hot path is the Rust extension `switch._native` (source in switch/native/, built by
`pip install -e .` through setuptools-rust). This module turns the validated pipeline into the
extension's plan (tables by index, fields by bit offset), forwards control hooks as integers,
and translates counters back into the shared dict shape. The interface's packed batch call
(`process_packed`: frames concatenated in one buffer, copies returned in one buffer) is one
call into the extension here; beyond the interface it offers `classify_packed`, the table
walk alone, for the benchmark.

State (IR 4, docs/pipeline-ir.md "State"): the plan carries each application's declared
states (kind, window, key and averaged fields by bit offset, buckets), their bind tables and
register arrays by index, and the decide table; bind and decide entries go to the extension
through their own calls (their actions carry several parameters), and a decide entry's port
bitmap is interned like an mcast's; contexts are interned too (a small index per distinct ctx,
so the extension finds a context's data by indexing). Data calls take each frame's time in
µs; without one the extension stamps frames with the real-time clock (µs since the epoch).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

from pipeline.entries import Entry
from pipeline.interpreter import pack_cell, unpack_cell
from pipeline.model import BIND, DECIDE, Application, Field, Pipeline, PipelineError
from switch.dataplane import DROP_REASONS, DataPlane, Output
from switch.native_switch import load as load_native

ACTION_CODES = {"set_state": 1, "fwd": 2, "mcast": 3, "drop": 4, "set_udp_port": 5, "stateful": 6}


def _field(f: Field) -> dict:
    return {"bit_offset": f.bit_offset, "width": f.width}


def _words(value: int) -> list[int]:
    """An integer as 64-bit words, low first (at least one)."""
    return [(value >> s) & 0xFFFFFFFFFFFFFFFF for s in range(0, max(value.bit_length(), 1), 64)]


def registers_of(pipeline: Pipeline) -> dict[str, int]:
    """The extension's index of every register array, by name (states in order, banks in order)."""
    names = [r for app in pipeline.applications if app.state
             for var in app.state.vars for r in var.registers]
    return {name: i for i, name in enumerate(names)}


def _state_plan(app: Application, index: dict[str, int], registers: dict[str, int]) -> dict | None:
    st = app.state
    if st is None:
        return None
    ts = st.timestamp
    return {
        "time": None if ts is None else {"field": _field(ts.field), "unit": ts.unit},
        "vars": [{"kind": f"meter_{v.unit}" if v.kind == "meter" else v.kind,
                  "field": _field(v.field) if v.field else None,
                  "key": _field(v.key) if v.key else None,
                  "window_us": v.window_us, "buckets": v.buckets,
                  "bind_tables": [index[t] for t in v.bind_tables],
                  "registers": [registers[r] for r in v.registers]} for v in st.vars],
        "decide_table": index[st.decide_table],
    }


def plan_for(pipeline: Pipeline, max_frame: int) -> tuple[dict, dict[str, int]]:
    """The extension's plan for `pipeline`, and the index it gives each table name."""
    names = list(pipeline.tables)
    index = {name: i for i, name in enumerate(names)}
    tables = []
    for name in names:
        info = pipeline.tables[name]
        # The native tables are named after the match kinds; "state" keys on the state alone;
        # bind and decide tables hold their entries in the application's state machine.
        kind = info.role if info.role in (BIND, DECIDE) else info.match_kind or "state"
        tables.append({"kind": kind, "width": info.field.width if info.field else 0})
    registers = registers_of(pipeline)
    apps = [
        {
            "udp_port": app.udp_port,
            "moldudp64": app.framing == "moldudp64",
            "message_bytes": app.message_bytes,
            "type_field": _field(app.type_field) if app.type_field else None,
            "types": sorted(app.types),
            "lanes": [{"stages": [{"field": _field(s.field), "table": index[s.table],
                                   "default_table": index[s.default_table]} for s in lane.stages],
                       "leaf_table": index[lane.leaf_table]} for lane in app.all_lanes],
            "multicast_group": app.multicast_group,
            "state": _state_plan(app, index, registers),
        }
        for app in pipeline.applications
    ]
    cells = {r: (v.slots, v.kind == "average") for app in pipeline.applications if app.state
             for v in app.state.vars for r in v.registers}
    plan = {"max_frame": max_frame, "apps": apps, "tables": tables,
            "ipv4_table": index[pipeline.ipv4_table], "egress_table": index[pipeline.egress_table],
            "registers": [{"slots": cells[r][0], "average": cells[r][1]} for r in registers]}
    return plan, index


def pack(frames: Sequence[bytes]) -> tuple[bytes, bytes]:
    """Frames as the packed calls take them: one buffer and a u32 length per frame."""
    return b"".join(frames), struct.pack(f"<{len(frames)}I", *map(len, frames))


def pack_times(ts_us: Sequence[int] | None) -> bytes | None:
    """Per-frame timestamps (µs) as the packed calls take them: a u64 per frame."""
    return None if ts_us is None else struct.pack(f"<{len(ts_us)}Q", *ts_us)


class _Interned:
    """Values the native switch refers to by a small index: mcast port bitmaps (too wide for
    a native action's parameter) and contexts (so that the state stages find a context's
    data by indexing an array, not by hashing its 24-bit id). One index per distinct value,
    shared by every entry holding it, reused once no entry does; `publish(index, value)`
    tells the extension when an index takes a new value."""

    def __init__(self, publish=None) -> None:
        self.publish = publish
        self.index: dict[int, int] = {}  # value -> index
        self.refs: dict[int, int] = {}  # value -> entries holding it
        self.by_entry: dict[tuple, int] = {}  # entry key -> its value
        self.free: list[int] = []

    def hold(self, key: tuple, value: int) -> int:
        """The index of `value`, now held by entry `key` (instead of what it held before)."""
        i = self.index.get(value)
        if i is None:
            i = self.free.pop() if self.free else len(self.index)
            self.index[value] = i
            self.refs[value] = 0
            if self.publish is not None:
                self.publish(i, value)
        self.refs[value] += 1
        self.release_entry(key)
        self.by_entry[key] = value
        return i

    def release_entry(self, key: tuple) -> None:
        value = self.by_entry.pop(key, None)
        if value is None:
            return
        self.refs[value] -= 1
        if not self.refs[value]:
            del self.refs[value]
            self.free.append(self.index.pop(value))


class NativeDataPlane(DataPlane):
    """`switch.dataplane.DataPlane` on the compiled extension."""

    def __init__(self, pipeline, **options: Any):
        native = load_native()  # ImportError naming the fix when missing or stale
        super().__init__(pipeline, **options)
        acting = [a.name for a in self.pipeline.applications if a.uses_actions]
        if acting:  # IR 5 (docs/actions.md) runs in the Python switch only, for now
            raise PipelineError(
                f"application(s) {', '.join(acting)} declare actions beyond fwd, a default "
                f"action or DNS framing (camus_ir 5), which the native switch does not run "
                f"yet: use the Python reference switch (impl='python', camus switch --impl "
                f"python)")
        plan, self._index = plan_for(self.pipeline, self.max_frame)
        self._names = list(self._index)
        self._registers = registers_of(self.pipeline)
        self._sw = native.Switch(json.dumps(plan))
        self._port_sets = _Interned(lambda i, bits: self._sw.set_port_set(i, _words(bits)))
        self._contexts = _Interned()

    # ---- hooks ----

    def _install(self, e: Entry) -> None:
        # Every key arrives reduced to (state, a, b): see pipeline.entries.Entry. An mcast
        # entry's bitmap is too wide for the native action: it carries the bitmap's index;
        # contexts (stateful(ctx), and the key of bind and decide entries) go by their index.
        table = self._index[e.table]
        if e.role == BIND:
            base, scoped, bounds, strict, *thresholds = e.params
            ctx = self._contexts.hold(e.key, e.state)
            self._sw.install_bind(table, ctx, base, bool(scoped), bounds, strict, thresholds)
            return
        if e.role == DECIDE:
            ports, update = e.params
            ctx = self._contexts.hold(e.key, e.state)
            if ports:
                index = self._port_sets.hold(e.key, ports)
            else:  # a decision with no port (updates only) needs no bitmap
                index = None
                self._port_sets.release_entry(e.key)
            self._sw.install_decide(table, ctx, _words(e.a), index, _words(update))
            return
        param = e.param
        if e.action == "mcast":
            param = self._port_sets.hold(e.key, e.param)
        else:
            self._port_sets.release_entry(e.key)
        if e.action == "stateful":
            param = self._contexts.hold(e.key, e.param)
        else:
            self._contexts.release_entry(e.key)
        self._sw.install(table, e.state, e.a, e.b, e.priority, ACTION_CODES[e.action], param)

    def _uninstall(self, e: Entry) -> None:
        table = self._index[e.table]
        if e.role == BIND:
            self._sw.uninstall_bind(table, self._contexts.index[e.state])
        elif e.role == DECIDE:
            self._sw.uninstall_decide(table, self._contexts.index[e.state], _words(e.a))
        else:
            self._sw.uninstall(table, e.state, e.a, e.b, e.priority)
        self._port_sets.release_entry(e.key)
        self._contexts.release_entry(e.key)

    def _install_group(self, group_id, replicas) -> None:
        self._sw.set_group(group_id, list(replicas))

    def _uninstall_group(self, group_id) -> None:
        self._sw.delete_group(group_id)

    # ---- data ----

    def process(self, packet: bytes, in_port: int, ts_us: int | None = None) -> Output:
        return self._sw.process(bytes(packet), in_port, ts_us)

    def process_batch(self, packets: Sequence[bytes], in_port: int,
                      ts_us: Sequence[int] | None = None) -> list[Output]:
        buf, records = self.process_packed(*pack(packets), in_port, ts_us)
        out: list[Output] = [[] for _ in packets]
        view = memoryview(buf)
        for i, port, off, n in struct.iter_unpack("<4I", records):
            out[i].append((port, bytes(view[off: off + n])))
        return out

    def process_packed(self, buf: bytes, lengths: bytes, in_port: int,
                       ts_us: Sequence[int] | bytes | None = None) -> tuple[bytes, bytes]:
        """Packed frames in; (copies buffer, per-copy records <input index, port, offset, length>).
        `ts_us`: each frame's time in µs (a sequence, or already packed as u64 LE)."""
        return self._sw.process_packed(buf, lengths, in_port, _times(ts_us))

    def classify_packed(self, buf: bytes, lengths: bytes, in_port: int,
                        ts_us: Sequence[int] | bytes | None = None) -> tuple[bytes, bytes]:
        """The table walk alone: (u64 leaf code per message block, u32 block count per frame;
        with several lanes, a code per block and lane, lane-major, and their count).

        A code is 0 when no rule selects the message, 1<<32 | port for fwd, 2<<32 | i for
        mcast, i the native index of its port bitmap. Frames that are dropped or carry no application report 0 blocks.
        With state, the state stages run as in `process_packed` (registers change), and a
        stateful message's code is its decision's (2<<32 | i, or 0).
        """
        return self._sw.classify_packed(buf, lengths, in_port, _times(ts_us))

    # ---- registers (IR 4) ----

    def _reset_cells(self, register: str, first: int, count: int) -> None:
        self._sw.reset_cells(self._registers[register], first, count)

    def _read_cell(self, register: str, index: int) -> int:
        (tag, n, s), = self._sw.read_cells(self._registers[register], index, 1)
        return pack_cell(self.register_var(register), tag, n, s)

    def _write_cell(self, register: str, index: int, cell: int) -> None:
        tag, n, s = unpack_cell(self.register_var(register), cell)
        self._sw.write_cell(self._registers[register], index, tag, n, s)

    # ---- counters ----

    def counters(self) -> dict[str, Any]:
        hits, misses, ports, drops = self._sw.counters()
        return {
            "tables": {name: {"hits": hits[i], "misses": misses[i]} for i, name in enumerate(self._names)},
            "ports": {p: {"rx_packets": rx, "tx_packets": tx} for p, (rx, tx) in sorted(ports.items())},
            "drops": dict(zip(DROP_REASONS, drops)),
        }

    def reset_counters(self) -> None:
        self._sw.reset_counters()


def _times(ts_us: Sequence[int] | bytes | None) -> bytes | None:
    return ts_us if ts_us is None or isinstance(ts_us, bytes) else pack_times(ts_us)
