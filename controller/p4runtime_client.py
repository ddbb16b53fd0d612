"""A P4Runtime client: one connection to one device, as the primary controller.

`P4RuntimeClient` opens the StreamChannel and wins arbitration with its election id, then
offers the calls a controller needs: set/get the forwarding pipeline config, Write in batches
(every failed update is reported with its P4Runtime `Error`, decoded from the gRPC status
details as the spec carries them), and Read.

Batches. The spec lets a server reorder the updates of one WriteRequest, so only updates
that do not depend on each other may share one; a Write that has returned is committed, so
dependent steps (delete stale entries, then set groups, then insert entries that name
them...) go in successive Writes (`write_steps`). Within a step P4Runtime puts no bound on a
batch but the gRPC message size: PI (bmv2) accepts 256 MiB, gRPC's default (camus's switch)
4 MiB, so a request is cut at `batch` updates or `MAX_REQUEST_BYTES`, whichever comes first. It uses only the standard protobufs and stubs,
so it drives camus's software switch and bmv2's `simple_switch_grpc` alike.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import grpc

from p4rt.protos import code_pb2, p4runtime_pb2, status_pb2
from p4rt.stubs import p4runtime_pb2_grpc

DEFAULT_TARGET = "127.0.0.1:9559"
DEFAULT_BATCH = 10_000  # updates per WriteRequest at most (bench/bmv2_sync.py measured sizes)
MAX_REQUEST_BYTES = 3 << 20  # under gRPC's default 4 MiB receive limit, with room to spare
# gRPC waits up to 1 s, then longer, before reconnecting to a device that went away; a
# controller that must reprogram a restarted device at once wants it back sooner.
CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 50),
                   ("grpc.max_reconnect_backoff_ms", 250)]


@dataclass(frozen=True)
class UpdateError:
    """One failed update of a Write: its position in the batch, the update, the code and message."""

    index: int
    update: p4runtime_pb2.Update
    code: int  # google.rpc.Code

    message: str

    @property
    def code_name(self) -> str:
        return code_pb2.Code.Name(self.code)

    def __str__(self) -> str:
        return f"update {self.index}: {self.code_name}: {self.message}"


class WriteError(Exception):
    """A Write in which some updates failed; `errors` lists them (the others were applied)."""

    def __init__(self, errors: list[UpdateError]):
        super().__init__(f"{len(errors)} update(s) failed; first: {errors[0]}")
        self.errors = errors


class ArbitrationError(Exception):
    """The device did not make this client primary."""


def update_errors(exc: grpc.RpcError, updates: list[p4runtime_pb2.Update]) -> list[UpdateError]:
    """The per-update errors of a failed Write (P4Runtime spec: status details, one per update)."""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            errors = []
            for i, detail in enumerate(status.details):
                err = p4runtime_pb2.Error()
                if detail.Unpack(err) and err.canonical_code != code_pb2.OK:
                    errors.append(UpdateError(i, updates[i] if i < len(updates) else None,
                                              err.canonical_code, err.message))
            if errors:
                return errors
    # No details: the whole request failed (e.g. PERMISSION_DENIED); blame every update.
    code = code_pb2.Code.Value(exc.code().name)
    return [UpdateError(i, u, code, exc.details() or "") for i, u in enumerate(updates)] or \
        [UpdateError(0, None, code, exc.details() or "")]


def _chunks(updates: list, batch: int) -> Iterator[list]:
    """`updates` cut into runs of at most `batch` updates and about `MAX_REQUEST_BYTES`."""
    chunk: list = []
    size = 0
    for u in updates:
        n = u.ByteSize() + 8  # the update's tag and length in the request
        if chunk and (len(chunk) >= batch or size + n > MAX_REQUEST_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(u)
        size += n
    if chunk:
        yield chunk


class P4RuntimeClient:
    def __init__(self, target: str = DEFAULT_TARGET, device_id: int = 1, election_id: int = 1,
                 timeout: float = 10.0):
        self.target, self.device_id, self.election_id, self.timeout = target, device_id, election_id, timeout
        self.channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue = queue.Queue()
        self._responses: queue.Queue = queue.Queue()
        self._stream = None
        # Set when the StreamChannel ends (the device went away, or `close`): a controller
        # that must keep the device programmed watches it to reconnect and reinstall.
        self.stream_ended = threading.Event()

    # ---- connection and arbitration ----

    @classmethod
    def primary(cls, target: str, device_id: int = 1, election_id: int = 1,
                timeout: float = 10.0) -> "P4RuntimeClient":
        """A client that has won arbitration (and left nothing open if it did not)."""
        client = cls(target, device_id, election_id, timeout)
        try:
            client.arbitrate()
        except BaseException:
            client.close()
            raise
        return client

    def _election(self) -> p4runtime_pb2.Uint128:
        return p4runtime_pb2.Uint128(high=self.election_id >> 64, low=self.election_id & ((1 << 64) - 1))

    def arbitrate(self) -> None:
        """Open the stream and become primary; ArbitrationError if another client outranks us."""
        grpc.channel_ready_future(self.channel).result(timeout=self.timeout)
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None))
        threading.Thread(target=self._read_stream, name="p4rt-client-stream", daemon=True).start()
        msg = p4runtime_pb2.StreamMessageRequest()
        msg.arbitration.device_id = self.device_id
        msg.arbitration.election_id.CopyFrom(self._election())
        self._requests.put(msg)
        try:
            reply = self._responses.get(timeout=self.timeout)
        except queue.Empty:
            reply = None
        if isinstance(reply, p4runtime_pb2.StreamMessageResponse) and reply.arbitration.status.code == code_pb2.OK:
            return
        self._end_stream()  # a failed client leaves no stream (nor its sender thread) behind
        if reply is None:
            raise ArbitrationError(f"{self.target}: no arbitration answer in {self.timeout} s")
        if isinstance(reply, grpc.RpcError):
            raise ArbitrationError(f"{self.target}: stream failed: {reply.code().name}: {reply.details()}")
        raise ArbitrationError(f"{self.target}: not primary (election id {self.election_id}; "
                               f"{reply.arbitration.status.message or 'another client is primary'})")

    def _end_stream(self) -> None:
        self._requests.put(None)  # ends the request iterator gRPC's sender thread is reading
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None

    def _read_stream(self) -> None:
        try:
            for reply in self._stream:
                if reply.WhichOneof("update") == "arbitration":
                    self._responses.put(reply)
        except grpc.RpcError as exc:
            self._responses.put(exc)
        finally:
            self.stream_ended.set()

    def close(self) -> None:
        self._end_stream()
        self.channel.close()

    def __enter__(self) -> "P4RuntimeClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- pipeline ----

    def set_pipeline(self, p4info, device_config: bytes, cookie: int = 0) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=self._election(),
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req, timeout=self.timeout)

    def get_pipeline(self, response_type: str = "ALL") -> p4runtime_pb2.ForwardingPipelineConfig:
        R = p4runtime_pb2.GetForwardingPipelineConfigRequest
        req = R(device_id=self.device_id, response_type=R.ResponseType.Value(response_type))
        return self.stub.GetForwardingPipelineConfig(req, timeout=self.timeout).config

    # ---- write and read ----

    def write(self, updates: Iterable[p4runtime_pb2.Update], batch: int = DEFAULT_BATCH) -> int:
        """Send `updates` in order, in WriteRequests of at most `batch` updates (and
        `MAX_REQUEST_BYTES`), each after the last is answered; return how many were sent.
        A server may reorder the updates of one request: updates that depend on each other
        belong in successive steps of `write_steps`.

        Every batch is sent even if an earlier one failed; WriteError then lists every failed
        update, its index counted over all of `updates`.
        """
        return self.write_steps([list(updates)], batch)

    def write_steps(self, steps: Iterable[Iterable[p4runtime_pb2.Update]],
                    batch: int = DEFAULT_BATCH) -> int:
        """Send each step's updates (independent of each other) in as few WriteRequests as
        `batch` and `MAX_REQUEST_BYTES` allow, a step only once the one before is answered;
        return how many were sent. Errors as `write`, indices counted over all steps."""
        errors: list[UpdateError] = []
        start = 0
        for step in steps:
            for chunk in _chunks(list(step), batch):
                req = p4runtime_pb2.WriteRequest(device_id=self.device_id, election_id=self._election(),
                                                 updates=chunk)
                try:
                    self.stub.Write(req, timeout=self.timeout)
                except grpc.RpcError as exc:
                    for e in update_errors(exc, chunk):
                        errors.append(UpdateError(start + e.index, e.update, e.code, e.message))
                start += len(chunk)
        if errors:
            raise WriteError(errors)
        return start

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> Iterator[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=list(entities))
        for reply in self.stub.Read(req, timeout=self.timeout):
            yield from reply.entities

    def capabilities(self) -> str:
        return self.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=self.timeout).p4runtime_api_version
