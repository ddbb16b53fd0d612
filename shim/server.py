"""`camus serve`'s network side: an asyncio TCP server speaking Kafka through `shim.protocol`.

One `ServerConnection` per TCP connection. Requests on a connection are handled one at a
time, in order, as a Kafka broker does (it mutes a connection while a request is in
flight), so a parked JoinGroup or a long-polling Fetch delays only its own connection's
later requests, never anyone else's. Handlers come from the dispatch table in
`shim.handlers`; an advertised API without a handler, or a handler that raises, answers
that request with its own error shape (UNSUPPORTED_VERSION / UNKNOWN_SERVER_ERROR) and
keeps the connection (if even that answer cannot be built, the connection is closed).
Resources are bounded as `shim.limits` says: connections past `max.connections` are closed
as they arrive, a connection idle for `connections.max.idle.ms` is closed, and a request
larger than one socket read is read only once its size is reserved from the shared
`queued.max.request.bytes` pool. Before a SASL connection has authenticated, a frame larger
than `sasl.server.max.receive.size` closes it instead, so strangers cannot take that pool.
Protocol errors follow docs/kafka-protocol.md: send the prepared answer when there is one
(on a SASL listener before authentication, only to ApiVersions and the SASL requests),
otherwise log and close this connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import inspect
import itertools
import logging
import signal
import time

from shim.broker import Broker, Config
from shim.handlers import HANDLERS, Context
from shim.limits import SMALL_REQUEST, RequestMemory
from shim.metrics import Metrics
from shim.protocol import ErrorCode, ProtocolError, ServerConnection, encode_response
from shim.protocol.framing import frame
from shim.security import authorize
from shim.security.listeners import Listener
from shim.security.session import Session
from shim.security.tls import certificate_principal, server_context

log = logging.getLogger("camus.server")
TICK_SECONDS = 0.25
FLUSH_BYTES = 1 << 20  # answers held back to leave together, at most
TLS_HANDSHAKE_SECONDS = 10  # a client that starts TLS and stalls holds a slot no longer
_CONNECTION_NUMBERS = itertools.count(1)  # Context.connection: 0 is "no connection"


async def _answer(ctx: Context, request, flush):
    handler = HANDLERS.get(request.api.name)
    if handler is None:
        log.warning("no handler for %s v%d", request.api.name, request.api_version)
        return request.error_response(ErrorCode.unsupported_version)
    started = time.perf_counter()
    try:
        denied = authorize.refused(ctx, request)
        result = request.error_response(*denied) if denied else handler(ctx, request)
        if inspect.isawaitable(result):
            await flush()  # it may park (a long-poll, a join): earlier answers go out first
            result = await result
        requests = ctx.broker.requests
        requests[request.api.name] = requests.get(request.api.name, 0) + 1
        if ctx.broker.metrics is not None:
            ctx.broker.metrics.observe(request.api.name, started)
        return result
    except Exception:
        log.exception("%s v%d from %s failed", request.api.name, request.api_version,
                      request.client_id)
        try:
            return request.error_response(ErrorCode.unknown_server_error, "internal error")
        except Exception:  # the request is too odd to echo: close this connection only
            log.exception("%s v%d from %s: no error answer either; closing the connection",
                          request.api.name, request.api_version, request.client_id)
            return None


def _api_name(conn: ServerConnection, key: int | None) -> str:
    api = conn.registry.get(key) if key is not None else None
    return api.name if api is not None else f"API key {key}"


QUOTA_KEYS = {"Produce": "producer_byte_rate", "Fetch": "consumer_byte_rate"}


def _throttle(ctx: Context, request, response, request_bytes: int):
    """(response, throttle ms): the bytes counted against the client's quota (a Produce's
    request, a Fetch's answer) and, when over it, the answer carrying throttle_time_ms."""
    if isinstance(response, dict):
        response = request.response(response)
    key = QUOTA_KEYS[request.api.name]
    size = request_bytes if key == "producer_byte_rate" else len(encode_response(request, response))
    user = ctx.session.principal.removeprefix("User:")  # ANONYMOUS too, as Kafka counts it
    ms = ctx.broker.quotas.record(user, request.client_id or "", key, size)
    if ms and hasattr(response, "throttle_time"):
        response = dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=ms))
    return response, ms


