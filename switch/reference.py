"""The pure-Python data plane: docs/pipeline-ir.md's semantics written out plainly.

This is the executable definition the native fast path is tested against, so it favours
being obviously right over being fast. A frame is checked (size, Ethernet, IPv4, UDP),
dispatched by UDP destination port to an application, split into messages (single or
MoldUDP64 framing), and each subscription message walks the stages from state 0 until a
stage entry decides or the leaf table does (the walk and the lookups are
`pipeline.interpreter`'s, the one Python table interpreter, which `camus eval` runs too); the
decision names a port (replica (port, 0)) or a port bitmap (the replicas of the application's
multicast group whose port's bit is set: egress pruning, decided per copy). Each
replica selected by at least one message gets one copy holding exactly its messages
(MoldUDP64: pruned as the IR says), with its UDP destination port rewritten by the egress
table. Frames that are not subscription traffic, or whose messages no rule selected, are
forwarded unchanged by IPv4 longest-prefix match. Bad frames are dropped and counted by
reason; no input raises.

State (IR 4): a message whose walk decides `stateful(ctx)` runs the state stages
(`pipeline.interpreter.Tables.process`) at the frame's time (`ts_us`, or this switch's clock:
microseconds since it was made, as bmv2's ingress timestamp) with its length (the MoldUDP64
block's, or the UDP payload's for single framing); the messages of one frame in order.
"""

from __future__ import annotations

import struct
import time
from collections import Counter, defaultdict
from typing import Any

from pipeline.entries import Entry
from pipeline.interpreter import Tables, default_result, verdict_of
from pipeline.model import Application, Field
from switch import actions
from switch.dataplane import DROP_REASONS, DataPlane, Output
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


class _CountingTables(Tables):
    """The pipeline's tables, counting hits and misses per table lookup."""

    def __init__(self, pipeline) -> None:
        super().__init__(pipeline)
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()

    def lookup(self, table: str, state: int, value: int = 0):
        hit = self.tables[table].lookup(state, value)
        if hit is None:
            self.misses[table] += 1
        else:
            self.hits[table] += 1
        return hit


def extract(message: bytes, field: Field) -> int:
    """The unsigned big-endian value of `field` in `message` (which is long enough)."""
    first = field.bit_offset // 8
    end = (field.bit_offset + field.width + 7) // 8
    raw = int.from_bytes(message[first:end], "big")
    return (raw >> (end * 8 - field.bit_offset - field.width)) & ((1 << field.width) - 1)


