"""Devices the broker starts for itself: `camus switch serve` or bmv2's `simple_switch_grpc`.

`SwitchProcess` runs `camus switch serve` with no pipeline (the broker's target sets it over
P4Runtime), P4Runtime and its ingress on ephemeral 127.0.0.1 ports, and every egress port
N sent to 127.0.0.1:BASE+N (`--egress-range`). It reads the addresses from the lines the
switch prints before `ready`; `start()` again after a crash reuses them, so the target
reconnects to the same place.

`Bmv2Process` runs `simple_switch_grpc` inside a private network namespace (its Thrift
port binds every address, which must not reach the host's), with one veth pair per port
whose outer end stays in the host namespace for the broker to read and write (AF_PACKET),
and P4Runtime on a Unix socket (a path is reachable from any namespace). The Kafka program
is compiled by `p4c-bm2-ss` first. Both tools must be on PATH; neither is installable on the
development machines, so this path is exercised only where they exist (tests skip
elsewhere), while the same namespace and veth plumbing is exercised with `camus switch
serve` in place of bmv2 (`VethSwitchProcess`).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from controller.target import TargetUnavailable

REPO = Path(__file__).resolve().parents[1]
READY_SECONDS = 60.0  # bmv2 opens 64 interfaces: seconds idle, tens on a loaded machine


def egress_base() -> int:
    """A base for BASE+N listening ports, below Linux's ephemeral range (32768..60999) so
    that sockets bound to port 0 elsewhere never take it; chosen at random per broker."""
    return random.randrange(20000, 31000, 100)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the broker dies, however it dies (a broker
    killed with SIGKILL cannot stop its device, and an orphaned device would keep its ports).
    Linux sends it when the thread that started the device ends: the broker's loop thread or
    the target's watchdog, both as long-lived as the target."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the device outlives a killed broker


def _end(proc: subprocess.Popen | None) -> None:
    """SIGTERM, then SIGKILL if it has not exited in 5 s."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _python_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