async def _serve_connection(broker: Broker, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter, memory: RequestMemory,
                            listener: Listener) -> None:
    peer = writer.get_extra_info("peername") or ("?", 0)
    idle = broker.config.limits.idle_ms / 1000
    reserved = 0  # bytes of the pool held for the request being received
    security = broker.config.security
    session = Session(listener, security, broker.users,
                      certificate_principal(writer.get_extra_info("ssl_object")))
    ctx = Context(broker, peer[0], session, next(_CONNECTION_NUMBERS))
    failed_auth_delay = security.failed_auth_delay_ms / 1000
    conn = ServerConnection()
    # Answers to requests that arrived together (a client pipelines them: librdkafka sends
    # one ListOffsets per partition at once) leave together, in one write. A client that
    # gets them one segment at a time acts on the first alone: librdkafka then sends a
    # Fetch naming only that partition, and when it has nothing new that Fetch long-polls
    # for fetch.wait.max.ms before the other partitions are asked for.
    pending: list[bytes] = []

    def limit_frames() -> None:  # before each frame: authenticating or not may have changed
        cap = session.max_receive_size
        if cap is None:
            conn.limit_frames()
        else:
            conn.limit_frames(cap, "sasl.server.max.receive.size before authentication")

    async def flush() -> None:
        if pending:
            writer.write(b"".join(pending))
            pending.clear()
            await writer.drain()

    try:
        while True:
            limit_frames()
            size = conn.pending_frame_size
            if size is not None and size > SMALL_REQUEST and not reserved:
                reserved = await memory.reserve(size)
            try:
                data = await asyncio.wait_for(reader.read(SMALL_REQUEST), idle)
            except asyncio.TimeoutError:
                log.info("client %s:%s: idle for connections.max.idle.ms; closing", *peer[:2])
                return
            if not data:
                return
            conn.receive_data(data)
            while True:
                limit_frames()
                if session.raw_tokens:  # after a v0 SaslHandshake: bare SASL tokens
                    try:
                        token = conn.next_raw_frame()
                    except ProtocolError as exc:  # only framing: a token has no header
                        log.warning("client %s:%s: %s", peer[0], peer[1], exc)
                        await flush()
                        return
                    if token is None:
                        break
                    answer, failure, _ = session.step(token)
                    if failure is not None:  # v0 has no error field: the connection closes
                        log.info("client %s:%s: %s", peer[0], peer[1], failure)
                        await asyncio.sleep(failed_auth_delay)
                        await flush()
                        return
                    pending.append(frame(answer))
                    continue
                try:
                    request = conn.next_request()
                except ProtocolError as exc:
                    log.warning("client %s:%s: %s (%s)", peer[0], peer[1], exc, exc.error_code.name)
                    # An error answer is an answer too: before authentication only ApiVersions
                    # and the SASL requests get one, whatever their version.
                    refusal = exc.response is not None and session.refuse(_api_name(conn, exc.api_key))
                    if refusal:
                        log.warning("client %s:%s: %s; closing the connection", peer[0], peer[1], refusal)
                    if exc.response is None or refusal:
                        await flush()
                        return
                    pending.append(exc.response)
                    if reserved:  # the refused frame was the reserved one
                        memory.release(reserved)
                        reserved = 0
                    continue
                if request is None:
                    break
                refusal = session.refuse(request.api.name)
                if refusal is not None:
                    log.warning("client %s:%s: %s; closing the connection", peer[0], peer[1], refusal)
                    await flush()
                    return
                response = await _answer(ctx, request, flush)
                if reserved:  # the reserved request was at the head: it is this one
                    memory.release(reserved)
                    reserved = 0
                if response is None:
                    await flush()
                    return
                if session.close_after_answer:  # a failed authentication: answer late, then close
                    await asyncio.sleep(failed_auth_delay)
                    pending.append(encode_response(request, response))
                    await flush()
                    return
                throttle_ms = 0
                if request.api.name in QUOTA_KEYS and broker.quotas.quotas:
                    response, throttle_ms = _throttle(ctx, request, response, len(conn.last_frame))
                if request.expects_response:
                    pending.append(encode_response(request, response))
                    if throttle_ms:  # KIP-219: answer now, then read nothing for that long
                        await flush()
                        await asyncio.sleep(throttle_ms / 1000)
                    if sum(map(len, pending)) > FLUSH_BYTES:  # big answers (fetches) need no company
                        await flush()
            await flush()
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
        pass  # the client left, or the server is shutting down
    finally:
        if reserved:
            memory.release(reserved)
        writer.close()


