"""The pure-Python data plane: docs/pipeline-ir.md's semantics written out plainly.

This is the executable definition the native fast path is tested against, so it favours
being obviously right over being fast. A frame is checked (size, Ethernet, IPv4, UDP),
dispatched by UDP destination port to an application, split into messages (single or
MoldUDP64 framing), and each subscription message walks the stages from state 0 until a
stage entry decides or the leaf table does; the decision names a port (replica (port, 0)) or a multicast group (its (port, rid) replicas). Each
replica selected by at least one message gets one copy holding exactly its messages
(MoldUDP64: pruned as the IR says), with its UDP destination port rewritten by the egress
table. Frames that are not subscription traffic, or whose messages no rule selected, are
forwarded unchanged by IPv4 longest-prefix match. Bad frames are dropped and counted by
reason; no input raises.
"""

from __future__ import annotations

import bisect
import struct
from collections import Counter, defaultdict
from typing import Any

from switch.dataplane import DROP_REASONS, DataPlane, Output
from switch.entries import Entry
from switch.ir import DEFAULT, EGRESS, IPV4, LEAF, STAGE, Application, FieldRef
from switch.packet import (
    ETH_HEADER,
    ETHERTYPE_IPV4,
    IPPROTO_UDP,
    MOLD_HEADER,
    MOLD_NO_BLOCKS,
    UDP_HEADER,
    ipv4_checksum,
)


SEQ_MASK = (1 << 64) - 1  # MoldUDP64 sequence numbers wrap rather than overflow


class _Drop(Exception):
    """Internal: abandon this frame and count it under `reason`."""

    def __init__(self, reason: str):
        self.reason = reason


# ---- table structures: each maps (state, value) to the action parameter, or None ----------


class _StateTable:
    """Keyed by the state alone (default and leaf tables); values are (action, param)."""

    def __init__(self) -> None:
        self.map: dict[int, tuple[str, int]] = {}

    def install(self, e: Entry) -> None:
        self.map[e.state] = (e.action, e.param)

    def uninstall(self, e: Entry) -> None:
        del self.map[e.state]

    def lookup(self, state: int, value: int = 0) -> tuple[str, int] | None:
        return self.map.get(state)


class _ExactTable:
    def __init__(self) -> None:
        self.map: dict[tuple[int, int], tuple[str, int]] = {}

    def install(self, e: Entry) -> None:
        self.map[(e.state, e.a)] = (e.action, e.param)

    def uninstall(self, e: Entry) -> None:
        del self.map[(e.state, e.a)]

    def lookup(self, state: int, value: int) -> tuple[str, int] | None:
        return self.map.get((state, value))


class _RangeTable:
    """Per state, disjoint inclusive intervals sorted by low end (overlaps are refused upstream)."""

    def __init__(self) -> None:
        self.by_state: dict[int, list[tuple[int, int, tuple[str, int]]]] = defaultdict(list)

    def install(self, e: Entry) -> None:
        spans = self.by_state[e.state]
        i = bisect.bisect_left(spans, (e.a, e.b))
        if i < len(spans) and spans[i][:2] == (e.a, e.b):
            spans[i] = (e.a, e.b, (e.action, e.param))
        else:
            spans.insert(i, (e.a, e.b, (e.action, e.param)))

    def uninstall(self, e: Entry) -> None:
        spans = self.by_state[e.state]
        del spans[bisect.bisect_left(spans, (e.a, e.b))]

    def lookup(self, state: int, value: int) -> tuple[str, int] | None:
        spans = self.by_state.get(state)
        if not spans:
            return None
        # The last interval starting at or below value is the only candidate.
        i = bisect.bisect_right(spans, (value, float("inf"))) - 1
        if i >= 0 and spans[i][0] <= value <= spans[i][1]:
            return spans[i][2]
        return None


class _LpmTable:
    def __init__(self, width: int) -> None:
        self.width = width
        self.by_state: dict[int, dict[int, dict[int, tuple[str, int]]]] = defaultdict(dict)

    def install(self, e: Entry) -> None:
        self.by_state[e.state].setdefault(e.b, {})[e.a] = (e.action, e.param)

    def uninstall(self, e: Entry) -> None:
        prefixes = self.by_state[e.state]
        del prefixes[e.b][e.a]
        if not prefixes[e.b]:
            del prefixes[e.b]

    def lookup(self, state: int, value: int) -> tuple[str, int] | None:
        prefixes = self.by_state.get(state, {})
        for plen in sorted(prefixes, reverse=True):
            mask = ((1 << plen) - 1) << (self.width - plen)
            hit = prefixes[plen].get(value & mask)
            if hit is not None:
                return hit
        return None


