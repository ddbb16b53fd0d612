"""A full or failing disk never loses an acknowledged record (issue 13, items 1 and 2).

The log unit tests inject write, truncate and fsync failures into `shim.log`; the broker
test runs `camus serve` with its data dir on a real 24 MiB tmpfs in a private mount
namespace, fills the disk under an idempotent acks=all producer, frees it, and checks after a
kill -9 and a restart that every acknowledged record is there exactly once.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from shim import log as shim_log
from shim.log import PartitionLog, StorageError
from shim.protocol.records import Record, decode_batches, encode_batch

from .conftest import wait_until


def batch(offset: int, n: int = 3, size: int = 100) -> tuple[bytes, int, int]:
    records = [Record(offset + i, 1_700_000_000_000 + i, None, bytes([i % 256]) * size, [])
               for i in range(n)]
    return encode_batch(records), offset + n - 1, records[-1].timestamp


def offsets(lg: PartitionLog) -> list[int]:
    data = lg.read(lg.start_offset, 1 << 40)
    return [r.offset for b in decode_batches(data) for r in b.records] if data else []


def fail_writes_after(monkeypatch, budget: int, error: int = errno.ENOSPC) -> None:
    """os.write as shim.log sees it: accepts `budget` more bytes, then fails like a full disk."""
    real = os.write
    left = [budget]

    def write(fd, data):
        if left[0] <= 0:
            raise OSError(error, os.strerror(error))
        n = real(fd, bytes(data[:left[0]]))
        left[0] -= n
        return n

    monkeypatch.setattr(shim_log.os, "write", write)


def test_a_failed_write_leaves_no_torn_tail(tmp_path, monkeypatch):
    lg = PartitionLog(tmp_path / "p0")
    lg.append(*batch(0))
    size = lg.size
    fail_writes_after(monkeypatch, 57)  # half a batch reaches the file, then ENOSPC
    with pytest.raises(StorageError, match="No space left on device"):
        lg.append(*batch(3))
    assert lg.next_offset == 3 and lg.size == size
    assert sum(p.stat().st_size for p in (tmp_path / "p0").glob("*.log")) == size
    monkeypatch.undo()  # space freed: the retry lands right after the last whole batch
    lg.append(*batch(3))
    lg.append(*batch(6))
    assert offsets(PartitionLog(tmp_path / "p0")) == list(range(9))  # after a restart too


def test_several_batches_are_stored_all_or_none(tmp_path, monkeypatch):
    lg = PartitionLog(tmp_path / "p0")
    fail_writes_after(monkeypatch, len(batch(0)[0]) + 10)
    with pytest.raises(StorageError):
        lg.append_all([batch(0), batch(3)])
    assert lg.next_offset == 0 and offsets(lg) == []
    monkeypatch.undo()
    lg.append_all([batch(0), batch(3)])
    assert offsets(PartitionLog(tmp_path / "p0")) == list(range(6))


def test_a_log_that_cannot_be_truncated_back_goes_offline(tmp_path, monkeypatch):
    lg = PartitionLog(tmp_path / "p0")
    lg.append(*batch(0))
    fail_writes_after(monkeypatch, 40, errno.EIO)

    def no_truncate(fd, length):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(shim_log.os, "ftruncate", no_truncate)
    with pytest.raises(StorageError, match="offline until restart"):
        lg.append(*batch(3))
    monkeypatch.undo()
    with pytest.raises(StorageError, match="offline until restart"):
        lg.append(*batch(3))  # nothing is acknowledged behind the torn batch
    assert offsets(PartitionLog(tmp_path / "p0")) == [0, 1, 2]  # the restart cuts the tail


def fsync_counter(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(shim_log.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    return calls


def test_flush_messages_fsyncs_before_the_append_returns(tmp_path, monkeypatch):
    calls = fsync_counter(monkeypatch)
    never = PartitionLog(tmp_path / "never")  # Kafka's default: the OS writes back
    for i in range(4):
        never.append(*batch(3 * i))
    assert calls == []
    every = PartitionLog(tmp_path / "every", flush_messages=1)
    every.append(*batch(0))
    assert len(calls) >= 1  # the segment (and the new segment's directory)
    n = len(calls)
    every.append(*batch(3))
    assert len(calls) == n + 1
    six = PartitionLog(tmp_path / "six", flush_messages=6)
    calls.clear()
    six.append(*batch(0))
    assert calls == []
    six.append(*batch(3))
    assert calls


def test_flush_ms_is_due_after_the_oldest_unflushed_append(tmp_path, monkeypatch):
    calls = fsync_counter(monkeypatch)
    lg = PartitionLog(tmp_path / "p0", flush_ms=1000)
    assert not lg.flush_due()
    lg.append(*batch(0))
    assert calls == [] and not lg.flush_due()
    assert lg.flush_due(time.monotonic() + 1.5)
    lg.flush()
    assert calls and not lg.flush_due(time.monotonic() + 5)


def test_a_failed_fsync_refuses_the_append_and_stores_nothing(tmp_path, monkeypatch):
    lg = PartitionLog(tmp_path / "p0", flush_messages=1)
    lg.append(*batch(0))

    def bad_fsync(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(shim_log.os, "fsync", bad_fsync)
    with pytest.raises(StorageError, match="fsync"):
        lg.append(*batch(3))
    monkeypatch.undo()
    assert lg.next_offset == 3
    assert offsets(PartitionLog(tmp_path / "p0")) == [0, 1, 2]


# --- a real full disk under camus serve -------------------------------------------------

def _private_tmpfs(mountpoint: Path, size: str) -> subprocess.Popen | None:
    """A process holding a private mount namespace with a tmpfs at `mountpoint`, or None
    where mount namespaces are not allowed."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return None
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"mount -t tmpfs -o size={size} camus-test {mountpoint} && echo ready && exec sleep 600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if holder.stdout.readline().strip() != "ready":
        holder.kill()
        holder.wait()
        return None
    return holder


