"""A P4Runtime server for the software switch (standard `p4.v1.P4Runtime` service over gRPC).

The device config of SetForwardingPipelineConfig is the pipeline IR (pipeline.json bytes);
the P4Info comes with the request and must name every IR table by the contract of
docs/pipeline-ir.md. Table and multicast group writes are decoded by name through that P4Info
(`p4rt.entries`) and applied to the `Device`'s data plane, so a controller
programs this switch exactly as it programs bmv2.

What follows the P4Runtime spec (v1.x):
* Arbitration (one device, the default role): every StreamChannel opens with a
  MasterArbitrationUpdate; the highest election id is primary. Each stream is told its status
  (OK for the primary, ALREADY_EXISTS for a backup, with the primary's election id) and is
  told again when the primary changes. Two streams may not hold the same election id
  (INVALID_ARGUMENT). Write and SetForwardingPipelineConfig need the primary's election id,
  otherwise PERMISSION_DENIED.
* Write applies updates in order (CONTINUE_ON_ERROR; other atomicities are UNIMPLEMENTED).
  If any update fails the RPC fails with UNKNOWN and its status details hold one `p4.v1.Error`
  per update, in order: OK, ALREADY_EXISTS (insert of an existing entry or group),
  NOT_FOUND (modify or delete of a missing one), INVALID_ARGUMENT (an id the P4Info does not
  have, a bad key or value, a missing or needless priority, an overlapping range), OUT_OF_RANGE (a value wider than its field), UNIMPLEMENTED (other
  entities, default entries).
* SetForwardingPipelineConfig supports VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT and COMMIT
  (a committed config starts with no entries and no groups, as on bmv2);
  RECONCILE_AND_COMMIT is UNIMPLEMENTED: controllers diff entries themselves
  (`controller.push`).
* Read streams the table entries (table id 0: every table; a match given: that entry),
  multicast groups (id 0: all) and counters.
* Registers (IR 4 state): a RegisterEntry names a register of the P4Info (one bank of a
  declared state, `bit<cell_width>` cells packed as docs/pipeline-ir.md says) and a cell;
  Write takes MODIFY only (registers exist with the program: INSERT and DELETE are
  INVALID_ARGUMENT), one cell, or every cell when the index is unset (how a controller zeroes
  a bank); Read returns the cells asked for (register id 0: every register; no index: every
  cell). A value wider than the cells is OUT_OF_RANGE.
* Counters are a documented extension: the software switch's P4Info (`p4rt.p4info.build_p4info(...,
  counters=True)`) declares `camus.port_rx` / `camus.port_tx` (index = port),
  `camus.drops` (index = reason, in `switch.dataplane.DROP_REASONS` order) and
  `camus.table.<T>` (index 0 hits, 1 misses) as indirect packet counters; a CounterEntry read
  (counter id 0: all; no index: every non-zero index) returns them. A P4Info without them
  simply has no counters to read.
"""

from __future__ import annotations

import importlib.metadata
import json
import queue
import threading
from concurrent import futures

import grpc
from google.protobuf import any_pb2

from p4rt.entries import entry_dict, group_dict, multicast_entry, table_entry
from p4rt.entry_key import entry_key
from p4rt.index import P4InfoIndex, UnknownName, ir_name
from p4rt.names import p4_table_name
from p4rt.protos import code_pb2, p4runtime_pb2, status_pb2
from p4rt.stubs import p4runtime_pb2_grpc
from p4rt.values import BadValue, decode, encode
from pipeline.document import from_json
from pipeline.entries import normalise_replicas
from pipeline.model import EntryError, PipelineError
from switch.dataplane import DROP_REASONS
from switch.device import Device, PipelineConfig

DEFAULT_ADDRESS = "127.0.0.1:9559"
Update = p4runtime_pb2.Update


