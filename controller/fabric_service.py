"""The fabric's controller as a service: host brokers publish subscriptions, records cross.

`camus net serve` runs one `FabricService`: the network (`controller.network.Network`, the
Kafka spec's static pipeline on every switch) and the network running in this process
(`controller.network.Fabric`, one software switch per switch, hop by hop). Each host of the
topology gets one UDP socket on loopback (`--bind`): the broker of that host
(`controller.fabric_target.FabricTarget`, `camus serve --target fabric://...`) sends the
frames of records produced to it there, so they enter the network at the host's access
switch, and every copy the network delivers to the host is sent from that socket to the
broker's own socket. A frame counts as the host's only if it comes from the address the
host's broker attached with; anything else is dropped and counted.

With an emulation (`camus net serve --mininet`, `controller.emulation.Emulation`), the
switches are `camus switch serve --fabric` processes (bmv2 with `--switch bmv2|auto`) in Mininet
and the hosts network namespaces instead: brokers run on the hosts, send and receive frames on their interfaces
(`io=iface:NAME` in their target spec), and every change is pushed over P4Runtime to the
switches it recompiled (`controller.push`: the device's difference to the new entries).
This process then carries no frames.

The control API is JSON lines over TCP (`--listen`, loopback by default) or over a Unix
socket (`--listen unix:PATH`, which brokers in the hosts' namespaces reach through the
file system): one request
object a line, one answer object a line, `{"ok": false, "error": ...}` for a refused one.
  * `{"op": "attach", "host": H, "deliver": [IP, PORT]}`: the broker of H receives at
    IP:PORT and sends from it; answers `{"ingress": [IP, PORT]}`, where it sends frames
    (`"deliver": null` and `"ingress": null` on an emulation: the host's interface is the
    link).
  * `{"op": "detach", "host": H}`: H's broker is gone: copies for H are dropped (counted)
    until it attaches again. Its subscriptions stay in the network, so a broker that
    restarts with the same subscriptions changes no switch.
  * `{"op": "subscriptions", "host": H, "filters": [F, ...]}`: H's whole subscription set,
    one filter per endpoint (`controller.filter_wire`); the controller applies what
    differs with `Network.remove` / `Network.add`, which recompile only the switches
    whose filter sets change and write only the differing entries to the running fabric.
    Answers the switches recompiled, the writes and the seconds taken.
  * `{"op": "topic", "name": N}`: the topic number all brokers use for topic N (the camus
    Kafka header carries numbers, not names), first come first numbered, kept in
    `--state DIR/topics.json` across restarts.
  * `{"op": "status"}`: per host, whether attached, its subscriptions, frames in and out;
    the topic numbers; the last 20 subscription changes (switches recompiled, writes,
    seconds); packets and bytes per directed link.
"""

from __future__ import annotations

import json
import logging
import selectors
import socket
import socketserver
import threading
import time
from collections import Counter
from pathlib import Path

from controller.fabric_target import grow_receive_buffer
from controller.filter_wire import from_json
from controller.network import ChangeReport, Fabric, Network, RoutingLoop
from controller.policy import Subscription

log = logging.getLogger("camus.fabric")
MAX_FRAME = 65535


class StateError(Exception):
    """A --state directory this service cannot keep its topic numbers in."""


def read_topics(state: Path) -> dict[str, int]:
    """The topic numbers kept in `state`/topics.json ({} when there are none yet); checked
    here, at start, rather than when the first broker asks for a number."""
    if state.exists() and not state.is_dir():
        raise StateError(f"--state {state}: not a directory")
    path = state / "topics.json"
    if not path.exists():
        return {}
    try:
        topics = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, not JSON
        raise StateError(f"{path}: cannot read the topic numbers: {exc}") from None
    if not (isinstance(topics, dict) and all(isinstance(n, int) and not isinstance(n, bool)
                                             for n in topics.values())):
        raise StateError(f"{path}: expected a JSON object of topic name: number")
    return topics


class _Host:
    def __init__(self, name: str, bind: str | None) -> None:
        self.name = name
        self.sock = None  # None on an emulation: the host's interface is its link
        if bind is not None:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            grow_receive_buffer(self.sock)
            self.sock.bind((bind, 0))
            self.sock.setblocking(False)
        self.attached = False
        self.broker: tuple[str, int] | None = None  # where its broker receives and sends from
        self.subscriptions: Counter = Counter()  # filter -> endpoints of the broker wanting it
        self.frames_in = self.frames_out = self.dropped = self.strangers = 0