def test_full_disk_under_acks_all_idempotent_produce_loses_nothing(tmp_path, camus_server):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    mnt = tmp_path / "disk"
    mnt.mkdir()
    holder = _private_tmpfs(mnt, "24m")
    if holder is None:
        pytest.skip("no private mount namespace here (unshare -m needs CAP_SYS_ADMIN)")
    inside = ["nsenter", "-t", str(holder.pid), "-m", "--"]
    try:
        data = mnt / "data"
        # Leave ~3 MiB free: the first MiBs of the produce fit, the rest hit ENOSPC.
        subprocess.run([*inside, "sh", "-c", f"mkdir -p {data} && head -c 21M /dev/zero > {mnt}/filler"],
                       check=True)
        server = camus_server(data, prefix=inside)
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("full", 1)])["full"].result(10)
        producer = ck.Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                                "enable.idempotence": True, "linger.ms": 5,
                                "message.timeout.ms": 120_000})
        acked: list[int] = []
        failed: list[str] = []

        def report(err, msg):
            if err is None:
                acked.append(int(msg.key()))
            else:
                failed.append(str(err))

        total = 8000
        for i in range(total):  # 8000 x 1 KiB: about 8 MiB against ~3 MiB free
            producer.produce("full", value=os.urandom(512).hex().encode(), key=str(i).encode(),
                             on_delivery=report)
            producer.poll(0)
        assert wait_until(lambda: "No space left on device" in server.stderr(), timeout=60), \
            "the disk never filled up"
        time.sleep(1)  # a few retried produces hit the full disk too
        subprocess.run([*inside, "rm", f"{mnt}/filler"], check=True)
        assert producer.flush(120) == 0
        assert failed == [] and sorted(acked) == list(range(total))

        server.proc.kill()  # kill -9: only what reached the files counts
        server.proc.wait()
        again = camus_server(data, prefix=inside)
        consumer = ck.Consumer({"bootstrap.servers": again.bootstrap, "group.id": "check",
                                "auto.offset.reset": "earliest", "enable.partition.eof": True})
        consumer.assign([ck.TopicPartition("full", 0, 0)])
        keys: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = consumer.poll(1)
            if m is None:
                continue
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(m.error())
            keys.append(int(m.key()))
        consumer.close()
        assert sorted(keys) == list(range(total))  # every acknowledged record, exactly once
    finally:
        holder.kill()
        holder.wait()


def test_flush_configs_are_checked_and_described(camus_server, tmp_path):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    cfg = tmp_path / "camus.json"
    cfg.write_text('{"log.flush.interval.messages": 1}')
    server = camus_server(tmp_path / "d", ["--config", str(cfg)])
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    bad = admin.create_topics([NewTopic("bad", 1, config={"flush.ms": "soon"})])["bad"]
    with pytest.raises(Exception, match="flush.ms"):
        bad.result(10)
    admin.create_topics([NewTopic("synced", 1), NewTopic("lazy", 1, config={"flush.ms": "1000"})])
    wait_until(lambda: {"synced", "lazy"} <= set(admin.list_topics(timeout=5).topics))

    def described(name):
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        return {k: v.value for k, v in admin.describe_configs([res])[res].result(10).items()}

    assert described("synced")["flush.messages"] == "1"  # the broker-wide default from --config
    assert described("lazy")["flush.ms"] == "1000"
    assert described("lazy")["flush.messages"] == "1"
    broker = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([broker])[broker].result(10)
    assert configs["log.flush.interval.messages"].value == "1"
    assert configs["log.flush.interval.ms"].value == str(2**63 - 1)