class ReferenceDataPlane(DataPlane):
    """The pure-Python implementation of `switch.dataplane.DataPlane`."""

    def __init__(self, pipeline, **options: Any):
        super().__init__(pipeline, **options)
        for app in self.pipeline.applications:
            actions.check(app)  # an action this switch cannot run: refused now
        self._tables = _CountingTables(self.pipeline)
        self._started = time.monotonic_ns()
        self.reset_counters()

    # ---- hooks ----

    def _install(self, entry: Entry) -> None:
        self._tables.install(entry)

    def _uninstall(self, entry: Entry) -> None:
        self._tables.uninstall(entry)

    def _install_group(self, group_id, replicas) -> None:
        self._tables.groups[group_id] = replicas

    def _uninstall_group(self, group_id) -> None:
        del self._tables.groups[group_id]

    def _reset_cells(self, register: str, first: int, count: int) -> None:
        self._tables.reset_cells(register, first, count)

    def _read_cell(self, register: str, index: int) -> int:
        return self._tables.registers[register].get(index, 0)

    # ---- counters ----

    def reset_counters(self) -> None:
        self._tables.hits.clear()
        self._tables.misses.clear()
        self._rx: Counter[int] = Counter()
        self._tx: Counter[int] = Counter()
        self._drops: Counter[str] = Counter()

    def counters(self) -> dict[str, Any]:
        ports = sorted(set(self._rx) | set(self._tx))
        return {
            "tables": {t: {"hits": self._tables.hits[t], "misses": self._tables.misses[t]}
                       for t in self.pipeline.tables},
            "ports": {p: {"rx_packets": self._rx[p], "tx_packets": self._tx[p]} for p in ports},
            "drops": {r: self._drops[r] for r in DROP_REASONS},
        }

    # ---- packets ----

    def process(self, packet: bytes, in_port: int, ts_us: int | None = None) -> Output:
        packet = bytes(packet)
        if not 0 <= in_port <= 0xFFFFFFFF:  # ports are 32-bit: refused as the native one does
            raise OverflowError(f"ingress port {in_port} is not a 32-bit port number")
        if ts_us is None:
            ts_us = (time.monotonic_ns() - self._started) // 1000
        elif not isinstance(ts_us, int) or ts_us < 0:
            raise ValueError(f"a frame's time is a non-negative number of µs, not {ts_us!r}")
        self._ts_us = ts_us & ((1 << 48) - 1)
        self._in_port = in_port
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
                if copies is not None:
                    return copies
        return self._ipv4(frame)

    def _ipv4(self, frame: bytes) -> Output:
        dst, = struct.unpack_from("!I", frame, ETH_HEADER + 16)
        hit = self._tables.lookup(self.pipeline.ipv4_table, 0, dst)
        if hit is None or hit[0] == "drop":
            raise _Drop("no_route")
        return [(hit[1], frame)]

    def _messages(self, frame: bytes, app: Application, start: int, end: int) -> tuple[list[tuple[int, int]], int]:
        """The (offset, length) of every message block, and the MoldUDP64 sequence number."""
        if app.framing != "moldudp64":
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
        if app.state is not None:
            return self._tables.process(app, lambda f: extract(message, f), self._ts_us,
                                        len(message))
        return self._tables.replicas_of(app, self._tables.decisions(app, lambda f: extract(message, f)))

    def _decision(self, app: Application, message: bytes):
        """An IR 5 application's decision for one message (docs/actions.md): the walk's, or
        its default action when the walk decides nothing or the message is none its rules
        can match (too short, not of its types, a DNS query framing "dns" cannot read)."""
        if app.framing == "dns":
            message = actions.dns_message(message, app)
        if message is None or len(message) < app.message_bytes or (
                app.type_field is not None and extract(message, app.type_field) not in app.types):
            return None if app.default_action is None else default_result(app)
        return self._tables.decision(app, lambda f: extract(message, f))

    def _subscription(self, frame: bytes, app: Application, l4: int, start: int,
                      end: int) -> Output | None:
        """The copies (and, IR 5, the action's frames) a subscription frame makes; None when
        no message got anything: the frame then goes by IPv4 routing. (A frame whose
        messages were all dropped by a rule's `drop` gets [], and is not routed.)"""
        blocks, seq = self._messages(frame, app, start, end)
        chosen: dict[tuple[int, int], list[int]] = defaultdict(list)
        decided, verdicts = False, []
        for index, (off, n) in enumerate(blocks):
            if app.uses_actions:
                d = self._decision(app, frame[off: off + n])
                if d is None:
                    continue
                decided = True
                replicas = self._tables.replicas(app, d)
                if verdict_of(d) not in (None, ("drop", ())):
                    verdicts.append(d)
            else:
                replicas = self._replicas(app, frame[off: off + n])
            for replica in replicas:
                chosen[replica].append(index)
        out = []
        for port, rid in sorted(chosen):
            kept = chosen[(port, rid)]
            if app.framing != "moldudp64":
                payload = frame[start:end]
            else:
                first, last = kept[0], kept[-1]
                keep = set(kept)
                parts = [frame[start: start + 10], struct.pack("!QH", (seq + first) & SEQ_MASK, last - first + 1)]
                for i in range(first, last + 1):
                    off, n = blocks[i]
                    parts.append(frame[off - 2: off + n] if i in keep else b"\0\0")
                payload = b"".join(parts)
            rewrite = self._tables.lookup(self.pipeline.egress_table, port, rid)
            out.append((port, self._rebuild(frame, l4, payload, None if rewrite is None else rewrite[1])))
        for name, params in verdicts:  # after the copies: the action's frame (answerDNS's)
            args = params[1:] if isinstance(params, tuple) else ()
            reply = actions.ACTIONS[name][1](frame, l4, self._in_port, *args)
            if reply is not None:
                out.append((self._in_port, reply))
        return out if out or decided else None

    @staticmethod
    def _rebuild(frame: bytes, l4: int, payload: bytes, dst_port: int | None) -> bytes:
        """The frame's Ethernet and IPv4 headers around a new UDP payload, lengths and checksums fixed."""
        ip = bytearray(frame[ETH_HEADER:l4])
        struct.pack_into("!H", ip, 2, len(ip) + UDP_HEADER + len(payload))
        struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
        sport, dport = struct.unpack_from("!HH", frame, l4)
        udp = struct.pack("!HHHH", sport, dport if dst_port is None else dst_port, UDP_HEADER + len(payload), 0)
        return frame[:ETH_HEADER] + bytes(ip) + udp + payload