async def _housekeeping(broker: Broker) -> None:
    while True:
        await asyncio.sleep(TICK_SECONDS)
        try:
            broker.tick()
        except Exception:
            log.exception("housekeeping failed")


async def serve(config: Config, on_ready=None, stop: asyncio.Event | None = None) -> None:
    """Serve until SIGINT/SIGTERM (or `stop` is set); `on_ready(broker)` once listening."""
    broker = Broker(config)
    # Started: from now on subscription changes compile on a worker thread, not on this loop.
    broker.datapath.compile_in_background()
    connections: set[asyncio.Task] = set()
    memory = RequestMemory(config.limits.queued_bytes)
    config.limits.max_connections = config.limits.connections_allowed()
    refused = [0, 0.0]  # connections refused, when that was last logged

    async def connection(reader, writer, listener):
        if len(connections) >= config.limits.max_connections:
            writer.close()  # the client's reconnect backoff retries later
            refused[0] += 1
            if time.monotonic() - refused[1] > 10:
                log.warning("max.connections=%d reached: refused %d connection(s)",
                            config.limits.max_connections, refused[0])
                refused[:] = [0, time.monotonic()]
            return
        task = asyncio.current_task()
        connections.add(task)
        try:
            await _serve_connection(broker, reader, writer, memory, listener)
        finally:
            connections.discard(task)

    security = config.security
    security.listeners = security.listeners or [Listener("PLAINTEXT", config.host, config.port)]
    security.check()
    if (idle := security.idle_settings()) is not None:
        log.warning("%s", idle)
    tls = {sasl: server_context(security, sasl) for sasl in {lst.sasl for lst in security.listeners
                                                             if lst.tls}}
    servers = []
    for lst in security.listeners:
        servers.append(await asyncio.start_server(
            lambda r, w, lst=lst: connection(r, w, lst), lst.host, lst.port, reuse_address=True,
            ssl=tls[lst.sasl] if lst.tls else None,
            ssl_handshake_timeout=TLS_HANDSHAKE_SECONDS if lst.tls else None))
        lst.port = servers[-1].sockets[0].getsockname()[1]  # an ephemeral port advertises itself
        log.info("camus serving Kafka on %s (node %d, data dir %s)", lst, config.node_id,
                 config.data_dir or "none: in memory")
        # PLAINTEXT keeps its old line (scripts read HOST:PORT from it).
        print(f"camus: listening on {lst.host}:{lst.port}" if lst.protocol == "PLAINTEXT"
              else f"camus: listening on {lst}", flush=True)
    config.host, config.port = security.listeners[0].host, security.listeners[0].port
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass  # not in the main thread (tests)
    tasks = [asyncio.create_task(_housekeeping(broker))]
    metrics_server = None
    if config.metrics is not None:
        broker.metrics = Metrics(broker)
        metrics_server = await broker.metrics.serve(*config.metrics)
    if on_ready is not None:
        on_ready(broker)
    async with contextlib.AsyncExitStack() as opened:
        for server in servers:
            await opened.enter_async_context(server)
        await stop.wait()
        for server in servers:
            server.close()
        # Parked requests (long-polls, joins) end with their connections, not with the loop.
        for t in [*tasks, *connections]:
            t.cancel()
        await asyncio.gather(*tasks, *connections, return_exceptions=True)
        if metrics_server is not None:
            metrics_server.close()
    broker.save_offsets()
    broker.datapath.close()