class P4RuntimeError(Exception):
    """An error to answer with: a gRPC status code (google.rpc.Code number) and a message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _election(eid: p4runtime_pb2.Uint128) -> int:
    return (eid.high << 64) | eid.low


def _uint128(value: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


class Arbitration:
    """Streams and their election ids; the highest id is primary."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self.lock = threading.Lock()
        self.streams: dict[int, tuple[int, queue.Queue]] = {}  # stream -> (election id, outbox)

    def primary(self) -> int | None:
        with self.lock:
            return max((e for e, _ in self.streams.values()), default=None)

    def update(self, stream: int, election: int, outbox: queue.Queue) -> None:
        with self.lock:
            if any(e == election and s != stream for s, (e, _) in self.streams.items()):
                raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"election id {election} is already in use")
            before = max((e for e, _ in self.streams.values()), default=None)
            self.streams[stream] = (election, outbox)
            self._notify(before, stream)

    def remove(self, stream: int) -> None:
        with self.lock:
            before = max((e for e, _ in self.streams.values()), default=None)
            if self.streams.pop(stream, None) is not None:
                self._notify(before, None)

    def _notify(self, before: int | None, changed: int | None) -> None:
        """Tell the changed stream its status, and everyone if the primary changed."""
        primary = max((e for e, _ in self.streams.values()), default=None)
        for s, (e, outbox) in self.streams.items():
            if s == changed or primary != before:
                msg = p4runtime_pb2.StreamMessageResponse()
                arb = msg.arbitration
                arb.device_id = self.device_id
                arb.election_id.CopyFrom(_uint128(primary))
                arb.status.code = code_pb2.OK if e == primary else code_pb2.ALREADY_EXISTS
                arb.status.message = "primary" if e == primary else "backup"
                outbox.put(msg)


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, device: Device):
        self.device = device
        self.arbitration = Arbitration(device.device_id)
        self._saved: PipelineConfig | None = None  # VERIFY_AND_SAVE, waiting for COMMIT
        self._next_stream = 0
        self._stream_lock = threading.Lock()

    # ---- helpers ----

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device.device_id:
            raise P4RuntimeError(code_pb2.NOT_FOUND, f"no device {device_id} (this switch is {self.device.device_id})")

    def _check_primary(self, election_id) -> None:
        primary = self.arbitration.primary()
        if primary is None or _election(election_id) != primary:
            raise P4RuntimeError(code_pb2.PERMISSION_DENIED, "writer is not the primary client")

    def _index(self) -> P4InfoIndex:
        if self.device.config is None:
            raise P4RuntimeError(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config set")
        return self.device.index

    # ---- pipeline ----

    def SetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            self._check_primary(request.election_id)
            action = request.action
            A = p4runtime_pb2.SetForwardingPipelineConfigRequest
            if action in (A.VERIFY, A.VERIFY_AND_SAVE, A.VERIFY_AND_COMMIT):
                config = self._verify(request.config)
                if action == A.VERIFY_AND_SAVE:
                    self._saved = config
                elif action == A.VERIFY_AND_COMMIT:
                    self.device.install(config)
            elif action == A.COMMIT:
                if self._saved is None:
                    raise P4RuntimeError(code_pb2.FAILED_PRECONDITION, "COMMIT without a saved config")
                self.device.install(self._saved)
                self._saved = None
            else:
                raise P4RuntimeError(code_pb2.UNIMPLEMENTED, f"action {A.Action.Name(action)} is not supported")
        except P4RuntimeError as exc:
            _abort(context, exc)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _verify(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> PipelineConfig:
        try:
            pipeline = from_json(json.loads(config.p4_device_config))
        except (ValueError, PipelineError) as exc:
            raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"device config is not a pipeline IR: {exc}") from None
        index = P4InfoIndex(config.p4info)
        for name in pipeline.tables:
            try:
                index.table(p4_table_name(name, pipeline.egress_table))
            except UnknownName:
                raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"the P4Info has no table for IR table {name!r}") from None
        return PipelineConfig(pipeline, config.p4info, bytes(config.p4_device_config), config.cookie.cookie)

    def GetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            config = self.device.config
            if config is None:
                raise P4RuntimeError(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config set")
        except P4RuntimeError as exc:
            _abort(context, exc)
        R = p4runtime_pb2.GetForwardingPipelineConfigRequest
        out = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        out.config.cookie.cookie = config.cookie
        if request.response_type in (R.ALL, R.P4INFO_AND_COOKIE):
            out.config.p4info.CopyFrom(config.p4info)
        if request.response_type in (R.ALL, R.DEVICE_CONFIG_AND_COOKIE):
            out.config.p4_device_config = config.device_config
        return out

    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=importlib.metadata.version("p4runtime"))

    # ---- write ----

    def Write(self, request, context):
        try:
            self._check_device(request.device_id)
            self._check_primary(request.election_id)
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RuntimeError(code_pb2.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity is supported")
            index = self._index()
        except P4RuntimeError as exc:
            _abort(context, exc)
        errors = []
        with self.device.lock:
            for update in request.updates:
                try:
                    self._apply(index, update)
                    errors.append(p4runtime_pb2.Error(canonical_code=code_pb2.OK))
                except P4RuntimeError as exc:
                    errors.append(p4runtime_pb2.Error(canonical_code=exc.code, message=str(exc)))
        failed = [e for e in errors if e.canonical_code != code_pb2.OK]
        if failed:
            status = status_pb2.Status(code=code_pb2.UNKNOWN,
                                       message=f"{len(failed)} of {len(errors)} updates failed: {failed[0].message}")
            for e in errors:
                detail = any_pb2.Any()
                detail.Pack(e)
                status.details.append(detail)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, status.message)
        return p4runtime_pb2.WriteResponse()

    def _apply(self, index: P4InfoIndex, update: p4runtime_pb2.Update) -> None:
        dp = self.device.dataplane
        kind = update.entity.WhichOneof("entity")
        op = {Update.INSERT: "insert", Update.MODIFY: "modify", Update.DELETE: "delete"}.get(update.type)
        if op is None:
            raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, "update type UNSPECIFIED")
        if kind == "table_entry":
            te = update.entity.table_entry
            if te.is_default_action:
                raise P4RuntimeError(code_pb2.UNIMPLEMENTED, "default entries are fixed (NoAction)")
            entry = _decode_entry(index, te, needs_action=op != "delete")
            try:
                getattr(dp, op)(entry)
            except ValueError as exc:  # EntryError, or a value the implementation refuses
                raise P4RuntimeError(_entry_error_code(str(exc)), str(exc)) from None
        elif kind == "packet_replication_engine_entry":
            pre = update.entity.packet_replication_engine_entry
            if pre.WhichOneof("type") != "multicast_group_entry":
                raise P4RuntimeError(code_pb2.UNIMPLEMENTED, "only multicast group entries are supported")
            group = group_dict(pre)
            gid = group["id"]
            if gid == 0:
                raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, "multicast group id 0 is reserved")
            exists = gid in dp.groups()
            if op == "insert" and exists:
                raise P4RuntimeError(code_pb2.ALREADY_EXISTS, f"multicast group {gid} already exists")
            if op != "insert" and not exists:
                raise P4RuntimeError(code_pb2.NOT_FOUND, f"no multicast group {gid}")
            try:
                if op == "delete":
                    dp.delete_group(gid)
                else:
                    reps = normalise_replicas(gid, [(r["port"], r["rid"]) for r in group["replicas"]])
                    dp.set_group(gid, reps)
            except EntryError as exc:
                raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, str(exc)) from None
        elif kind == "register_entry":
            self._write_register(index, op, update.entity.register_entry)
        else:
            raise P4RuntimeError(code_pb2.UNIMPLEMENTED, f"writing {kind} entities is not supported")

    def _write_register(self, index: P4InfoIndex, op: str, entry: p4runtime_pb2.RegisterEntry) -> None:
        if op != "modify":
            raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"a register is modified, never {op}ed "
                                 f"(its cells exist with the program)")
        name, width, size = _register(index, entry.register_id)
        if entry.data.WhichOneof("data") != "bitstring":
            raise P4RuntimeError(code_pb2.INVALID_ARGUMENT,
                                 f"register {name!r}: a cell is a bitstring of {width} bits")
        try:
            value = decode(entry.data.bitstring, width, f"register {name}")
        except BadValue as exc:
            raise P4RuntimeError(code_pb2.OUT_OF_RANGE, str(exc)) from None
        dp = self.device.dataplane
        try:
            if entry.HasField("index"):
                dp.write_cell(name, entry.index.index, value)
            elif value == 0:
                dp.reset_cells((name, 0, size))
            else:
                for i in range(size):
                    dp.write_cell(name, i, value)
        except EntryError as exc:
            raise P4RuntimeError(code_pb2.OUT_OF_RANGE if "cell" in str(exc) else code_pb2.NOT_FOUND,
                                 str(exc)) from None

    # ---- read ----

    def Read(self, request, context):
        try:
            self._check_device(request.device_id)
            index = self._index()
            with self.device.lock:
                entities = [e for wanted in request.entities for e in self._read(index, wanted)]
        except P4RuntimeError as exc:
            _abort(context, exc)
        for start in range(0, max(len(entities), 1), 1000):
            yield p4runtime_pb2.ReadResponse(entities=entities[start:start + 1000])

    def _read(self, index: P4InfoIndex, wanted: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        dp = self.device.dataplane
        kind = wanted.WhichOneof("entity")
        out = []
        if kind == "table_entry":
            q = wanted.table_entry
            if q.table_id and q.table_id not in index.tables:
                raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"no table with id {q.table_id:#x}")
            key = None
            if q.table_id and len(q.match):
                key = _identity(_decode_entry(index, q, needs_action=False), q.priority)
            for entry in dp.entries():
                te = table_entry(index, entry)
                if q.table_id and te.table_id != q.table_id:
                    continue
                if key is not None and _identity(entry, te.priority) != key:
                    continue
                out.append(p4runtime_pb2.Entity(table_entry=te))
        elif kind == "packet_replication_engine_entry":
            gid = wanted.packet_replication_engine_entry.multicast_group_entry.multicast_group_id
            for g, reps in sorted(dp.groups().items()):
                if gid in (0, g):
                    pre = multicast_entry({"id": g, "replicas": [{"port": p, "rid": r} for p, r in reps]})
                    out.append(p4runtime_pb2.Entity(packet_replication_engine_entry=pre))
        elif kind == "counter_entry":
            out = self._read_counters(index, wanted.counter_entry)
        elif kind == "register_entry":
            out = self._read_registers(index, wanted.register_entry)
        else:
            raise P4RuntimeError(code_pb2.UNIMPLEMENTED, f"reading {kind} entities is not supported")
        return out

    def _read_registers(self, index: P4InfoIndex, q: p4runtime_pb2.RegisterEntry) -> list[p4runtime_pb2.Entity]:
        dp = self.device.dataplane
        ids = [q.register_id] if q.register_id else [r.preamble.id for r in index.p4info.registers]
        out = []
        for rid in ids:
            name, width, size = _register(index, rid)
            cells = [q.index.index] if q.HasField("index") else range(size)
            for i in cells:
                try:
                    value = dp.read_cell(name, i)
                except EntryError as exc:
                    raise P4RuntimeError(code_pb2.OUT_OF_RANGE if "cell" in str(exc)
                                         else code_pb2.NOT_FOUND, str(exc)) from None
                e = p4runtime_pb2.RegisterEntry(register_id=rid)
                e.index.index = i
                e.data.bitstring = encode(value, width)
                out.append(p4runtime_pb2.Entity(register_entry=e))
        return out

    def _read_counters(self, index: P4InfoIndex, q: p4runtime_pb2.CounterEntry) -> list[p4runtime_pb2.Entity]:
        counters = self.device.dataplane.counters()
        ports = counters["ports"]
        values: dict[str, dict[int, int]] = {
            "camus.port_rx": {int(p): c["rx_packets"] for p, c in ports.items()},
            "camus.port_tx": {int(p): c["tx_packets"] for p, c in ports.items()},
            "camus.drops": {i: counters["drops"][r] for i, r in enumerate(DROP_REASONS)},
        }
        for t, c in counters["tables"].items():
            values[f"camus.table.{t}"] = {0: c["hits"], 1: c["misses"]}
        by_id = {c.preamble.id: c for c in index.counters.values()}
        if q.counter_id and q.counter_id not in by_id:
            raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"no counter with id {q.counter_id:#x}")
        out = []
        for cid, info in sorted(by_id.items()):
            if q.counter_id not in (0, cid):
                continue
            counts = values.get(info.preamble.name, {})
            if q.HasField("index"):
                wanted = [q.index.index] if 0 <= q.index.index < info.size else []
            else:
                wanted = sorted(i for i, v in counts.items() if v)
            for i in wanted:
                e = p4runtime_pb2.Entity()
                e.counter_entry.counter_id = cid
                e.counter_entry.index.index = i
                e.counter_entry.data.packet_count = counts.get(i, 0)
                out.append(e)
        return out

    # ---- stream ----

    def StreamChannel(self, request_iterator, context):
        with self._stream_lock:
            self._next_stream += 1
            stream = self._next_stream
        outbox: queue.Queue = queue.Queue()
        done = object()

        def consume() -> None:
            try:
                for msg in request_iterator:
                    if msg.WhichOneof("update") != "arbitration":
                        continue  # packet-out and digests: this switch has no CPU port
                    arb = msg.arbitration
                    if arb.device_id != self.device.device_id:
                        outbox.put(P4RuntimeError(code_pb2.NOT_FOUND, f"no device {arb.device_id}"))
                        return
                    if arb.role.name:
                        outbox.put(P4RuntimeError(code_pb2.UNIMPLEMENTED, "only the default role is supported"))
                        return
                    try:
                        self.arbitration.update(stream, _election(arb.election_id), outbox)
                    except P4RuntimeError as exc:
                        outbox.put(exc)
                        return
            except grpc.RpcError:
                pass  # the client went away
            finally:
                outbox.put(done)

        context.add_callback(lambda: self.arbitration.remove(stream))
        threading.Thread(target=consume, name=f"p4rt-stream-{stream}", daemon=True).start()
        try:
            while True:
                item = outbox.get()
                if item is done:
                    return
                if isinstance(item, P4RuntimeError):
                    _abort(context, item)
                yield item
        finally:
            self.arbitration.remove(stream)


