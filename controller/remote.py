"""A target the broker reaches over the network: P4Runtime for control, UDP or veths for packets.

`RemoteTarget` drives any P4Runtime device whose ports the broker can reach: camus's own
`camus switch serve`, or bmv2's `simple_switch_grpc` (`controller.launch` starts either).
Control goes through the one P4Runtime layer (`controller.push`, `p4rt.entries`): `load`
pushes the pipeline and entries (diffing against what the device holds), `apply` writes an
entry diff. Packets go through `io`: `UdpIO` sends each frame as one UDP datagram to the
device's ingress binding and reads port N's copies from HOST:BASE+N (`camus switch serve
--egress-range`); `InterfaceIO` reads and writes the host ends of veth pairs (a device in a
network namespace, bmv2's way). Port N's socket is opened the first time N is owed a copy.

Theory of operation, loss and order. Between broker and device frames can be lost (a full
socket buffer, a device restarting) or reordered (one socket per port). The target keeps
an in-process shadow of what it wrote (`controller.embedded.EmbeddedTarget` holding the
same entries), so for every send it knows which copies, byte for byte, each port is owed:
per subscription, which (topic, partition, offset, fragment) must come back. A copy that
comes back is matched to the oldest send owed it; a send is reported once every copy it is
owed came back, or, once it is `loss_timeout` old and no owed copy at all has come back for
`loss_timeout` (a device still working through a burst is not losing it), with the missing
copies repaired from the shadow, which holds the records the broker sent, that is, the
source log (counted in `stats.repaired` and logged). Reports go out in send order whatever order copies
arrive in, so a consumer never misses a record because a packet was lost, and sees records
in offset order. A copy nobody is owed (a device running stale entries) is counted in
`stats.unexpected` and dropped.

Theory of operation, consistency after failures. A watchdog thread checks the device every
`check_interval`: a StreamChannel that ended, a failed call or a pipeline cookie that is
not ours (a restarted device holds no pipeline) makes it reconnect and push the pipeline
and every entry; every `audit_interval` it reads all entries back and writes what differs
(an update the device acknowledged but does not hold, or lost). While the device is away,
`apply` records the desired state and leaves the writing to the watchdog; sends are
repaired as above. `stats.restores` counts pipeline reinstalls, `stats.rewrites` the
updates that read-back found missing or wrong.
"""

from __future__ import annotations

import asyncio
import logging
import selectors
import socket
import struct
import subprocess
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from controller.diff import Changes, patch
from controller.embedded import REBUILD_AT, EmbeddedTarget
from controller.p4runtime_client import DEFAULT_BATCH, ArbitrationError, P4RuntimeClient, WriteError
from controller.push import TargetConfig, push, read_state, reset_updates
from controller.target import INGRESS_PORT, LOCAL_INGRESS, Emitted, Target, TargetError, TargetUnavailable
from p4rt.entries import entry_dict, group_dict, multicast_entry, table_entry
from p4rt.entry_key import entry_key
from p4rt.index import P4InfoIndex
from p4rt.p4info import build_p4info
from p4rt.protos import code_pb2, p4runtime_pb2
from pipeline import document
from pipeline.model import Pipeline
from switch.ports import grow_receive_buffer

log = logging.getLogger("camus.remote")
Update = p4runtime_pb2.Update
DOWN = (grpc.RpcError, ArbitrationError, grpc.FutureTimeoutError, OSError)
MAX_DATAGRAM = 65535
CALL_SECONDS = 30.0  # how long one P4Runtime call may take before the device counts as gone
AUDIT_SHARE = 10  # an audit starts at least this many times its own duration after the last


@dataclass
class RemoteStats:
    sent: int = 0  # frames sent to the device
    received: int = 0  # copies that came back and were owed
    repaired: int = 0  # owed copies that did not come back in time, taken from the shadow
    unexpected: int = 0  # copies nobody was owed (stale entries on the device), dropped
    restores: int = 0  # times the pipeline and every entry were reinstalled
    rewrites: int = 0  # updates read-back found missing or wrong, and wrote again
    last_restore_seconds: float | None = None  # device reachable again -> everything written
    ports_unbound: list[int] = field(default_factory=list)  # BASE+N in use by someone else


