"""kcat and Kafka's own Java tools against `camus serve`.

kcat (Debian package `kcat`) and the Java tools (jars from ../shared/peers/kafka/kafka.sh
jars, or KAFKA_LIBS=DIR) are found on this machine or the tests skip; the Java ones are
marked `java` so they can be deselected.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

from .conftest import unique

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="needs kcat (apt-get install kcat)")


def kcat(broker, *args, stdin: str | None = None, timeout: float = 30) -> str:
    out = subprocess.run([KCAT, "-b", broker.bootstrap, *args], input=stdin, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout


@needs_kcat
def test_kcat_metadata_produce_consume_and_group(broker):
    topic = unique("kcat")
    kcat(broker, "-P", "-t", topic, "-p", "0", stdin="".join(f"m{i}\n" for i in range(10)))
    assert re.search(rf'topic "{topic}" with \d+ partitions', kcat(broker, "-L", "-t", topic))
    got = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o:%s\n")
    assert got.split() == [f"{i}:m{i}" for i in range(10)]
    group = unique("kg")
    # A balanced consumer: stop at the end of every assigned partition (-e).
    got = kcat(broker, "-G", group, topic, "-o", "beginning", "-e", "-f", "%s\n",
               "-X", "session.timeout.ms=6000")
    assert sorted(got.split()) == sorted(f"m{i}" for i in range(10))


def kafka_libs() -> pathlib.Path | None:
    libs = pathlib.Path(os.environ.get("KAFKA_LIBS") or
                        pathlib.Path(__file__).resolve().parents[3] / "shared/peers/kafka/libs")
    if shutil.which("java") is None or not any(libs.glob("kafka-clients-*.jar")):
        return None
    return libs


def java_tool(libs, *args, timeout: float = 90) -> str:
    out = subprocess.run(["java", "-Xmx512m", "-cp", f"{libs}/*", *args], capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.java
def test_java_producer_performance_and_end_to_end_latency(broker):
    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    topic = unique("jperf")
    out = java_tool(libs, "org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server",
                    broker.bootstrap, "--topic", topic, "--num-records", "20000", "--record-size",
                    "100", "--throughput", "-1", "--producer-props", "acks=all",
                    "compression.type=lz4")
    assert re.search(r"^20000 records sent", out, re.M), out
    # ConsumerPerformance joins a group (subscribe), so this is the Java group protocol too.
    out = java_tool(libs, "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server",
                    broker.bootstrap, "--topic", topic, "--num-records", "20000", "--group",
                    unique("jgroup"), "--timeout", "30000")
    consumed = out.strip().splitlines()[-1].split(", ")[4]  # data.consumed.in.nMsg
    assert consumed == "20000", out
    out = java_tool(libs, "org.apache.kafka.tools.EndToEndLatency", "--bootstrap-server",
                    broker.bootstrap, "--topic", unique("je2e"), "--num-records", "300",
                    "--producer-acks", "1", "--record-size", "100")
    assert "Avg latency" in out, out