class SwitchProcess:
    """`camus switch serve` as a child process reached over loopback."""

    def __init__(self, impl: str = "native", base: int | None = None) -> None:
        self.impl = impl
        self.egress_host, self.egress_base = "127.0.0.1", base if base is not None else egress_base()
        self.p4runtime: str = "127.0.0.1:0"
        self.ingress: tuple[str, int] = ("127.0.0.1", 0)
        self.proc: subprocess.Popen | None = None
        self.start()

    def command(self) -> list[str]:
        return [sys.executable, "-m", "camus.cli", "switch", "serve", "--impl", self.impl,
                "--p4runtime", self.p4runtime, "--ingress", f"udp:{self.ingress[0]}:{self.ingress[1]}",
                "--egress-range", f"udp:{self.egress_host}:{self.egress_base}"]

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     text=True, env=_python_env(), cwd=REPO,
                                     preexec_fn=_die_with_parent)
        lines = []
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
            if line.strip() == "ready":
                text = "\n".join(lines)
                self.p4runtime = re.search(r"^p4runtime (\S+)", text, re.M).group(1)
                host, port = re.search(r"^port 0: udp (\S+):(\d+)$", text, re.M).groups()
                self.ingress = (host, int(port))
                return
        self.stop()
        raise TargetUnavailable(f"camus switch serve did not start: {' | '.join(lines) or 'no output'}")

    def exited(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def stop(self) -> None:
        _end(self.proc)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


def _run(*cmd: str, stdin: str | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
    if done.returncode != 0:
        raise TargetUnavailable(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")


class Namespace:
    """A private network namespace with `ports` veth pairs: `<prefix>N` stays in the host
    namespace (the broker's side of port N), `<prefix>Ni` goes inside (the device's). The
    links are made by one `ip -batch` per side, so 64 pairs cost a handful of processes."""

    def __init__(self, ports: int) -> None:
        _sweep()
        tag = f"{os.getpid() % 100000}{random.randrange(1000):03d}"
        # The namespace's name carries the whole pid (a veth name has room for 15 characters
        # only), so that a later broker can tell an abandoned one.
        self.name, self.prefix, self.ports = f"camus-{os.getpid()}-{tag}", f"cm{tag}p", ports
        _run("ip", "netns", "add", self.name)
        try:
            # No IPv6 on either end, set before a link is up: no router solicitations or MLD
            # reports among the frames. Inside, every link moved in takes the default.
            _run(*self.exec(), "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                 "net.ipv6.conf.default.disable_ipv6=1")
            _run("ip", "-batch", "-", stdin="".join(
                f"link add {self.outer(n)} type veth peer name {self.inner(n)}\n"
                f"link set {self.inner(n)} netns {self.name}\n" for n in range(ports)))
            for n in range(ports):
                _quiet_ipv6(self.outer(n))
            _run("ip", "-batch", "-", stdin="".join(
                f"link set {self.outer(n)} mtu 9000 up\n" for n in range(ports)))
            _run("ip", "-n", self.name, "-batch", "-", stdin="link set lo up\n" + "".join(
                f"link set {self.inner(n)} mtu 9000 up\n" for n in range(ports)))
        except BaseException:
            self.close()
            raise

    def outer(self, n: int) -> str:
        return f"{self.prefix}{n}"

    def inner(self, n: int) -> str:
        return f"{self.prefix}{n}i"

    def exec(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def close(self) -> None:
        subprocess.run(["ip", "-force", "-batch", "-"], capture_output=True, text=True,
                       input="".join(f"link del {self.outer(n)}\n" for n in range(self.ports)))
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def _sweep() -> None:
    """Delete the namespaces of brokers that no longer run (one killed with SIGKILL cannot
    delete its own; its device died with it). Deleting a namespace deletes its veth ends,
    and with them their peers in the host's namespace."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name, pid in re.findall(r"^(camus-(\d+)-\d+)", listed, re.M):
        if not os.path.exists(f"/proc/{pid}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def _quiet_ipv6(ifname: str) -> None:
    try:
        Path(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6").write_text("1")
    except OSError:
        pass


class _NamespacedDevice:
    """A device process inside a `Namespace`, its ports the veths, P4Runtime on a Unix socket."""

    ports = 16

    def __init__(self) -> None:
        self.ns = Namespace(self.ports)
        self.tmp = Path(tempfile.mkdtemp(prefix="camus-device-"))
        self.p4runtime = f"unix:{self.tmp / 'p4runtime.sock'}"
        self.proc: subprocess.Popen | None = None
        self.log = open(self.tmp / "device.log", "w+")
        try:
            self.start()
        except BaseException:
            self.stop()
            raise

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        sock = self.tmp / "p4runtime.sock"
        if sock.exists():
            sock.unlink()
        self.proc = subprocess.Popen([*self.ns.exec(), *self.command()], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=_python_env(), cwd=REPO, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline and self.proc.poll() is None:
            if sock.exists():
                return
            time.sleep(0.05)
        self.log.seek(0)
        raise TargetUnavailable(f"{self.command()[0]} did not start (exit status {self.proc.poll()}): {self.log.read()[-600:]}")

    def exited(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def stop(self) -> None:
        _end(self.proc)
        self.ns.close()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class VethSwitchProcess(_NamespacedDevice):
    """`camus switch serve` in a namespace behind veths: the plumbing bmv2 runs on, with a
    switch that runs here."""

    def __init__(self, impl: str = "native") -> None:
        self.impl = impl
        super().__init__()

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "camus.cli", "switch", "serve", "--impl", self.impl,
               "--p4runtime", self.p4runtime]
        for n in range(self.ports):
            cmd += ["--port", f"{n}=iface:{self.ns.inner(n)}"]
        return cmd


P4C, BMV2 = "p4c-bm2-ss", "simple_switch_grpc"


def bmv2_missing() -> str | None:
    """Why bmv2 cannot run here, or None."""
    missing = [t for t in (P4C, BMV2) if shutil.which(t) is None]
    return f"{' and '.join(missing)} not on PATH" if missing else None


def p4c_cache() -> Path:
    return Path(os.environ.get("CAMUS_P4C_CACHE") or Path.home() / ".cache" / "camus" / "p4c")


def p4c_compile(program: Path, out: Path, error=TargetUnavailable) -> tuple[Path, Path]:
    """`program` (a P4_16 v1model program) compiled by p4c-bm2-ss: (P4Info, bmv2 JSON) in
    `out`. p4c takes seconds to minutes on a loaded machine, longer than a broker may take
    to start, and the broker's program changes only with camus, so the outputs are kept in
    `p4c_cache()` under a hash of the program and the compiler binary; `error(message)` is
    raised when p4c refuses the program."""
    p4c = Path(shutil.which(P4C) or P4C).resolve()
    stat = p4c.stat()
    key = hashlib.sha256(program.read_bytes() + f"{p4c}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    cached = p4c_cache() / key[:32]
    names = ("p4c.p4info.txtpb", "program.json")
    out.mkdir(parents=True, exist_ok=True)
    work = None
    try:
        if not all((cached / n).exists() for n in names):
            work = Path(tempfile.mkdtemp(prefix="camus-p4c-"))
            try:
                done = subprocess.run([str(p4c), "--arch", "v1model", "--p4runtime-files",
                                       str(work / names[0]), "-o", str(work / names[1]), str(program)],
                                      capture_output=True, text=True, timeout=1200)
            except subprocess.TimeoutExpired:
                raise error(f"p4c-bm2-ss did not finish {program.name} in 20 minutes") from None
            if done.returncode != 0:
                raise error(f"p4c-bm2-ss refused {program.name}: {done.stderr.strip()[-2000:]}")
            try:  # into the cache in one rename (a concurrent compile of the same program may win)
                cached.parent.mkdir(parents=True, exist_ok=True)
                work.rename(cached)
            except OSError:
                if not all((cached / n).exists() for n in names):
                    cached = work  # no cache here: this compile's outputs
        for n in names:
            shutil.copyfile(cached / n, out / n)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return out / names[0], out / names[1]


class Bmv2Process(_NamespacedDevice):
    """`simple_switch_grpc` on the Kafka program as p4c compiles it."""

    # More than the 16 of `camus switch serve` (a Python reader per port): every view and
    # group member is a port, and broker tests hold tens of them at once.
    ports = 64

    def __init__(self) -> None:
        why = bmv2_missing()
        if why:
            raise TargetUnavailable(f"{why} (neither is in a package registry; install p4c and bmv2)")
        super().__init__()

    def start(self) -> None:
        # Offloads off on bmv2's ends before it opens them: with TSO/GSO on (a veth's
        # default), libpcap sizes its ring for 64 KiB frames and holds about 32, and a burst
        # beyond that is lost at bmv2's input (controller.host_io.no_offloads). Done on every
        # start: cheap, and a restart after a crash gets the same ring.
        done = subprocess.run([*self.ns.exec(), sys.executable, "-m", "controller.host_io", "no-offload",
                               *(self.ns.inner(n) for n in range(self.ports))],
                              capture_output=True, text=True, env=_python_env(), cwd=REPO)
        if done.returncode != 0:
            raise TargetUnavailable(f"offloads not turned off on bmv2's ports: {done.stderr.strip()[-600:]}")
        super().start()

    def config(self, pipeline):
        """The device config for `pipeline` (a `pipeline.model.Pipeline`): its P4 program
        compiled by p4c."""
        from compiler.p4 import write_p4
        from controller.push import TargetConfig

        out = self.tmp / "p4c"
        write_p4(pipeline, None, out)
        return TargetConfig.from_files(*p4c_compile(out / "program.p4", out))

    def command(self) -> list[str]:
        # Device id 1, the controller's default (bmv2's own default is 0); no program until
        # the target sets one. P4Runtime on a Unix socket: gRPC takes "unix:PATH" addresses.
        cmd = [shutil.which(BMV2), "--device-id", "1", "--no-p4"]
        for n in range(self.ports):
            cmd += ["-i", f"{n}@{self.ns.inner(n)}"]
        return [*cmd, "--", "--grpc-server-addr", self.p4runtime]
