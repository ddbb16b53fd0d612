"""A real Apache Kafka cluster for the tests: three KRaft nodes run from the Maven jars.

Each node is one JVM (`kafka.Kafka`) with the broker and controller roles combined, as
`../shared/peers/kafka/kafka.sh` runs its single node, on loopback ports chosen free, with a
small heap and its data in a private directory. The three controllers form a static quorum
(`controller.quorum.voters`), so killing any one node leaves a majority: the cluster keeps
a controller and every partition (replication factor 3, min.insync.replicas 2) a leader.

The jars come from `KAFKA_LIBS` (`.ci/run` downloads them with `kafka.sh jars` into a
private copy of that directory and exports the path) or from `../shared/peers/kafka/libs`.
`missing()` says in one line why a cluster cannot run here (no java, no jars), for a skip.

The settings below shorten Kafka's production timings where the tests wait on them: a dead
broker is fenced after 4 s instead of 9 (its partitions' leadership moves then), and the
transaction coordinator looks for timed-out transactions every second instead of every 10
(a killed transactional client's open transaction is aborted that much sooner).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_LIBS = REPO.parent / "shared" / "peers" / "kafka" / "libs"
# Three JVMs share two cores with the tests: the serial collector (no GC threads of its own)
# and the C1 compiler only (no C2 compile threads, a faster start, a lower peak speed).
JVM_OPTS = ["-server", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true"]
READY = "Kafka Server started"
# Kafka's log4j2 settings for the nodes (INFO, which holds the READY line, to the node's log
# file through stdout) and for its tools (warnings only, to stderr, so a tool's stdout is
# its answer alone).
LOG4J = {
    "server": ["rootLogger.level = INFO", "logger.request.name = kafka.request.logger",
               "logger.request.level = WARN", "logger.state.name = state.change.logger",
               "logger.state.level = WARN"],
    "tools": ["rootLogger.level = WARN"],
}


def libs_dir() -> Path:
    """Where Kafka's jars are: KAFKA_LIBS, else ../shared/peers/kafka/libs (the
    checkout's sibling `shared`, as the other Java tests look for it)."""
    env = os.environ.get("KAFKA_LIBS")
    if env:
        return Path(env)
    # A worktree sits two levels below the directory that holds `shared` (…/wt/NAME),
    # a clone one level: try both.
    for base in (REPO.parent, REPO.parent.parent):
        candidate = base / "shared" / "peers" / "kafka" / "libs"
        if candidate.is_dir():
            return candidate
    return DEFAULT_LIBS


def missing() -> str | None:
    """Why a cluster cannot start on this machine (one line), or None."""
    if shutil.which("java") is None:
        return "needs java (and Kafka's jars: ../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)"
    libs = libs_dir()
    if not any(libs.glob("kafka_2.13-*.jar")):
        return (f"needs Kafka's jars in {libs} (../shared/peers/kafka/kafka.sh jars, which "
                f"needs mvn, or KAFKA_LIBS=DIR)")
    return None


def free_ports(n: int) -> list[int]:
    """n distinct loopback ports free now (bound all at once so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Node:
    def __init__(self, cluster: "KafkaCluster", node_id: int, port: int, controller_port: int):
        self.cluster = cluster
        self.node_id = node_id
        self.port = port
        self.controller_port = controller_port
        self.home = cluster.workdir / f"node{node_id}"
        self.data = self.home / "data"
        self.conf = self.home / "server.properties"
        self.log_path = self.home / "server.log"
        self.proc: subprocess.Popen | None = None

    def properties(self) -> dict[str, str]:
        c = self.cluster
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": c.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data),
            "num.partitions": "1",
            "default.replication.factor": str(c.replication),
            "min.insync.replicas": str(c.min_insync),
            "offsets.topic.replication.factor": str(c.replication),
            # Kafka's 50 internal partitions each cost a little at start and on every
            # failover; a test cluster has a handful of groups and transactional ids.
            "offsets.topic.num.partitions": "6",
            "transaction.state.log.replication.factor": str(c.replication),
            "transaction.state.log.min.isr": str(c.min_insync),
            "transaction.state.log.num.partitions": "6",
            "share.coordinator.state.topic.replication.factor": str(c.replication),
            "share.coordinator.state.topic.min.isr": str(c.min_insync),
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "unclean.leader.election.enable": "false",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.replica.fetchers": "1",
            "background.threads": "2",
            "log.retention.hours": "1",
            "broker.heartbeat.interval.ms": "1000",
            "broker.session.timeout.ms": "4000",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            "group.min.session.timeout.ms": "2000",
        }

    def write_conf(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))

    def format(self) -> None:
        self.write_conf()
        subprocess.run(self.cluster.java("-Xmx256m", "kafka.tools.StorageTool", "format",
                                         "--ignore-formatted", "-t", self.cluster.cluster_id,
                                         "-c", str(self.conf), tools=True),
                       check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        if self.alive():
            return
        self.log = open(self.log_path, "a")
        self.log.write(f"--- start {time.strftime('%H:%M:%S')}\n")
        self.log.flush()
        self.proc = subprocess.Popen(
            self.cluster.java(f"-Xmx{self.cluster.heap}", f"-Xms{self.cluster.heap}", *JVM_OPTS,
                              f"-Dkafka.logs.dir={self.home}", "kafka.Kafka", str(self.conf)),
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"Kafka node {self.node_id} exited; tail of {self.log_path}:\n"
                                   + self.tail())
            if port_open(self.port) and READY in self.current_log():
                return
            time.sleep(0.3)
        raise RuntimeError(f"Kafka node {self.node_id} not ready after {timeout:g} s; tail:\n"
                           + self.tail())

    def current_log(self) -> str:
        """The log since this node's last start."""
        text = self.log_path.read_text(errors="replace")
        return text[text.rfind("--- start "):]

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9: no controlled shutdown, nothing flushed."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after `timeout` seconds."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