@dataclass(eq=False)
class _Pending:
    token: Any
    emitted: Emitted
    owed: Counter  # (port, copy bytes) -> copies still to come back
    left: int
    deadline: float
    loop: asyncio.AbstractEventLoop | None
    done: threading.Event = field(default_factory=threading.Event)


class UdpIO:
    """Frames as UDP payloads: to the device's ingress socket; port N's copies to
    HOST:BASE+N (`camus switch serve --egress-range udp:HOST:BASE`)."""

    def __init__(self, ingress: tuple[str, int], host: str, base: int) -> None:
        self.ingress, self.host, self.base = ingress, host, base
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self, frame: bytes) -> None:
        self.tx.sendto(frame, self.ingress)

    def listen(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((self.host, self.base + port))
        except OSError:
            sock.close()
            raise
        return sock

    @staticmethod
    def recv(sock: socket.socket) -> bytes | None:
        return sock.recv(MAX_DATAGRAM)

    def where(self, port: int) -> str:
        return f"{self.host}:{self.base + port}"

    def close(self) -> None:
        self.tx.close()


class InterfaceIO:
    """Frames on Linux interfaces (AF_PACKET): into port 0's, port N's copies from
    `ifname(N)`, e.g. the host ends of veth pairs whose other ends a device in a network
    namespace owns (`controller.launch`)."""

    ETH_P_ALL, PACKET_OUTGOING = 0x0003, 4

    def __init__(self, ifname: Callable[[int], str], ports: int) -> None:
        self.ifname, self.ports = ifname, ports
        self.tx = self._raw(ifname(0))

    def _raw(self, name: str) -> socket.socket:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(self.ETH_P_ALL))
        try:
            sock.bind((name, 0))
        except OSError:
            sock.close()
            raise
        return sock

    def send(self, frame: bytes) -> None:
        self.tx.send(frame)

    def listen(self, port: int) -> socket.socket:
        if not 0 < port < self.ports:
            raise OSError(f"the device has ports 0..{self.ports - 1}")
        return self._raw(self.ifname(port))

    def recv(self, sock: socket.socket) -> bytes | None:
        data, addr = sock.recvfrom(MAX_DATAGRAM)
        if addr[2] == self.PACKET_OUTGOING:
            return None  # our own frames, seen leaving
        # The kernel's own frames on a fresh link (IPv6 neighbour discovery, ARP) are not
        # the device's copies: those are all IPv4.
        return data if data[12:14] == b"\x08\x00" else None

    def where(self, port: int) -> str:
        return f"interface {self.ifname(port)}"

    def close(self) -> None:
        self.tx.close()


def software_switch_config(pipeline) -> TargetConfig:
    """camus's switch: P4Info from the IR (a `pipeline.model.Pipeline`), the device config
    the IR itself (pipeline.json)."""
    return TargetConfig(build_p4info(pipeline, counters=True), document.dumps(pipeline).encode())