def _register(index: P4InfoIndex, register_id: int) -> tuple[str, int, int]:
    """(IR name, cell width, cells) of a register of the P4Info, by id."""
    for r in index.p4info.registers:
        if r.preamble.id == register_id:
            return ir_name(r.preamble.name), r.type_spec.bitstring.bit.bitwidth, r.size
    raise P4RuntimeError(code_pb2.NOT_FOUND, f"no register with id {register_id:#x}")


def _decode_entry(index: P4InfoIndex, te, needs_action: bool) -> dict:
    try:
        table = index.tables.get(te.table_id)
        if table is None:
            raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"no table with id {te.table_id:#x}")
        entry = entry_dict(index, te)
    except BadValue as exc:
        code = code_pb2.OUT_OF_RANGE if "does not fit" in str(exc) else code_pb2.INVALID_ARGUMENT
        raise P4RuntimeError(code, str(exc)) from None
    except UnknownName as exc:
        raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, str(exc)) from None
    if table.prioritised and te.priority <= 0:
        raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"table {table.name!r} needs a priority > 0")
    if not table.prioritised and te.priority:
        raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"table {table.name!r} takes no priority")
    if needs_action and "action" not in entry:
        raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, f"table {table.name!r}: the entry has no action")
    return entry


def _identity(entry: dict, priority: int) -> tuple:
    return entry_key({**entry, "priority": priority})


def _entry_error_code(message: str) -> int:
    # DataPlane names these two cases in its EntryError messages; everything else it refuses
    # is a bad entry.
    if "already exists" in message:
        return code_pb2.ALREADY_EXISTS
    if "no such entry" in message:
        return code_pb2.NOT_FOUND
    return code_pb2.INVALID_ARGUMENT


def _abort(context, exc: P4RuntimeError):
    context.abort(grpc.StatusCode[code_pb2.Code.Name(exc.code)], str(exc))


def serve(device: Device, address: str = DEFAULT_ADDRESS, max_workers: int = 16) -> tuple[grpc.Server, int]:
    """Start a P4Runtime server for `device` on `address` (port 0: ephemeral); return it and its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt"))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(P4RuntimeServicer(device), server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return server, port