class KafkaCluster:
    """`nodes` KRaft nodes (broker+controller) on loopback; `bootstrap` names them all."""

    def __init__(self, workdir: Path, nodes: int = 3, heap: str = "384m",
                 libs: Path | None = None) -> None:
        self.workdir = Path(workdir)
        self.libs = libs or libs_dir()
        self.heap = heap
        self.replication = min(3, nodes)
        self.min_insync = min(2, nodes)
        self.cluster_id = self._random_uuid()
        ports = free_ports(2 * nodes)
        self.nodes = [Node(self, i + 1, ports[2 * i], ports[2 * i + 1]) for i in range(nodes)]
        self.voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        self.bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @staticmethod
    def _random_uuid() -> str:
        # A KRaft cluster id is a UUID in Kafka's URL-safe base64 form, 22 characters.
        import base64

        return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

    def log4j(self, kind: str) -> Path:
        path = self.workdir / f"log4j2-{kind}.properties"
        if not path.exists():
            self.workdir.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join([
                "status = warn", "appender.out.type = Console", "appender.out.name = OUT",
                f"appender.out.target = {'SYSTEM_ERR' if kind == 'tools' else 'SYSTEM_OUT'}",
                "appender.out.layout.type = PatternLayout",
                "appender.out.layout.pattern = [%d] %p %m (%c)%n",
                "rootLogger.appenderRef.out.ref = OUT", *LOG4J[kind], ""]))
        return path

    def java(self, *args: str, tools: bool = False) -> list[str]:
        opts = [f"-Dlog4j2.configurationFile={self.log4j('tools' if tools else 'server')}"]
        # JVM options first, then the class path, then the main class and its arguments.
        jvm: list[str] = []
        i = 0
        while i < len(args) and args[i].startswith("-"):
            jvm.append(args[i])
            i += 1
        return ["java", *jvm, *opts, "-cp", f"{self.libs}/*", *args[i:]]

    def start(self, timeout: float = 180.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for n in self.nodes:
            n.format()
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            n.wait_ready(timeout)
        self.wait_brokers(len(self.nodes), timeout)

    def wait_brokers(self, count: int, timeout: float = 120.0) -> None:
        """Until the cluster's metadata lists `count` live brokers."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_alive()})
        deadline = time.monotonic() + timeout
        while True:
            try:
                md = admin.list_topics(timeout=5)
                if len(md.brokers) >= count:
                    return
            except Exception:  # noqa: BLE001 - the cluster is still coming up; try again
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not show {count} brokers in {timeout:g} s")
            time.sleep(0.5)

    def bootstrap_alive(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes if n.alive()) or self.bootstrap

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    def restart(self, node_id: int, timeout: float = 120.0) -> None:
        n = self.node(node_id)
        n.start()
        n.wait_ready(timeout)
        self.wait_brokers(sum(x.alive() for x in self.nodes), timeout)

    def close(self) -> None:
        # Kill rather than stop: a controlled shutdown of the last nodes waits on a quorum
        # that is leaving too, and the data goes with the directory anyway.
        for n in self.nodes:
            n.kill()
            if getattr(n, "log", None):
                n.log.close()

    def tool(self, main_class: str, *args: str, timeout: float = 120.0,
             input: str | None = None) -> subprocess.CompletedProcess:
        """Run one of Kafka's command-line tools against this cluster."""
        return subprocess.run(self.java("-Xmx256m", main_class, *args, tools=True),
                              capture_output=True, text=True, timeout=timeout, input=input)