class RemoteTarget(Target):
    """A P4Runtime device at `address`, its packets through `io` (`UdpIO`, `InterfaceIO`).
    `config(pipeline)` gives the device's config (default: camus's switch); the device holds
    entries.json as it is, which is all a P4 program needs since decisions carry port bitmaps."""

    def __init__(self, address: str, io, *, device_id: int = 1, election_id: int = 10,
                 config: Callable[[dict], TargetConfig] = software_switch_config,
                 loss_timeout: float = 0.5, check_interval: float = 0.05,
                 audit_interval: float = 1.0, on_down: Callable[[], None] | None = None,
                 batch: int = DEFAULT_BATCH) -> None:
        super().__init__()
        self.batch = batch  # updates per WriteRequest at most (`P4RuntimeClient.write_steps`)
        self.address, self.io = address, io
        self.device_id, self.election_id = device_id, election_id
        self._config_of = config
        self.loss_timeout, self.check_interval, self.audit_interval = loss_timeout, check_interval, audit_interval
        self.on_down = on_down  # called by the watchdog when the device is unreachable
        self.stats = RemoteStats()
        self.shadow = EmbeddedTarget("native")
        self.shadow.set_receiver(self._predicted)
        self._prediction: Emitted | None = None
        self.pipeline: dict | None = None
        self.config: TargetConfig | None = None
        self.index: P4InfoIndex | None = None
        self.desired: dict = {"table_entries": [], "multicast_groups": []}
        self._control = threading.RLock()  # the client and `desired`, between loop and watchdog
        self.client: P4RuntimeClient | None = None
        self._stale = False  # the device may not hold `desired`: the watchdog pushes it
        self._closed = threading.Event()
        # Packets: `io` sends; one socket per egress port in, one thread reading them.
        self._rx: dict[int, socket.socket] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._pending: deque[_Pending] = deque()
        self._lock = threading.Lock()  # _pending and the stats the I/O thread writes
        self._progress = 0.0  # when an owed copy last came back: the device is still at work
        self._io = threading.Thread(target=self._read_ports, name="camus-remote-io", daemon=True)
        self._io.start()
        self._watchdog: threading.Thread | None = None

    # --- control ----------------------------------------------------------------------

    def _connect(self) -> P4RuntimeClient:
        # A short wait to connect: the watchdog tries again every check_interval, so a device
        # that comes back is found within about that; calls then get the usual patience.
        client = P4RuntimeClient.primary(self.address, self.device_id, self.election_id, timeout=0.5)
        # A device that answers slowly (reading back 30,000 entries from camus's switch takes
        # seconds) is busy, not gone: a gone one ends the stream and refuses connections.
        client.timeout = CALL_SECONDS
        return client

    def _push_all(self) -> int:
        """Make the device hold the pipeline and `desired` (under `_control`); the updates written."""
        if self.client is None or self.client.stream_ended.is_set():
            if self.client is not None:
                self.client.close()
                self.client = None
            self.client = self._connect()
        model = None  # resets of state cells need the IR (controller.push)
        if self.desired.get("state_instances"):
            model = self.pipeline if isinstance(self.pipeline, Pipeline) else document.from_json(self.pipeline)
        report = push(self.client, self.config, self.desired, self.batch, pipeline=model)
        self._stale = False
        if report.pipeline_set:
            self.stats.restores += 1
        return report.updates

    def load(self, pipeline: dict, entries: dict) -> None:
        self.shadow.load(pipeline, entries)
        with self._control:
            if pipeline != self.pipeline:
                self.pipeline, self.config = pipeline, self._config_of(pipeline)
                self.index = P4InfoIndex(self.config.p4info)
            self.desired = entries
            try:
                self._push_all()
            except WriteError as exc:
                raise TargetError(f"{self.address}: {exc}") from exc
            except DOWN as exc:
                if self._watchdog is None:  # never reached: nothing to run on
                    why = (exc.details() if isinstance(exc, grpc.RpcError) else str(exc)) or "no answer"
                    raise TargetUnavailable(f"no P4Runtime device at {self.address}: {why}") from exc
                self._stale = True
                log.warning("%s unreachable; the watchdog reinstalls when it is back: %s",
                            self.address, exc)
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="camus-remote-watchdog",
                                              daemon=True)
            self._watchdog.start()

    def read_cells(self, register: str, first: int, count: int) -> list[tuple[int, int, int]]:
        """The shadow's cells: what the broker's deliveries are judged by (copies the device
        does not send as the shadow decides are repaired from it). P4Runtime's RegisterEntry
        reads are not wired up here."""
        return self.shadow.read_cells(register, first, count)

    def apply(self, changes: Changes) -> None:
        self.shadow.apply(changes)  # TargetError if refused: nothing is written to the device
        self._write(patch(self.desired, changes), changes)

    def _write(self, entries: dict, changes: Changes) -> None:
        """Make `entries` the desired state and write `changes` (from the old one) to the
        device; while it is away, leave everything to the watchdog."""
        with self._control:
            old, self.desired = self.desired, entries
            if self._stale or self.client is None:
                return  # the device is away: the watchdog writes everything when it is back
            had = {g["id"] for g in old.get("multicast_groups", ())}
            try:
                self.client.write_steps(self._updates(changes, had), self.batch)
            except WriteError as exc:
                if all(e.code == code_pb2.UNIMPLEMENTED and e.update.entity.HasField("register_entry")
                       for e in exc.errors):
                    # A server that cannot write registers (bmv2's P4Runtime server) took
                    # every entry of the change and refused only the zeroing of new rules'
                    # cells: the shadow zeroed them, the broker's deliveries follow it, and
                    # copies the device decides otherwise are repaired (docs/remote-target.md).
                    log.warning("%s cannot write register cells (%s): %d cells left to the "
                                "shadow", self.address, exc.errors[0].message, len(exc.errors))
                    return
                self._stale = True
                raise TargetError(f"{self.address}: {exc}") from exc
            except DOWN as exc:
                self._stale = True
                log.warning("%s: write failed (%s); the watchdog rewrites every entry", self.address, exc)

    def stage(self, pipeline, entries: dict, changes: Changes):
        """A large diff is written on the caller's (worker) thread: encoding and writing
        365,000 entries takes the device seconds, which must not be the event loop's. The
        device then holds the new entries before the commit, which only swaps the shadow in;
        copies of frames sent in between meet the new entries, and the data path judges
        them by the subscriptions of their send (at worst a copy is repaired or dropped as
        unexpected). A small diff is written by the commit (`apply`)."""
        if len(changes) < REBUILD_AT:
            return super().stage(pipeline, entries, changes)
        swap_shadow = self.shadow.stage(pipeline, entries, changes)  # TargetError if refused
        # `entries` may be a call that makes the document (an incremental compile's): the
        # desired state is the old one patched, as `apply` makes it.
        with self._control:
            desired = patch(self.desired, changes)
        self._write(desired, changes)
        return swap_shadow

    def _updates(self, changes: Changes, had_groups: set[int]) -> list[list]:
        """The writes of `changes`, one step per list in `Changes.steps()` order (a step's
        updates do not depend on each other, so each step may go in one WriteRequest)."""
        def group(gid: int, replicas) -> p4runtime_pb2.Entity:
            doc = {"id": gid, "replicas": [{"port": p, "rid": r} for p, r in replicas]}
            return p4runtime_pb2.Entity(packet_replication_engine_entry=multicast_entry(doc))

        def entry(e: dict) -> p4runtime_pb2.Entity:
            return p4runtime_pb2.Entity(table_entry=table_entry(self.index, e))

        steps: list[list] = []
        last = None
        for op, item in changes.steps():
            if op == "set_group":
                gid, replicas = item
                kind = Update.MODIFY if gid in had_groups else Update.INSERT
                update = Update(type=kind, entity=group(gid, replicas))
            elif op == "delete_group":
                update = Update(type=Update.DELETE, entity=group(item, ()))
            elif op == "reset_cells":  # IR 4: the cells a new rule takes over, zeroed
                if op != last:
                    steps.append([])
                    last = op
                steps[-1] += reset_updates(self.index, [item])
                continue
            else:
                kind = {"delete": Update.DELETE, "insert": Update.INSERT, "modify": Update.MODIFY}[op]
                update = Update(type=kind, entity=entry(item))
            if op != last:
                steps.append([])
                last = op
            steps[-1].append(update)
        return steps

    def entries(self) -> list[dict]:
        """What the device holds, read back over P4Runtime."""
        with self._control:
            if self.client is None:
                raise TargetError(f"{self.address}: not connected")
            held, _ = read_state(self.client, self.index)
        return list(held.values())

    def _differs(self, client: P4RuntimeClient, desired: dict) -> bool:
        """Whether the device holds other entries or groups than `desired` (compared in the
        canonical form the P4Runtime encoding gives both sides, as `push` compares them)."""
        index, doc = self.index, desired
        want = {}
        for e in doc.get("table_entries", ()):
            d = entry_dict(index, table_entry(index, e))
            want[entry_key(d)] = d
        have, groups = read_state(client, index)
        if have != want:
            return True
        return groups is not None and groups != {
            g["id"]: group_dict(multicast_entry(g)) for g in doc.get("multicast_groups", ())}

    def _runs_our_pipeline(self, client: P4RuntimeClient) -> bool:
        try:
            return client.get_pipeline("COOKIE_ONLY").cookie.cookie == self.config.cookie
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            return False  # e.g. FAILED_PRECONDITION: a restarted device with no pipeline

    def _watch(self) -> None:
        """Keep the device holding the pipeline and `desired` (see the module text)."""
        next_audit = time.monotonic() + self.audit_interval
        down_since: float | None = None
        while not self._closed.wait(self.check_interval):
            try:
                with self._control:
                    client, desired = self.client, self.desired
                    broken = (client is None or self._stale or client.stream_ended.is_set()
                              or not self._runs_our_pipeline(client))
                audit = time.monotonic() >= next_audit
                if not broken and not audit:
                    continue
                began = time.monotonic()
                # An audit reads back without the lock (the event loop's writes do not wait
                # for it) and takes the lock only to repair what differs.
                if broken or self._differs(client, desired):
                    with self._control:
                        written = self._push_all()
                else:
                    written = 0
                took = time.monotonic() - began
                if broken:
                    self.stats.last_restore_seconds = time.monotonic() - began
                    log.warning("%s: reinstalled the pipeline and %d entries in %.3f s", self.address,
                                len(self.desired.get("table_entries", ())), self.stats.last_restore_seconds)
                elif written:
                    self.stats.rewrites += written
                    log.warning("%s: read-back found %d update(s) missing or wrong; rewritten",
                                self.address, written)
                # Reading everything back costs the device time in proportion to the entries:
                # spread audits so that they take at most 1/AUDIT_SHARE of it.
                next_audit = time.monotonic() + max(self.audit_interval, AUDIT_SHARE * took)
                down_since = None
            except DOWN as exc:
                with self._control:
                    self._stale = True
                    if self.client is not None:
                        self.client.close()
                        self.client = None
                if down_since is None:
                    down_since = time.monotonic()
                    log.warning("%s: device unreachable (%s); retrying", self.address,
                                getattr(exc, "details", lambda: exc)() if isinstance(exc, grpc.RpcError) else exc)
                # Every time, not only the first: a killed process may not have exited yet
                # when the device is first found unreachable.
                if self.on_down is not None:
                    self.on_down()
            except WriteError as exc:
                log.error("%s: the device refused the desired state: %s", self.address, exc)
                next_audit = time.monotonic() + self.audit_interval
            except Exception:  # the watchdog must outlive any one surprise
                log.exception("%s: watchdog", self.address)

    # --- data -------------------------------------------------------------------------

    def _predicted(self, token, emitted: Emitted) -> None:
        self._prediction = emitted

    def _port_socket(self, port: int) -> bool:
        if port in self._rx:
            return True
        try:
            sock = self.io.listen(port)
        except OSError as exc:
            if port not in self.stats.ports_unbound:
                self.stats.ports_unbound.append(port)
                log.error("port %d: cannot listen on %s (%s); its copies are repaired from the "
                          "source after %.1f s each", port, self.io.where(port), exc, self.loss_timeout)
            return False
        grow_receive_buffer(sock)
        sock.setblocking(False)
        self._rx[port] = sock
        self._selector.register(sock, selectors.EVENT_READ, port)
        return True

    def send(self, ingress_port: int, buf: bytes, lengths: bytes, token: Any) -> None:
        # Every frame enters the device on its ingress binding (port 0): LOCAL_INGRESS (a new
        # view's replay) only matters to a fabric, and the Kafka program does not read the
        # ingress port, so the shadow, given the port as sent, predicts the same copies.
        if ingress_port not in (INGRESS_PORT, LOCAL_INGRESS):
            raise ValueError(f"a remote target takes frames on port {INGRESS_PORT} or {LOCAL_INGRESS}")
        self.shadow.send(ingress_port, buf, lengths, token)
        emitted, self._prediction = self._prediction, None
        owed: Counter = Counter()
        view = memoryview(emitted.buf)
        for _, port, off, n in struct.iter_unpack("<4I", emitted.copies):
            self._port_socket(port)
            owed[(port, bytes(view[off:off + n]))] += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        left = sum(owed.values())
        pending = _Pending(token, emitted, owed, left, time.monotonic() + self.loss_timeout, loop)
        with self._lock:
            # Nothing owed and nothing before it: reported without waiting for the device, but
            # still behind every report the I/O thread has handed to the loop (they are in the
            # loop's queue already: `_report_ready` hands them over under this lock).
            inline = left == 0 and not self._pending
            if inline and loop is not None:
                loop.call_soon(self.receiver, token, emitted)
            elif not inline:
                self._pending.append(pending)
        at = 0
        for n in struct.unpack(f"<{len(lengths) // 4}I", lengths):
            try:
                self.io.send(buf[at:at + n])
            except OSError:
                pass  # lost before it left: repaired like any loss
            at += n
        self.stats.sent += len(lengths) // 4
        if inline:
            if loop is None:
                self.receiver(token, emitted)
            return
        self._wake_w.send(b"x")
        if loop is None:  # a caller without an event loop waits for its report here
            pending.done.wait()
            self.receiver(token, emitted)

    def _read_ports(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                head = (max(self._pending[0].deadline, self._progress + self.loss_timeout)
                        if self._pending else None)
            wait = 0.2 if head is None else max(0.0, min(0.2, head - time.monotonic()))
            for key, _ in self._selector.select(wait):
                if key.data is None:
                    try:
                        self._wake_r.recv(4096)
                    except OSError:
                        pass
                    continue
                self._drain(key.fileobj, key.data)
            self._report_ready()

    def _drain(self, sock: socket.socket, port: int) -> None:
        while True:
            try:
                copy = self.io.recv(sock)
            except OSError:  # BlockingIOError: drained
                return
            if copy is None:
                continue
            key = (port, copy)
            with self._lock:
                for p in self._pending:
                    if p.owed.get(key):
                        p.owed[key] -= 1
                        p.left -= 1
                        self.stats.received += 1
                        self._progress = time.monotonic()
                        break
                else:
                    self.stats.unexpected += 1

    def _report_ready(self) -> None:
        """Hand over, in send order, every send whose copies are all back or overdue."""
        now = time.monotonic()
        with self._lock:
            # Overdue: nothing owed came back for loss_timeout, and the send is that old. A
            # device working through a burst keeps every send behind it waiting.
            quiet = now - self._progress >= self.loss_timeout
            while self._pending and (self._pending[0].left == 0
                                     or (self._pending[0].deadline <= now and quiet)):
                p = self._pending.popleft()
                if p.left:
                    self.stats.repaired += p.left
                    log.warning("%d cop%s lost between broker and device: repaired from the source",
                                p.left, "y" if p.left == 1 else "ies")
                if p.loop is None:
                    p.done.set()
                    continue
                try:
                    p.loop.call_soon_threadsafe(self.receiver, p.token, p.emitted)
                except RuntimeError:
                    pass  # the loop closed: nobody waits for this report any more

    def close(self) -> None:
        self._closed.set()
        self._wake_w.send(b"x")
        self._io.join(2)
        if self._watchdog is not None:
            self._watchdog.join(2)
        with self._control:
            if self.client is not None:
                self.client.close()
                self.client = None
        for sock in (*self._rx.values(), self._wake_r, self._wake_w):
            sock.close()
        self.io.close()
        self._selector.close()


class LaunchedTarget(RemoteTarget):
    """A `RemoteTarget` on a device this process started (`controller.launch`), stopped by
    `close`; `restart()` starts it again on the same addresses (after a crash)."""

    def __init__(self, device, io, **kwargs) -> None:
        self.device = device
        super().__init__(device.p4runtime, io, on_down=self._restart_if_dead, **kwargs)

    def _restart_if_dead(self) -> None:
        if self.device.exited():
            log.warning("the device process exited; starting it again")
            try:
                self.device.start()
            except (OSError, TargetUnavailable, subprocess.SubprocessError) as exc:
                log.error("cannot restart the device: %s", exc)

    def close(self) -> None:
        super().close()
        self.device.stop()