class _TernaryTable:
    """Highest priority wins; equal-priority overlaps are refused upstream."""

    def __init__(self) -> None:
        self.by_state: dict[int, dict[tuple[int, int, int], tuple[str, int]]] = defaultdict(dict)

    def install(self, e: Entry) -> None:
        self.by_state[e.state][(e.priority, e.a, e.b)] = (e.action, e.param)

    def uninstall(self, e: Entry) -> None:
        del self.by_state[e.state][(e.priority, e.a, e.b)]

    def lookup(self, state: int, value: int) -> tuple[str, int] | None:
        best = None
        for (prio, v, mask), result in self.by_state.get(state, {}).items():
            if value & mask == v and (best is None or prio > best[0]):
                best = (prio, result)
        return None if best is None else best[1]


def _new_table(role: str, kind: str | None, width: int):
    if role in (DEFAULT, LEAF):
        return _StateTable()
    if role == EGRESS or kind == "exact":
        return _ExactTable()
    if kind == "range":
        return _RangeTable()
    if kind == "lpm":
        return _LpmTable(width)
    return _TernaryTable()


def extract(message: bytes, field: FieldRef) -> int:
    """The unsigned big-endian value of `field` in `message` (which is long enough)."""
    first = field.bit_offset // 8
    end = (field.bit_offset + field.width + 7) // 8
    raw = int.from_bytes(message[first:end], "big")
    return (raw >> (end * 8 - field.bit_offset - field.width)) & ((1 << field.width) - 1)


