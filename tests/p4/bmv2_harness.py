"""One long-running P4Runtime device behind veth pairs, reprogrammed per rule set: the
harness of the bmv2 differential test (tests/p4/test_bmv2_differential.py) and of
bench/bmv2_pps.py.

`Device("bmv2")` is `simple_switch_grpc --no-p4` (controller.launch.Bmv2Process): a private
network namespace holding one end of 16 veth pairs, the other ends (port N's) in ours, and
P4Runtime on a Unix socket. `Device("switch")` is `camus switch serve` on the very same
plumbing (controller.launch.VethSwitchProcess), which lets the harness itself be checked
where bmv2 is absent. One device serves a whole test session:

* a program is set once per spec (`config`): for bmv2, p4c's compile of the static program
  (`compile_rules(spec, [], static=True)`: its pipeline depends on the spec only, so every
  rule set of that spec fits it), cached per (pipeline, slots); for camus's switch, the IR;
* a rule set costs only entry writes: `program` is `controller.push.push`, which reads what
  the device holds and writes the difference (the controller's own diff);
* frames go in on port 0's veth and come back on every port's through AF_PACKET sockets.

Matching copies to inputs. Every input frame is tagged with a unique IPv4 identification
(`tag`), which every copy keeps (the program rewrites lengths and checksums, never the
identification), so outputs are grouped per input frame and per port (`by_tag`), whatever
the order between frames: bmv2 keeps order within a port for packets of one pass, but a
MoldUDP64 packet with several subscription messages is resubmitted, i.e. queued again
behind later arrivals, so its copies may come after those of frames sent later. Within
one input frame, copies on one port keep their order (IPv4 fragments of one datagram share
an identification and are compared as one ordered list per port).

No normalisation: a veth pads nothing (a 43-byte frame arrives as 43 bytes, and bmv2 sends
what its deparser and `truncate` leave), so bytes are compared as they are, including
frames shorter than Ethernet's 60-byte minimum and Ethernet padding after the IPv4 datagram
(which routed frames keep and rewritten copies drop, on both targets).

Pacing: frames are sent in windows of `window` and the next window waits for the copies the
reference predicts for everything sent so far (or `timeout`), so no port's egress queue
(bmv2: 64 packets) overflows; after the last window, `settle` seconds catch copies that no
reference predicted.
"""

from __future__ import annotations

import selectors
import socket
import struct
import threading
import time
from collections import defaultdict
from pathlib import Path

ETH_P_ALL, PACKET_OUTGOING = 0x0003, 4
# The device's port numbers, one per veth pair of controller.launch's namespace (16): 0 is
# the input; the high ones make every bit of the program's 9-bit one-hot matter (docs/p4.md,
# "Port bitmaps without run-time shifts"). Not 511: simple_switch's drop port.
PORT_NUMBERS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 63, 130, 256, 300, 510)


def tag(frame: bytes, value: int) -> bytes:
    """`frame` (Ethernet + IPv4) with IPv4 identification `value` and its checksum fixed."""
    from switch.packet import ipv4_checksum

    ihl = (frame[14] & 0x0F) * 4
    ip = bytearray(frame[14:14 + ihl])
    struct.pack_into("!H", ip, 4, value)
    struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
    return frame[:14] + bytes(ip) + frame[14 + ihl:]


def tag_of(frame: bytes) -> int:
    return struct.unpack_from("!H", frame, 18)[0] if len(frame) >= 20 else -1


def by_tag(copies: list[tuple[int, bytes]]) -> dict[int, dict[int, list[bytes]]]:
    """tag -> port -> the copies in order."""
    out: dict[int, dict[int, list[bytes]]] = defaultdict(lambda: defaultdict(list))
    for port, frame in copies:
        out[tag_of(frame)][port].append(frame)
    return {t: dict(ports) for t, ports in out.items()}


