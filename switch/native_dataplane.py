"""The compiled data plane behind the `DataPlane` interface.

The hot path is the Rust extension `switch._native` (source in switch/native/, built by
`pip install -e .` through setuptools-rust). This module turns the validated pipeline into the
extension's plan (tables by index, fields by bit offset), forwards control hooks as integers,
and translates counters back into the shared dict shape. The interface's packed batch call
(`process_packed`: frames concatenated in one buffer, copies returned in one buffer) is one
call into the extension here; beyond the interface it offers `classify_packed`, the table
walk alone, for the benchmark.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

from pipeline.entries import Entry
from pipeline.model import Field, Pipeline, PipelineError
from switch.dataplane import DROP_REASONS, DataPlane, Output
from switch.native_switch import load as load_native

ACTION_CODES = {"set_state": 1, "fwd": 2, "mcast": 3, "drop": 4, "set_udp_port": 5}


def _field(f: Field) -> dict:
    return {"bit_offset": f.bit_offset, "width": f.width}


def plan_for(pipeline: Pipeline, max_frame: int) -> tuple[dict, dict[str, int]]:
    """The extension's plan for `pipeline`, and the index it gives each table name."""
    names = list(pipeline.tables)
    index = {name: i for i, name in enumerate(names)}
    tables = []
    for name in names:
        info = pipeline.tables[name]
        # The native tables are named after the match kinds; "state" keys on the state alone.
        tables.append({"kind": info.match_kind or "state", "width": info.field.width if info.field else 0})
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
        }
        for app in pipeline.applications
    ]
    plan = {"max_frame": max_frame, "apps": apps, "tables": tables,
            "ipv4_table": index[pipeline.ipv4_table], "egress_table": index[pipeline.egress_table]}
    return plan, index


def pack(frames: Sequence[bytes]) -> tuple[bytes, bytes]:
    """Frames as the packed calls take them: one buffer and a u32 length per frame."""
    return b"".join(frames), struct.pack(f"<{len(frames)}I", *map(len, frames))


class _PortSets:
    """mcast bitmaps interned for the native switch: one index per distinct bitmap, shared
    by every entry carrying it, reused once no entry does."""

    def __init__(self, sw) -> None:
        self.sw = sw
        self.index: dict[int, int] = {}  # bitmap -> index
        self.refs: dict[int, int] = {}  # bitmap -> entries carrying it
        self.by_entry: dict[tuple, int] = {}  # entry key -> its bitmap
        self.free: list[int] = []

    def acquire(self, bits: int) -> int:
        i = self.index.get(bits)
        if i is None:
            i = self.free.pop() if self.free else len(self.index)
            self.index[bits] = i
            self.refs[bits] = 0
            words = [(bits >> s) & 0xFFFFFFFFFFFFFFFF for s in range(0, max(bits.bit_length(), 1), 64)]
            self.sw.set_port_set(i, words)
        self.refs[bits] += 1
        return i

    def release_entry(self, key: tuple) -> None:
        bits = self.by_entry.pop(key, None)
        if bits is None:
            return
        self.refs[bits] -= 1
        if not self.refs[bits]:
            del self.refs[bits]
            self.free.append(self.index.pop(bits))


class NativeDataPlane(DataPlane):
    """`switch.dataplane.DataPlane` on the compiled extension."""

    def __init__(self, pipeline, **options: Any):
        native = load_native()  # ImportError naming the fix when missing or stale
        super().__init__(pipeline, **options)
        stateful = [a.name for a in self.pipeline.applications if a.state]
        if stateful:  # the state stages (IR 4) run in the Python switch only, for now
            raise PipelineError(
                f"application(s) {', '.join(stateful)} have state (camus_ir 4), which the "
                f"native switch does not run yet: use the Python reference switch "
                f"(impl='python', camus switch --impl python)")
        acting = [a.name for a in self.pipeline.applications if a.uses_actions]
        if acting:  # IR 5 (docs/actions.md) runs in the Python switch only, for now
            raise PipelineError(
                f"application(s) {', '.join(acting)} declare actions beyond fwd, a default "
                f"action or DNS framing (camus_ir 5), which the native switch does not run "
                f"yet: use the Python reference switch (impl='python', camus switch --impl "
                f"python)")
        plan, self._index = plan_for(self.pipeline, self.max_frame)
        self._names = list(self._index)
        self._sw = native.Switch(json.dumps(plan))
        self._port_sets = _PortSets(self._sw)

    # ---- hooks ----

    def _install(self, e: Entry) -> None:
        # Every key arrives reduced to (state, a, b): see pipeline.entries.Entry. An mcast
        # entry's bitmap is too wide for the native action: it carries the bitmap's index.
        param = e.param
        if e.action == "mcast":
            param = self._port_sets.acquire(e.param)
        self._port_sets.release_entry(e.key)
        if e.action == "mcast":
            self._port_sets.by_entry[e.key] = e.param
        self._sw.install(self._index[e.table], e.state, e.a, e.b, e.priority, ACTION_CODES[e.action], param)

    def _uninstall(self, e: Entry) -> None:
        self._sw.uninstall(self._index[e.table], e.state, e.a, e.b, e.priority)
        self._port_sets.release_entry(e.key)

    def _install_group(self, group_id, replicas) -> None:
        self._sw.set_group(group_id, list(replicas))

    def _uninstall_group(self, group_id) -> None:
        self._sw.delete_group(group_id)

    # ---- data ----

    def process(self, packet: bytes, in_port: int, ts_us: int | None = None) -> Output:
        return self._sw.process(bytes(packet), in_port)  # no state here: no time to read

    def process_batch(self, packets: Sequence[bytes], in_port: int) -> list[Output]:
        buf, records = self.process_packed(*pack(packets), in_port)
        out: list[Output] = [[] for _ in packets]
        view = memoryview(buf)
        for i, port, off, n in struct.iter_unpack("<4I", records):
            out[i].append((port, bytes(view[off: off + n])))
        return out

    def process_packed(self, buf: bytes, lengths: bytes, in_port: int) -> tuple[bytes, bytes]:
        """Packed frames in; (copies buffer, per-copy records <input index, port, offset, length>)."""
        return self._sw.process_packed(buf, lengths, in_port)

    def classify_packed(self, buf: bytes, lengths: bytes, in_port: int) -> tuple[bytes, bytes]:
        """The table walk alone: (u64 leaf code per message block, u32 block count per frame;
        with several lanes, a code per block and lane, lane-major, and their count).

        A code is 0 when no rule selects the message, 1<<32 | port for fwd, 2<<32 | i for
        mcast, i the native index of its port bitmap. Frames that are dropped or carry no application report 0 blocks.
        """
        return self._sw.classify_packed(buf, lengths, in_port)

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