class FabricService:
    """A network of switches in this process, fed and drained by host brokers over UDP."""

    def __init__(self, network: Network, listen: tuple[str, int] | str = ("127.0.0.1", 0),
                 bind: str = "127.0.0.1", state: Path | None = None, impl: str = "native",
                 emulation=None, net_dir: Path | None = None) -> None:
        """`listen`: (host, port) for TCP, a path for a Unix socket. `emulation`: a started
        `controller.emulation.Emulation` of the network written to `net_dir`, whose
        switches this service programs (and then carries no frames itself)."""
        self.net = network
        self.emulation, self.net_dir = emulation, net_dir
        self.fabric = Fabric.of(network, impl) if emulation is None else None
        self.lock = threading.Lock()  # the network and the fabric: one change or frame at a time
        self.hosts = {h: _Host(h, bind if emulation is None else None) for h in network.topo.hosts}
        self.state = Path(state) if state is not None else None
        self.topics = read_topics(self.state) if self.state is not None else {}
        self.changes: list[dict] = []  # one ChangeReport a subscription change, newest last
        self.loops = 0
        self._stop = threading.Event()
        service = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    if not line.strip():
                        continue
                    try:
                        answer = service.request(json.loads(line))
                    except (ValueError, KeyError, TypeError) as exc:
                        answer = {"ok": False, "error": str(exc)}
                    except Exception as exc:  # a compile or a push failed: say so, keep serving
                        log.exception("request failed")
                        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                    self.wfile.write(json.dumps(answer).encode() + b"\n")
                    self.wfile.flush()

        if isinstance(listen, str):
            Path(listen).unlink(missing_ok=True)
            self.api = socketserver.ThreadingUnixStreamServer(listen, Handler)
        else:
            socketserver.ThreadingTCPServer.allow_reuse_address = True
            self.api = socketserver.ThreadingTCPServer(listen, Handler)
        self.api.daemon_threads = True
        self._threads = [threading.Thread(target=self.api.serve_forever, name="fabric-api",
                                          daemon=True)]
        if self.fabric is not None:
            self._threads.append(threading.Thread(target=self._forward, name="fabric-io",
                                                  daemon=True))

    @property
    def address(self) -> tuple[str, int] | str:
        a = self.api.server_address
        return a if isinstance(a, str) else tuple(a[:2])

    def start(self) -> "FabricService":
        for t in self._threads:
            t.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._threads[0].is_alive():  # shutdown() waits for a serve_forever that never ran
            self.api.shutdown()
        self.api.server_close()
        for t in self._threads[1:]:
            if t.is_alive():
                t.join(timeout=2)
        for h in self.hosts.values():
            if h.sock is not None:
                h.sock.close()
        if isinstance(self.address, str):
            Path(self.address).unlink(missing_ok=True)

    # --- control ----------------------------------------------------------------------

    def request(self, req: dict) -> dict:
        op = req.get("op")
        if op == "status":
            with self.lock:
                return {"ok": True, **self.status()}
        if op == "topic":
            return {"ok": True, "number": self.topic_number(str(req["name"]))}
        host = self.hosts.get(req.get("host"))
        if host is None:
            return {"ok": False, "error": f"no host {req.get('host')!r} in the network "
                                          f"(hosts: {', '.join(sorted(self.hosts))})"}
        if op == "attach":
            deliver = req.get("deliver")
            if (deliver is None) != (host.sock is None):
                return {"ok": False, "error": "this network's hosts send and receive on " +
                        ("their interfaces (io=iface:NAME)" if host.sock is None
                         else "loopback UDP (no io=)")}
            with self.lock:
                host.attached = True
                host.broker = (str(deliver[0]), int(deliver[1])) if deliver else None
            log.info("host %s: broker attached%s", host.name,
                     f" at {deliver[0]}:{deliver[1]}" if deliver else "")
            return {"ok": True,
                    "ingress": list(host.sock.getsockname()[:2]) if host.sock else None}
        if op == "detach":
            with self.lock:
                host.attached = False
                host.broker = None
            log.info("host %s: broker detached", host.name)
            return {"ok": True}
        if op == "subscriptions":
            filters = Counter(from_json(f, self.net.spec) for f in req["filters"])
            report = self.set_subscriptions(host.name, filters)
            return {"ok": True, **report.to_json()}
        return {"ok": False, "error": f"unknown op {op!r} (attach, detach, subscriptions, "
                                      "topic, status)"}

    def set_subscriptions(self, name: str, filters: Counter) -> ChangeReport:
        """Make host `name`'s subscriptions `filters` (a multiset), changing only what differs."""
        total = ChangeReport()
        started = time.perf_counter()
        with self.lock:
            host = self.hosts[name]
            gone, new = host.subscriptions - filters, filters - host.subscriptions
            try:
                # One at a time, so a filter the compiler refuses leaves the host holding
                # exactly the ones applied before it (the broker publishes again anyway).
                for f, n in [*((f, -n) for f, n in gone.items()), *new.items()]:
                    for _ in range(abs(n)):
                        sub = Subscription(name, f)
                        r = (self.net.remove(sub, self.fabric) if n < 0
                             else self.net.add(sub, self.fabric))
                        host.subscriptions[f] += 1 if n > 0 else -1
                        total.switches += [s for s in r.switches if s not in total.switches]
                        total.reached += [s for s in r.reached if s not in total.reached]
                        total.writes += r.writes
                        for s, w in r.entries_per_switch.items():
                            total.entries_per_switch[s] = total.entries_per_switch.get(s, 0) + w
            finally:
                host.subscriptions = +host.subscriptions
                if self.emulation is not None and total.switches:
                    self._push(total.switches)
            total.seconds = time.perf_counter() - started
            if gone or new:
                self.changes.append({"host": name, "added": sum(new.values()),
                                     "removed": sum(gone.values()), **total.to_json()})
                log.info("host %s: +%d -%d subscriptions, %d switches, %d writes, %.3f s", name,
                         sum(new.values()), sum(gone.values()), len(total.switches),
                         total.writes, total.seconds)
        return total

    def _push(self, switches: list[str]) -> None:
        """The emulation's switches `switches` to their new entries, over P4Runtime (camus's
        switch or bmv2, with its fabric control plane: `Emulation.program`)."""
        self.net.write(self.net_dir, only=switches)
        for s in switches:
            self.emulation.program(s)

    def topic_number(self, name: str) -> int:
        with self.lock:
            if name not in self.topics:
                self.topics[name] = max(self.topics.values(), default=0) + 1
                if self.state is not None:
                    self.state.mkdir(parents=True, exist_ok=True)
                    tmp = self.state / "topics.json.tmp"
                    tmp.write_text(json.dumps(self.topics, indent=1) + "\n")
                    tmp.replace(self.state / "topics.json")
            return self.topics[name]

    def status(self) -> dict:
        return {
            "hosts": {h.name: {"attached": (list(h.broker) if h.broker else True)
                                           if h.attached else None,
                               "subscriptions": sum(h.subscriptions.values()),
                               "frames_in": h.frames_in, "frames_out": h.frames_out,
                               "dropped": h.dropped, "strangers": h.strangers}
                      for h in self.hosts.values()},
            "topics": dict(self.topics),
            "changes": len(self.changes),
            "recent_changes": self.changes[-20:],  # host, added, removed, switches, writes, seconds
            "routing_loops": self.loops,
            "links": self.fabric.links_json() if self.fabric is not None else None,
        }

    # --- data -------------------------------------------------------------------------

    def _forward(self) -> None:
        """Frames from every host's broker through the network to the hosts it delivers to."""
        sel = selectors.DefaultSelector()
        for h in self.hosts.values():
            sel.register(h.sock, selectors.EVENT_READ, h)
        while not self._stop.is_set():
            for key, _ in sel.select(0.2):
                host: _Host = key.data
                for _ in range(1024):  # take turns between hosts
                    try:
                        frame, sender = host.sock.recvfrom(MAX_FRAME)
                    except (BlockingIOError, OSError):
                        break
                    self._inject(host, frame, sender)
        sel.close()

    def _inject(self, host: _Host, frame: bytes, sender) -> None:
        with self.lock:
            if host.broker is None or tuple(sender[:2]) != host.broker:
                host.strangers += 1
                return
            host.frames_in += 1
            try:
                delivered = self.fabric.inject(host.name, frame)
            except RoutingLoop as exc:
                self.loops += 1
                log.error("%s", exc)
                return
            for name, copy in delivered:
                to = self.hosts[name]
                if to.broker is None:
                    to.dropped += 1
                    continue
                try:
                    to.sock.sendto(copy, to.broker)
                    to.frames_out += 1
                except OSError:
                    to.dropped += 1