class ReferenceDataPlane(DataPlane):
    """The pure-Python implementation of `switch.dataplane.DataPlane`."""

    def __init__(self, pipeline, **options: Any):
        super().__init__(pipeline, **options)
        self._tables = {
            name: _new_table(info.role, info.match_kind, info.field.width if info.field else 0)
            for name, info in self.pipeline.tables.items()
        }
        self._group_map: dict[int, tuple[tuple[int, int], ...]] = {}
        self.reset_counters()

    # ---- hooks ----

    def _install(self, entry: Entry) -> None:
        self._tables[entry.table].install(entry)

    def _uninstall(self, entry: Entry) -> None:
        self._tables[entry.table].uninstall(entry)

    def _install_group(self, group_id, replicas) -> None:
        self._group_map[group_id] = replicas

    def _uninstall_group(self, group_id) -> None:
        del self._group_map[group_id]

    # ---- counters ----

    def reset_counters(self) -> None:
        self._hits: Counter[str] = Counter()
        self._misses: Counter[str] = Counter()
        self._rx: Counter[int] = Counter()
        self._tx: Counter[int] = Counter()
        self._drops: Counter[str] = Counter()

    def counters(self) -> dict[str, Any]:
        ports = sorted(set(self._rx) | set(self._tx))
        return {
            "tables": {t: {"hits": self._hits[t], "misses": self._misses[t]} for t in self.pipeline.tables},
            "ports": {p: {"rx_packets": self._rx[p], "tx_packets": self._tx[p]} for p in ports},
            "drops": {r: self._drops[r] for r in DROP_REASONS},
        }

    def _lookup(self, table: str, state: int, value: int = 0):
        hit = self._tables[table].lookup(state, value)
        if hit is None:
            self._misses[table] += 1
        else:
            self._hits[table] += 1
        return hit

    # ---- packets ----

    def process(self, packet: bytes, in_port: int) -> Output:
        packet = bytes(packet)
        if not 0 <= in_port <= 0xFFFFFFFF:  # ports are 32-bit: refused as the native one does
            raise OverflowError(f"ingress port {in_port} is not a 32-bit port number")
        self._rx[in_port] += 1
        try:
            out = self._forward(packet)
        except _Drop as drop:
            self._drops[drop.reason] += 1
            return []
        for port, _ in out:
            self._tx[port] += 1
        return out

    def _forward(self, frame: bytes) -> Output:
        if len(frame) > self.max_frame:
            raise _Drop("oversized")
        if len(frame) < ETH_HEADER:
            raise _Drop("truncated")
        if struct.unpack_from("!H", frame, 12)[0] != ETHERTYPE_IPV4:
            raise _Drop("no_route")  # only IPv4 has a forwarding table here
        ip = ETH_HEADER
        if len(frame) < ip + 20:
            raise _Drop("truncated")
        if frame[ip] >> 4 != 4 or frame[ip] & 0x0F < 5:
            raise _Drop("malformed")
        ihl = (frame[ip] & 0x0F) * 4
        total, = struct.unpack_from("!H", frame, ip + 2)
        if total < ihl:
            raise _Drop("malformed")
        if len(frame) < ip + total:
            raise _Drop("truncated")
        ip_end = ip + total
        flags_frag, = struct.unpack_from("!H", frame, ip + 6)
        fragment = flags_frag & 0x3FFF != 0  # MF set or a non-zero offset: no whole UDP datagram
        if frame[ip + 9] == IPPROTO_UDP and not fragment:
            l4 = ip + ihl
            if l4 + UDP_HEADER > ip_end:
                raise _Drop("truncated")
            _, dport, ulen = struct.unpack_from("!HHH", frame, l4)
            if ulen < UDP_HEADER:
                raise _Drop("malformed")
            if l4 + ulen > ip_end:
                raise _Drop("truncated")
            app = self.pipeline.application_for_port(dport)
            if app is not None:
                copies = self._subscription(frame, app, l4, l4 + UDP_HEADER, l4 + ulen)
                if copies:
                    return copies
        return self._ipv4(frame)

    def _ipv4(self, frame: bytes) -> Output:
        dst, = struct.unpack_from("!I", frame, ETH_HEADER + 16)
        hit = self._lookup(self.pipeline.ipv4_table, 0, dst)
        if hit is None or hit[0] == "drop":
            raise _Drop("no_route")
        return [(hit[1], frame)]

    def _messages(self, frame: bytes, app: Application, start: int, end: int) -> tuple[list[tuple[int, int]], int]:
        """The (offset, length) of every message block, and the MoldUDP64 sequence number."""
        if app.framing == "single":
            return [(start, end - start)], 0
        if end - start < MOLD_HEADER:
            raise _Drop("truncated")
        seq, count = struct.unpack_from("!QH", frame, start + 10)
        blocks, pos = [], start + MOLD_HEADER
        for _ in range(0 if count in MOLD_NO_BLOCKS else count):
            if pos + 2 > end:
                raise _Drop("truncated")
            n, = struct.unpack_from("!H", frame, pos)
            if pos + 2 + n > end:
                raise _Drop("truncated")
            blocks.append((pos + 2, n))
            pos += 2 + n
        return blocks, seq

    def _replicas(self, app: Application, message: bytes) -> tuple[tuple[int, int], ...]:
        """The (port, rid) replicas that the tables select for one message."""
        if len(message) < app.message_bytes:
            return ()
        if app.type_field is not None and extract(message, app.type_field) not in app.types:
            return ()
        state, decision = 0, None
        for stage in app.stages:
            hit = self._lookup(stage.table, state, extract(message, stage.field))
            if hit is None:
                hit = self._lookup(stage.default_table, state)
            if hit is None:
                continue  # a miss in both keeps the state
            if hit[0] != "set_state":
                decision = hit  # fwd/mcast decide: later stages and the leaf are skipped
                break
            state = hit[1]
        if decision is None:
            decision = self._lookup(app.leaf_table, state)
        if decision is None:
            return ()
        action, param = decision
        if action == "fwd":
            return ((param, 0),)
        return self._group_map.get(param, ())

    def _subscription(self, frame: bytes, app: Application, l4: int, start: int, end: int) -> Output:
        blocks, seq = self._messages(frame, app, start, end)
        chosen: dict[tuple[int, int], list[int]] = defaultdict(list)
        for index, (off, n) in enumerate(blocks):
            for replica in self._replicas(app, frame[off: off + n]):
                chosen[replica].append(index)
        out = []
        for port, rid in sorted(chosen):
            kept = chosen[(port, rid)]
            if app.framing == "single":
                payload = frame[start:end]
            else:
                first, last = kept[0], kept[-1]
                keep = set(kept)
                parts = [frame[start: start + 10], struct.pack("!QH", (seq + first) & SEQ_MASK, last - first + 1)]
                for i in range(first, last + 1):
                    off, n = blocks[i]
                    parts.append(frame[off - 2: off + n] if i in keep else b"\0\0")
                payload = b"".join(parts)
            rewrite = self._lookup(self.pipeline.egress_table, port, rid)
            out.append((port, self._rebuild(frame, l4, payload, None if rewrite is None else rewrite[1])))
        return out

    @staticmethod
    def _rebuild(frame: bytes, l4: int, payload: bytes, dst_port: int | None) -> bytes:
        """The frame's Ethernet and IPv4 headers around a new UDP payload, lengths and checksums fixed."""
        ip = bytearray(frame[ETH_HEADER:l4])
        struct.pack_into("!H", ip, 2, len(ip) + UDP_HEADER + len(payload))
        struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
        sport, dport = struct.unpack_from("!HH", frame, l4)
        udp = struct.pack("!HHHH", sport, dport if dst_port is None else dst_port, UDP_HEADER + len(payload), 0)
        return frame[:ETH_HEADER] + bytes(ip) + udp + payload