class Wire:
    """AF_PACKET sockets on the host ends of a `controller.launch.Namespace`'s veths: one to
    send into port 0, one per port to receive (port 0's too: a copy sent back out of the
    input port is a copy), read by one thread."""

    def __init__(self, ns, numbers: tuple[int, ...] = PORT_NUMBERS) -> None:
        self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing
        self.tx.bind((ns.outer(0), 0))
        self.rx: dict[socket.socket, int] = {}
        self.selector = selectors.DefaultSelector()
        for i, port in enumerate(numbers):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((ns.outer(i), 0))
            try:
                s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
            s.setblocking(False)
            self.rx[s] = port
            self.selector.register(s, selectors.EVENT_READ)
        self.got: list[tuple[int, bytes]] = []
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._read, name="bmv2-harness-rx", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.closed:
            for key, _ in self.selector.select(0.1):
                while True:
                    try:
                        data, addr = key.fileobj.recvfrom(65536)
                    except (BlockingIOError, OSError):
                        break
                    if addr[2] == PACKET_OUTGOING:
                        continue  # our own frame leaving port 0
                    with self.cond:
                        self.got.append((self.rx[key.fileobj], data))
                        self.cond.notify_all()

    def take(self) -> list[tuple[int, bytes]]:
        with self.cond:
            got, self.got = self.got, []
        return got

    def exchange(self, frames: list[bytes], expected: list[int], window: int = 32,
                 timeout: float = 3.0, settle: float = 0.15, alone: frozenset[int] = frozenset(),
                 idle: float = 0.05) -> list[tuple[int, bytes]]:
        """Send `frames` into port 0, `expected[i]` copies predicted for frame i; every copy
        that came back, as (port, bytes) in arrival order.

        Frames whose indexes are in `alone` go in a window of their own, and the next frame
        waits until they are done: their copies are in, or `idle` seconds have passed if
        none is predicted. That is for state: a MoldUDP64 packet of several messages is
        resubmitted once per message, and bmv2 queues a resubmitted pass behind the frames
        that arrived meanwhile, so a frame sent too early would be evaluated between two
        messages of the packet before it, where every reference evaluates it after both."""
        stray = self.take()
        if stray:
            raise AssertionError(f"{len(stray)} copies arrived between exchanges, e.g. {stray[0]!r}")
        owed, batch = 0, []
        for i, frame in enumerate(frames):
            if i in alone and batch:
                self._wait(owed, timeout)
                batch = []
            self.tx.send(frame)
            owed += expected[i]
            batch.append(i)
            if i in alone or len(batch) == window or i == len(frames) - 1:
                self._wait(owed, timeout)
                if i in alone and not expected[i]:
                    time.sleep(idle)
                batch = []
        time.sleep(settle)
        return self.take()

    def stream(self, frames: list[bytes], expected: list[int], inflight: int = 48,
               timeout: float = 3.0) -> tuple[list[tuple[int, bytes]], float]:
        """For throughput: send while fewer than `inflight` predicted copies are owed (a
        sliding window, so the device never idles for want of input and no egress queue
        overflows); the copies, and the seconds from the first send to the last copy (or
        to the last progress, if copies are missing)."""
        stray = self.take()
        if stray:
            raise AssertionError(f"{len(stray)} copies arrived between exchanges")
        owed, start = 0, time.perf_counter()
        for frame, n in zip(frames, expected):
            if owed - len(self.got) >= inflight:
                self._wait(owed - inflight + 1, timeout)
            self.tx.send(frame)
            owed += n
        self._wait(owed, timeout)
        took = time.perf_counter() - start
        return self.take(), took

    def _wait(self, count: int, timeout: float) -> None:
        """Until `count` copies are in, or no copy came for `timeout` seconds."""
        with self.cond:
            seen, deadline = len(self.got), time.monotonic() + timeout
            while len(self.got) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.cond.wait(left)
                if len(self.got) != seen:
                    seen, deadline = len(self.got), time.monotonic() + timeout

    def close(self) -> None:
        self.closed = True
        self.thread.join(2)
        for s in [self.tx, *self.rx]:
            s.close()


def p4c_config(pipeline, slots: int, work: Path):
    """The bmv2 device config of `pipeline`'s program, compiled by the controller's own
    `p4c_compile` (cached, a refusal raises). Warnings do not fail here: the programs'
    cleanliness is tests/p4/test_p4c_programs.py's and test_bmv2.py's to check; here only
    what the program does is compared."""
    from compiler.p4 import write_p4
    from controller.launch import p4c_compile
    from controller.push import TargetConfig

    work.mkdir(parents=True, exist_ok=True)
    write_p4(pipeline, None, work, slots)
    return TargetConfig.from_files(*p4c_compile(work / "program.p4", work))


