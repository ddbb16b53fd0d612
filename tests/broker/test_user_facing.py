"""What a user types gets a clear one-line answer, and what the broker does can be seen
(issue 13, items 7, 9, 10 and 11): `camus serve` and `camus topic` errors, `camus topic
list|describe`, schema misses in the log and in DescribeConfigs, view partition counts,
topic configs camus does not implement."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

from .conftest import REPO, unique, wait_until  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402


def camus(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "camus.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def one_line_error(out: subprocess.CompletedProcess, *words: str) -> str:
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_serve_explains_bad_starts_in_one_line(broker, tmp_path):
    one_line_error(camus("serve", "--listen", broker.bootstrap), "address already in use",
                   str(broker.port))
    one_line_error(camus("serve", "--listen", "127.0.0.1"), "HOST:PORT")
    one_line_error(camus("serve", "--listen", "127.0.0.1:70000"), "0..65535")
    one_line_error(camus("serve", "--target", "bmv3:x"), "--target", "embedded:native")
    one_line_error(camus("serve", "--target", "embedded:rust"), "native, python")
    one_line_error(camus("serve", "--config", str(tmp_path / "none.json")), "No such file")
    (tmp_path / "bad.json").write_text('{"partitions": 2,}')
    one_line_error(camus("serve", "--config", str(tmp_path / "bad.json")), "bad.json:1:", "not JSON")
    (tmp_path / "neg.json").write_text('{"fetch.max.bytes": 0}')
    one_line_error(camus("serve", "--config", str(tmp_path / "neg.json")), "fetch.max.bytes")
    assert camus("--version").stdout.startswith("camus ")


def test_topic_commands_take_options_anywhere_and_say_what_went_wrong(broker):
    b = ["--bootstrap-server", broker.bootstrap]
    src, view = unique("orders"), unique("cheap")
    out = camus("topic", "create", *b, "--partitions", "2", src, "--config",
                "camus.schema=stock:str8=$.stock,price:u32=$.Price")  # options before and after
    assert out.returncode == 0, out.stderr
    one_line_error(camus("topic", "create", view, *b, "--config", f"camus.source={src}",
                         "--config", 'camus.filter=stock == "TOOLONGNAME"'), "field 'stock' holds 8")
    out = camus("topic", "create", view, *b, "--partitions", "3", "--config",
                f"camus.source={src}", "--config", "camus.filter=price < 5")
    assert out.returncode == 0 and "warning: a view has its source's partitions: 2, not 3" in out.stderr
    one_line_error(camus("topic", "delete", unique("nosuch"), *b), "does not exist")
    one_line_error(camus("topic", "list", "--bootstrap-server", "127.0.0.1:1"),
                   "cannot connect to 127.0.0.1:1", "camus serve running")

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):  # `$.Price` does not match `price`: every record misses the field
        p.produce(src, json.dumps({"stock": "GOOGL", "price": 10 + i}).encode(), partition=0)
    assert p.flush(10) == 0
    rows = [line.split("\t") for line in camus("topic", "list", *b).stdout.splitlines()]
    assert [view, "2", f"view of {src} where price < 5"] in rows
    described = camus("topic", "describe", src, *b).stdout
    assert "misses.price: 3" in described and "misses.stock: 0" in described
    assert "0: offsets 0..3" in described and "records_in: 3" in described
    assert "switch_port:" in camus("topic", "describe", view, *b).stdout
    assert wait_until(lambda: f"topic {src!r}: 3 record(s) had no value for schema field "
                              "'price' (source $.Price)" in broker.stderr())


def test_misses_are_described_to_any_admin_client(broker):
    topic = unique("m")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={"camus.schema": "n:u32=$.n"}))
    # Fields are read (and misses counted) for topics that have a view or group member.
    create(broker.bootstrap, NewTopic(unique("mv"), config={"camus.source": topic,
                                                           "camus.filter": "n > 0"}))
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic, b'{"m": 1}')
    p.produce(topic, b'{"n": 1}')
    assert p.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["camus.stats.misses.n"].value == "1"
    assert configs["camus.stats.misses.n"].is_read_only


@pytest.mark.parametrize("config,words", [
    ({"cleanup.policy": "shred"}, "expected delete, compact or compact,delete"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "from 0 to 1"),
    ({"segment.bytes": "0"}, "at least 14"),
    ({"retention.ms": "-5"}, "-1 or more"),
])
def test_configs_camus_cannot_honour_are_refused(broker, config, words):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as err:
        next(iter(admin.create_topics([NewTopic(unique("c"), 1, 1, config=config)]).values())).result(10)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert words in err.value.args[0].str()


def test_retention_bytes_zero_keeps_the_active_segment_readable(broker):
    topic = unique("r0")
    create(broker.bootstrap, NewTopic(topic, 1, 1, config={"retention.bytes": "0"}))
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce(topic, str(i).encode(), partition=0)
    assert p.flush(10) == 0
    assert [m.value() for m in consume(broker.bootstrap, topic, 5)] == [b"0", b"1", b"2", b"3", b"4"]


def test_metrics_endpoint_speaks_prometheus(camus_server):
    import re
    import urllib.request

    server = camus_server(extra=["--metrics", "127.0.0.1:0"])
    m = wait_until(lambda: re.search(r"metrics on (http://[\d.]+:\d+/metrics)", server.stderr()))
    assert m, server.stderr()
    src, view = unique("ms"), unique("mv")
    create(server.bootstrap, NewTopic(src, 1, 1, config={"camus.schema": "n:u32=$.n"}))
    create(server.bootstrap, NewTopic(view, config={"camus.source": src, "camus.filter": "n > 4"}))
    p = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        p.produce(src, json.dumps({"n": i}).encode(), partition=0)
    p.produce(src, b'{"x": 1}', partition=0)
    assert p.flush(10) == 0
    assert len(consume(server.bootstrap, view, 5)) == 5
    text = urllib.request.urlopen(m.group(1), timeout=10).read().decode()
    assert re.search(r'^camus_requests_total\{api="Produce"\} [1-9]', text, re.M)
    assert re.search(r'^camus_request_seconds_count\{api="Fetch"\} [1-9]', text, re.M)
    assert f'camus_topic_records_in_total{{topic="{src}"}} 11.0' in text
    assert f'camus_schema_misses_total{{field="n",topic="{src}"}} 1.0' in text
    assert re.search(rf'^camus_view_packets_total\{{port="\d+",view="{view}"\}} 5.0', text, re.M)
    assert re.search(rf'^camus_topic_bytes_out_total\{{topic="{view}"\}} [1-9]', text, re.M)
