"""dnsmasq, the DNS server behind the switch: started and stopped by the demo on loopback.

Nothing of the machine's configuration is read or touched: no /etc/dnsmasq.conf
(`--conf-file=/dev/null`), no /etc/resolv.conf (`--no-resolv`: no upstream), no /etc/hosts
(`--no-hosts`); the names come from the demo's own hosts file, the pid file and the query log
are in the run's directory, and it listens on 127.0.0.1 only, on a port of its own.
The log (`--log-queries`) is the server's load: one `query[TYPE] NAME from ADDR` line per
query it received.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import dns.exception
import dns.message
import dns.query

from apps.hicn.processes import stop

READY_SECONDS = 10.0
# A name of the server's own, queried until it answers: not one of the demo's names, so its
# log lines are told apart from the demo's queries.
PROBE_NAME, PROBE_ADDRESS = "ready.probe", "127.0.0.53"
QUERY_LINE = re.compile(r"dnsmasq\[\d+\]: query\[(\w+)\] (\S+) from ")


PORT_ATTEMPTS = 5


class PortTaken(RuntimeError):
    """The port chosen for dnsmasq was taken before it bound it."""


class ServerUnavailable(RuntimeError):
    """dnsmasq is not installed here: the demo says so in one line."""


def find_dnsmasq() -> str | None:
    # Debian installs it in /usr/sbin, which is not on every user's PATH.
    return shutil.which("dnsmasq") or shutil.which("dnsmasq", path="/usr/sbin:/sbin")


def free_port() -> int:
    """A port nothing on 127.0.0.1 uses now for UDP or TCP (dnsmasq serves both, and cannot be
    told to pick a port itself). Another process may still take it before dnsmasq binds it:
    Dnsmasq then tries another."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = udp.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port


class Dnsmasq:
    def __init__(self, directory: Path, hosts: str) -> None:
        binary = find_dnsmasq()
        if binary is None:
            raise ServerUnavailable("dnsmasq is not installed (Debian: apt-get install dnsmasq-base)")
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.hosts = directory / "hosts"
        self.hosts.write_text(hosts + f"{PROBE_ADDRESS} {PROBE_NAME}\n")
        self.log = directory / "dnsmasq.log"
        self.log.unlink(missing_ok=True)
        for attempt in range(PORT_ATTEMPTS):
            self.port = free_port()
            self.address = ("127.0.0.1", self.port)
            self.proc = subprocess.Popen(self._command(binary), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                self._wait_ready()
                return
            except PortTaken:
                if attempt == PORT_ATTEMPTS - 1:
                    raise

    def _command(self, binary: str) -> list[str]:
        d = self.directory
        return [binary, "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
                f"--addn-hosts={self.hosts}", f"--port={self.port}", "--listen-address=127.0.0.1",
                "--bind-interfaces", "--keep-in-foreground", f"--pid-file={d / 'dnsmasq.pid'}",
                "--log-queries", f"--log-facility={self.log}",
                # As root dnsmasq would switch to user nobody, who cannot write the log here.
                f"--user={pwd.getpwuid(os.getuid()).pw_name}", f"--group={grp.getgrgid(os.getgid()).gr_name}"]

    def _wait_ready(self) -> None:
        """Until dnsmasq answers the probe name (it has read the hosts file)."""
        deadline = time.monotonic() + READY_SECONDS
        while True:
            if self.proc.poll() is not None:
                said = self.proc.stdout.read().strip()
                if "Address already in use" in said:
                    raise PortTaken(said)
                raise RuntimeError(f"dnsmasq exited (code {self.proc.returncode}): {said}")
            try:
                r = dns.query.udp(dns.message.make_query(PROBE_NAME, "A"), "127.0.0.1",
                                  port=self.port, timeout=0.5)
                if r.answer:
                    return
            except (dns.exception.Timeout, ConnectionRefusedError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"dnsmasq did not answer on 127.0.0.1:{self.port} within {READY_SECONDS:.0f} s")
            time.sleep(0.05)

    def stop(self) -> None:
        stop(self.proc, timeout=10.0)

    def queries_logged(self) -> list[tuple[str, str]]:
        """(type, name) of every query dnsmasq logged but the readiness probes; read after stop(),
        when dnsmasq has written its log out."""
        text = self.log.read_text() if self.log.exists() else ""
        return [m.groups() for m in QUERY_LINE.finditer(text) if m.group(2) != PROBE_NAME]
