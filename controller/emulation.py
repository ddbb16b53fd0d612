"""`camus net up`: a compiled network as real processes, namespaces and links in Mininet.

Each switch is one process (a Mininet `Switch` whose start and stop are ours, not Open
vSwitch's), bound to its Mininet interfaces as its numbered ports, started
without entries and then programmed over P4Runtime by this controller (`controller.push`,
the difference to what it holds: everything, the first time). The process is bmv2's
`simple_switch_grpc` running the generated program's fabric variant (compiled once by
`p4c-bm2-ss`; the controller also writes each switch's fabric control plane,
`controller.fabric_p4`) when asked for (`switch="bmv2"`, or `"auto"` where both tools are on PATH), each in
its switch's own namespace (its Thrift server binds every address) with P4Runtime on a Unix
socket and its interfaces' offloads off (`controller.host_io.no_offloads`), and otherwise `camus switch serve --fabric UP_PORTS` in the root namespace (camus's
software switch, which takes the fabric's egress decisions itself). Hosts are Mininet hosts, each in its own network namespace with one interface, so a
publisher and subscribers are ordinary programs on hosts (`controller.host_io` sends and
captures frames there).

Mininet is Debian's `mininet` package, which installs for the system Python; when camus runs
under another Python of the same version, its dist-packages directory is appended to the
path (after everything else, so nothing camus installed is shadowed). Needs root.

Names: Mininet names interfaces after nodes, and Linux limits them to 15 characters, so
switch i is `c<tag>s<i>` and host j `c<tag>h<j>` in Mininet (tag: this process, so two
networks never share a name); `Emulation.names` maps them back.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

from controller.p4runtime_client import ArbitrationError, P4RuntimeClient
from controller.push import TargetConfig, push
from controller.topology import Topology

DIST_PACKAGES = "/usr/lib/python3/dist-packages"


BMV2_TOOLS = ("p4c-bm2-ss", "simple_switch_grpc")


class EmulationError(RuntimeError):
    """Mininet is missing or unusable here, or a switch did not come up."""


def bmv2_missing() -> str | None:
    """None if p4c-bm2-ss and simple_switch_grpc are both on PATH, else what is missing."""
    missing = [t for t in BMV2_TOOLS if shutil.which(t) is None]
    return f"{' and '.join(missing)} not on PATH" if missing else None


def import_mininet():
    try:
        import mininet.net  # noqa: F401
    except ModuleNotFoundError:
        if not os.path.isdir(os.path.join(DIST_PACKAGES, "mininet")):
            raise EmulationError("Mininet is not installed (Debian: apt-get install mininet)") from None
        sys.path.append(DIST_PACKAGES)
        import mininet.net  # noqa: F401
    if os.geteuid() != 0:
        raise EmulationError("Mininet needs root (network namespaces and interfaces)")
    if shutil.which("mnexec") is None:
        raise EmulationError("Mininet's mnexec is not on PATH")
    import mininet
    return mininet


def usable() -> str | None:
    """None if `camus net up` can run here, else why not."""
    try:
        import_mininet()
    except EmulationError as exc:
        return str(exc)
    return None


class Emulation:
    """The network of DIR (written by `camus net compile`) up in Mininet."""

    def __init__(self, net_dir: str | Path, impl: str = "native", switch: str = "camus"):
        """`switch`: "camus" (the software switch, the default), "bmv2", or "auto": bmv2 where
        available. Not bmv2 by default: camus's switch needs no p4c and forwards several
        times faster (docs/routing.md); both deliver what `camus net run` computes."""
        if switch not in ("auto", "bmv2", "camus"):
            raise ValueError(f"switch must be auto, bmv2 or camus, not {switch!r}")
        if switch == "bmv2" and bmv2_missing():
            raise EmulationError(f"bmv2 asked for, but {bmv2_missing()}")
        self.bmv2 = switch == "bmv2" or (switch == "auto" and bmv2_missing() is None)
        self.bmv2_config = None  # (P4Info path, bmv2 JSON path) once compiled
        self.dir = Path(net_dir)
        doc = json.loads((self.dir / "network.json").read_text())
        self.topo = Topology.from_json(doc)
        self.up_port = doc.get("up_port", 511)
        self.impl = impl
        tag = os.getpid() % 1000
        self.mn_name = {s: f"c{tag}s{i}" for i, s in enumerate(self.topo.switches)}
        self.mn_name.update({h: f"c{tag}h{i}" for i, h in enumerate(self.topo.hosts)})
        self.names = {v: k for k, v in self.mn_name.items()}
        self.net = None
        self.procs: dict[str, subprocess.Popen] = {}
        self.p4rt: dict[str, str] = {}
        self.work = Path(tempfile.mkdtemp(prefix="camus-net-up-"))

    # ---- up and down ------------------------------------------------------------------

    def start(self) -> None:
        import_mininet()
        from mininet.net import Mininet
        from mininet.node import Switch

        emulation = self

        class CamusSwitch(Switch):
            """A Mininet switch whose data plane is a `camus switch serve` process."""

            def start(self, controllers):
                emulation._serve(emulation.names[self.name], self)

            def stop(self, deleteIntfs=True):
                emulation._stop_switch(emulation.names[self.name])
                super().stop(deleteIntfs)

        net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False,
                      autoStaticArp=False, waitConnected=False)
        self.net = net
        nodes = {}
        for i, s in enumerate(self.topo.switches):
            # bmv2 in a namespace of its own: its Thrift server binds every address.
            nodes[s] = net.addSwitch(self.mn_name[s], cls=CamusSwitch, dpid=f"{i + 1:016x}",
                                     inNamespace=self.bmv2)
        for j, h in enumerate(self.topo.hosts):
            n = j + 1
            nodes[h] = net.addHost(self.mn_name[h], ip=f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}/8")
        for a, pa, b, pb in self.topo.links():
            net.addLink(nodes[a], nodes[b], port1=pa, port2=pb)
        for h, (s, p) in self.topo.hosts.items():
            net.addLink(nodes[h], nodes[s], port1=0, port2=p)
        try:
            net.build()
            for h in self.topo.hosts:  # quiet hosts: no IPv6 chatter on the wire
                nodes[h].cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
            net.start()  # starts every CamusSwitch: serve, then push over P4Runtime
        except BaseException:
            self.stop()
            raise

    def _serve(self, s: str, node) -> None:
        if self.bmv2:
            self._serve_bmv2(s, node)
            return
        d = self.work / s
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.dir / "switches" / s / "pipeline.json", d / "pipeline.json")
        cmd = [sys.executable, "-m", "camus", "switch", "serve", "--pipeline", str(d),
               "--p4runtime", "127.0.0.1:0", "--impl", self.impl,
               "--fabric", ",".join(map(str, self.topo.up.get(s, ())))]
        for port in self.topo.ports[s]:
            cmd += ["--port", f"{port}=iface:{node.name}-eth{port}"]
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{node.name}-eth{port}.disable_ipv6=1"],
                           capture_output=True)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(self.work / f"{s}.log", "w"),
                                text=True)
        self.procs[s] = proc
        address = None
        timer = threading.Timer(60, proc.kill)
        timer.start()
        try:
            for line in proc.stdout:
                if line.startswith("p4runtime "):
                    address = line.split()[1]
                if line.strip() == "ready":
                    break
        finally:
            timer.cancel()
        if address is None or proc.poll() is not None:
            raise EmulationError(f"switch {s} did not start: {(self.work / f'{s}.log').read_text()}")
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # drain what follows
        self.p4rt[s] = address
        self.program(s)

    def program(self, s: str) -> None:
        """Make switch `s` hold DIR/switches/s/entries.json (over P4Runtime, the difference to
        what it holds): as it is on camus's switch, with the fabric control plane on bmv2."""
        entries = json.loads((self.dir / "switches" / s / "entries.json").read_text())
        if self.bmv2:
            from controller.fabric_p4 import switch_entries

            config, entries = TargetConfig.from_files(*self._compile_bmv2()), switch_entries(self.topo, s, entries)
        else:
            config = TargetConfig.software_switch(self.dir / "switches" / s)
        with P4RuntimeClient(self.p4rt[s], 1, 1, 20.0) as client:
            client.arbitrate()
            push(client, config, entries)

    def _compile_bmv2(self) -> tuple[Path, Path]:
        """The fabric program for every switch, compiled once by p4c-bm2-ss."""
        if self.bmv2_config is None:
            from compiler.p4 import write_p4
            from controller.launch import p4c_compile
            from pipeline import document

            d = self.work / "bmv2"
            pipeline = json.loads((self.dir / "switches" / self.topo.switches[0] / "pipeline.json").read_text())
            write_p4(document.from_json(pipeline), None, d, fabric=True)
            info, program = p4c_compile(d / "program.p4", d, error=EmulationError)
            self.bmv2_config = (info, program)
        return self.bmv2_config

    def _serve_bmv2(self, s: str, node) -> None:
        """bmv2 for switch `s`, in the switch node's namespace (Mininet moves its interfaces
        there), P4Runtime on a Unix socket the controller reaches from the root namespace."""
        self._compile_bmv2()
        sock = self.work / f"{s}.sock"
        cmd = ["simple_switch_grpc", "--device-id", "1", "--no-p4"]
        node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        ifaces = [f"{node.name}-eth{port}" for port in self.topo.ports[s]]
        # Before bmv2 opens them: with offloads on, libpcap's ring holds ~32 frames a port
        # and a burst beyond that is lost (controller.host_io.no_offloads).
        quiet = node.popen([sys.executable, "-m", "controller.host_io", "no-offload", *ifaces],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = quiet.communicate(timeout=60)[0]
        if quiet.returncode != 0:
            raise EmulationError(f"switch {s}: offloads not turned off: {out.strip()}")
        for port, iface in zip(self.topo.ports[s], ifaces):
            cmd += ["-i", f"{port}@{iface}"]
        cmd += ["--", "--grpc-server-addr", f"unix:{sock}"]
        log = open(self.work / f"{s}.log", "w")
        self.procs[s] = node.popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self.p4rt[s] = f"unix:{sock}"
        deadline = time.monotonic() + 60
        while True:
            if self.procs[s].poll() is not None:
                raise EmulationError(f"bmv2 for switch {s} exited: {(self.work / f'{s}.log').read_text()[-2000:]}")
            try:
                self.program(s)
                break
            except (grpc.RpcError, ArbitrationError) as exc:  # not listening yet
                if time.monotonic() > deadline:
                    raise EmulationError(f"bmv2 for switch {s} did not take its pipeline: {exc}") from None
                time.sleep(0.5)

    def _stop_switch(self, s: str) -> None:
        proc = self.procs.pop(s, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop(self) -> None:
        if self.net is not None:
            self.net.stop()
            self.net = None
        for s in list(self.procs):
            self._stop_switch(s)
        shutil.rmtree(self.work, ignore_errors=True)

    # ---- traffic ------------------------------------------------------------------------

    def host(self, h: str):
        return self.net.get(self.mn_name[h])

    def exchange(self, injects: list[tuple[str, str]], out_dir: str | Path, settle: float = 2.0,
                 udp_port: int | None = None) -> dict[str, int]:
        """Capture on every host, send each pcap from its host (in order), wait `settle`
        seconds of quiet, and write OUT/HOST.pcap for every host that received anything.
        Returns frames received per host."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        port = udp_port or self._udp_port()
        captures = {}
        for h in self.topo.hosts:
            node = self.host(h)
            path = self.work / f"{h}.pcap"
            captures[h] = (node.popen([sys.executable, "-m", "controller.host_io", "capture",
                                       f"{node.name}-eth0", str(path), "--udp-port", str(port)],
                                      stdout=subprocess.PIPE, text=True), path)
        for h, (proc, _) in captures.items():
            if proc.stdout.readline().strip() != "ready":
                raise EmulationError(f"capture on {h} did not start")
        for h, pcap in injects:
            node = self.host(h)
            sender = node.popen([sys.executable, "-m", "controller.host_io", "send",
                                 f"{node.name}-eth0", str(Path(pcap).resolve())],
                                stdout=subprocess.PIPE, text=True)
            sender.communicate(timeout=600)
        time.sleep(settle)
        counts = {}
        from switch.pcap import PcapReader

        for h, (proc, path) in captures.items():
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
            with open(path, "rb") as fh:
                n = sum(1 for _ in PcapReader(fh))
            if n:
                shutil.copy(path, out / f"{h}.pcap")
                counts[h] = n
        return counts

    def _udp_port(self) -> int:
        pipeline = json.loads((self.dir / "switches" / self.topo.switches[0] / "pipeline.json").read_text())
        return pipeline["applications"][0]["udp_port"]
