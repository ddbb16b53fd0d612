"""The switch in front of the forwarder and the upstream path: three ways to run it.

Every front gives the same thing to the demo: a frame port the clients send requests into
(port 0), and egress port 1 (the forwarder) and 2 (upstream, the producer) delivered to
the frame ports the forwarder and producer listen on. The rules decide; nothing here does.

* `embedded`: camus's software switch (`switch.device.Device`) in the demo's own process,
  its ports bound to loopback UDP sockets (`switch.ports`), as `camus switch serve` binds
  them, with threads of this process moving the frames.
* `serve`: `camus switch serve --pipeline DIR` as a child process, on loopback UDP.
* `bmv2`: `simple_switch_grpc` in a private network namespace behind veth pairs
  (`controller.launch.Bmv2Process`, the broker's remote target's device), the program
  compiled by p4c-bm2-ss and the entries written over P4Runtime (`controller.push`); the
  clients, forwarder and producer read and write the veths' host ends directly.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from apps.hicn.processes import ROOT, follow, iter_lines, python_env, read_until_ready, stop
from apps.hicn.settings import FRONTS
from switch.device import Device, config_from_dir
from switch.ports import Ports, UdpPort

FORWARDER_PORT, UPSTREAM_PORT, INGRESS_PORT = 1, 2, 0
READY_SECONDS = 60.0


class FrontError(RuntimeError):
    """The switch could not be started or given the program (a target that is not here, or
    cannot run it): the demo says so in one line."""


def _udp(description: str) -> str:
    """`udp:HOST:PORT` from a port's description `udp HOST:PORT`."""
    match = re.match(r"udp (\S+):(\d+)", description)
    if not match:
        raise RuntimeError(f"not a UDP binding: {description!r}")
    return f"udp:{match.group(1)}:{match.group(2)}"


class Front:
    name = ""

    def listen(self, port: int) -> str:
        """The frame port the process behind egress `port` should receive on."""
        return "udp:@127.0.0.1:0"

    def start(self, directory: Path, peers: dict[int, str]) -> str:
        """Run the compiled `directory` (pipeline.json, entries.json) with egress port N sent
        to `peers[N]` (the description the process printed); the clients' frame port."""
        raise NotImplementedError

    def counters(self) -> dict:
        return {}

    def stop(self) -> None:
        """Stop forwarding (the front may start again for the next run)."""

    def close(self) -> None:
        self.stop()


class Embedded(Front):
    name = "embedded"

    def __init__(self, impl: str) -> None:
        self.impl = impl
        self.device: Device | None = None
        self.ports: Ports | None = None
        self._counters: dict = {}

    def start(self, directory: Path, peers: dict[int, str]) -> str:
        self.device = Device(self.impl)
        self.device.install(*config_from_dir(directory))
        self.ports = Ports(self.device)
        for n, peer in peers.items():
            host, _, port = _udp(peer)[4:].rpartition(":")
            self.ports.add(UdpPort(n, (host, int(port))))
        ingress = self.ports.add(UdpPort(INGRESS_PORT, None), egress=False)
        self.ports.start()
        return f"udp:{ingress.local[0]}:{ingress.local[1]}"

    def stop(self) -> None:
        if self.ports is not None:
            self.ports.stop()
            with self.device.lock:
                self._counters = self.device.dataplane.counters()
            if self.ports.errors:
                self._counters["errors"] = self.ports.errors
            self.ports = None

    def counters(self) -> dict:
        return self._counters


class Serve(Front):
    """`camus switch serve` in a child process; its counters are what it prints on SIGTERM."""

    name = "serve"

    def __init__(self, impl: str, log: Path) -> None:
        self.impl, self.log = impl, log
        self.proc: subprocess.Popen | None = None
        self.output = ""

    def start(self, directory: Path, peers: dict[int, str]) -> str:
        self.directory = directory
        cmd = [sys.executable, "-m", "camus.cli", "switch", "serve", "--impl", self.impl,
               "--pipeline", str(directory), "--p4runtime", "none", "--ingress", "0=udp:127.0.0.1:0"]
        for n, peer in peers.items():
            cmd += ["--port", f"{n}={_udp(peer)}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, cwd=ROOT, env=python_env())
        follow(self.proc)
        lines = read_until_ready(self.proc, READY_SECONDS, "camus switch serve")
        ingress = next((line for line in lines if line.startswith(f"port {INGRESS_PORT}: udp ")), None)
        if ingress is None:
            raise RuntimeError(f"camus switch serve did not say its ingress: {lines}")
        return _udp(ingress.split(": ", 1)[1])

    def stop(self) -> None:
        if self.proc is None:
            return
        stop(self.proc)
        rest = "\n".join(iter_lines(self.proc))
        self.output = rest
        with open(self.log, "a") as fh:
            fh.write(f"--- {self.directory}\n{rest}\n")
        self.proc = None

    def counters(self) -> dict:
        return {"printed": self.output.strip()}


class Bmv2(Front):
    """bmv2 in a namespace, started once and given each run's program and entries."""

    name = "bmv2"

    def __init__(self) -> None:
        from controller.launch import Bmv2Process

        self.device = Bmv2Process()
        self.client = None

    def listen(self, port: int) -> str:
        return f"iface:{self.device.ns.outer(port)}"

    def start(self, directory: Path, peers: dict[int, str]) -> str:
        import json

        from controller.p4runtime_client import P4RuntimeClient
        from controller.push import push
        from pipeline import document

        pipeline = document.from_json(json.loads((directory / "pipeline.json").read_text()))
        entries = json.loads((directory / "entries.json").read_text())
        config = self.device.config(pipeline)
        if self.client is None:
            self.client = P4RuntimeClient.primary(self.device.p4runtime, 1, 10, timeout=30.0)
        push(self.client, config, entries)
        return f"iface:{self.device.ns.outer(INGRESS_PORT)}"

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.device.stop()


def open_front(kind: str, impl: str, out: Path) -> Front:
    if kind == "embedded":
        return Embedded(impl)
    if kind == "serve":
        return Serve(impl, out / "switch-serve.log")
    if kind == "bmv2":
        from controller.target import TargetUnavailable

        try:
            return Bmv2()
        except TargetUnavailable as exc:
            raise FrontError(f"bmv2: {exc}") from exc
    raise ValueError(f"unknown switch {kind!r} (one of {', '.join(FRONTS)})")