def _numbered(cls):
    """`cls` (a controller.launch device) with veth pair i as port PORT_NUMBERS[i]."""

    class Numbered(cls):
        ports = len(PORT_NUMBERS)  # the namespace's veth pairs (Bmv2Process has 64 for the broker)

        def command(self) -> list[str]:
            names = {self.ns.inner(i): n for i, n in enumerate(PORT_NUMBERS)}
            out, renumbered = [], 0
            for arg in super().command():  # `-i N@IFACE` (bmv2), `--port N=iface:IFACE` (camus)
                _, sep, rest = arg.partition("@" if cls.__name__ == "Bmv2Process" else "=iface:")
                if sep and rest in names:
                    arg, renumbered = f"{names[rest]}{sep}{rest}", renumbered + 1
                out.append(arg)
            assert renumbered == len(PORT_NUMBERS), out
            return out

    return Numbered


class Device:
    """bmv2 (`kind` "bmv2") or camus's switch ("switch") in a namespace behind veths,
    programmed through P4Runtime by camus's controller."""

    def __init__(self, kind: str, work: Path) -> None:
        from controller.launch import Bmv2Process, VethSwitchProcess
        from controller.p4runtime_client import P4RuntimeClient

        self.kind, self.work = kind, work
        self.proc = _numbered(Bmv2Process if kind == "bmv2" else VethSwitchProcess)()
        self.wire = self.client = None
        try:
            self.wire = Wire(self.proc.ns)
            self.client = P4RuntimeClient.primary(self.proc.p4runtime, timeout=60)
        except BaseException:
            self.close()
            raise
        self._configs: dict = {}
        self.compiles = 0  # p4c runs
        self.pushes = 0  # rule sets written
        self.cells_written = 0  # register cells zeroed through write_cells

    def config(self, pipeline, slots: int = 8):
        """The device config for `pipeline`, compiled once per distinct (pipeline, slots)."""
        from pipeline import document

        key = (document.dumps(pipeline), slots if self.kind == "bmv2" else None)
        if key not in self._configs:
            if self.kind == "bmv2":
                self._configs[key] = p4c_config(pipeline, slots, self.work / f"p4c-{len(self._configs)}")
                self.compiles += 1
            else:
                from controller.remote import software_switch_config

                self._configs[key] = software_switch_config(pipeline)
        return self._configs[key]

    def program(self, pipeline, entries: dict, slots: int = 8, fresh: bool = False):
        """Make the device run `pipeline`'s program (set only if it changed, or always when
        `fresh`: a program set anew starts with every register cell 0) holding exactly
        `entries`; the push report."""
        from controller.push import push

        self.pushes += 1
        try:
            return push(self.client, self.config(pipeline, slots), entries, pipeline=pipeline, fresh=fresh)
        except Exception:
            if self.exited():
                raise AssertionError(f"{self.kind} exited ({self.proc.proc.returncode}) before "
                                     f"rule set {self.pushes}; its log ends:\n{self.log_tail()}") from None
            raise

    def write_cells(self, register: str, first: int, count: int) -> None:
        """Zero register cells first..first+count-1 the device's own way, for a device whose
        P4Runtime server refuses register writes (bmv2's PI: "Register writes are not
        supported yet"): bmv2's Thrift runtime, through its CLI inside the device's network
        namespace (simple_switch_grpc serves Thrift on 9090 there)."""
        import subprocess

        if self.kind != "bmv2":
            raise NotImplementedError(f"{self.kind}: cells are written through P4Runtime")
        lines = "".join(f"register_write {register} {i} 0\n" for i in range(first, first + count))
        run = subprocess.run([*self.proc.ns.exec(), "simple_switch_CLI", "--thrift-port", "9090"],
                             input=lines, capture_output=True, text=True, timeout=60)
        if run.returncode != 0 or "Error" in run.stdout or "Invalid" in run.stdout:
            raise AssertionError(f"simple_switch_CLI could not write {register}: {run.stdout[-500:]}{run.stderr[-500:]}")
        self.cells_written += count

    def log_tail(self, n: int = 3000) -> str:
        self.proc.log.flush()
        return (self.proc.tmp / "device.log").read_text(errors="replace")[-n:]

    def run(self, frames: list[bytes], expected: list[int], **pacing) -> list[tuple[int, bytes]]:
        return self.wire.exchange(frames, expected, **pacing)

    def exited(self) -> bool:
        return self.proc.exited()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.wire is not None:
            self.wire.close()
        try:  # the device's log outlives it, beside the p4c outputs
            self.work.mkdir(parents=True, exist_ok=True)
            (self.work / "device.log").write_text(self.log_tail(1 << 20))
        except OSError:
            pass
        self.proc.stop()
