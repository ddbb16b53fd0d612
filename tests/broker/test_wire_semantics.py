"""Broker semantics checked frame by frame: idempotent dedup, acks=0, views refuse produce,
Fetch long-poll timing, ListOffsets, DescribeCluster, topic ids. Raw requests, real socket."""

from __future__ import annotations

import struct
import time

from shim.protocol.records import Record, encode_batch

from .conftest import unique
from .test_bad_input import connect, read_frame, request
from tests.protocol.protocol_helpers import decode_response


def call(s, api_key, version, correlation_id=7, **fields):
    s.sendall(request(api_key, version, correlation_id, **fields))
    return decode_response(api_key, version, read_frame(s))[1]


def create_topic(s, name, partitions=1, configs=()):
    resp = call(s, 19, 7, topics=[{"name": name, "num_partitions": partitions,
                                   "replication_factor": 1, "assignments": [],
                                   "configs": [{"name": k, "value": v} for k, v in configs]}],
                timeout=10000, validate_only=False)
    return resp.topics[0]


def produce(s, topic, batch, acks=-1, correlation_id=7):
    return call(s, 0, 9, correlation_id, transactional_id=None, acks=acks, timeout=5000,
                topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch}]}])


def fetch_request(topic, max_wait, correlation_id=7):
    """Fetch v12 of partition 0 from offset 0, holding up to `max_wait` ms for one byte."""
    return request(1, 12, correlation_id, replica_id=-1, max_wait=max_wait, min_bytes=1,
                   max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, topics=[
                       {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "last_fetched_epoch": -1,
                                                        "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}],
                   forgotten_topics_data=[], rack_id="")


def idem_batch(pid, epoch, seq, n, first_value=0):
    now = int(time.time() * 1000)  # a 1970 timestamp would be expired by retention.ms at once
    recs = [Record(i, now, None, f"v{first_value + i}".encode()) for i in range(n)]
    return encode_batch(recs, base_offset=0, producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq)


def test_idempotent_retries_are_deduplicated_and_gaps_refused(broker):
    s = connect(broker)
    topic = unique("idem-wire")
    assert create_topic(s, topic).error_code == 0
    init = call(s, 22, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1,
                producer_epoch=-1)
    pid, epoch = init.producer_id, init.producer_epoch
    assert init.error_code == 0 and pid >= 0
    part = lambda r: r.responses[0].partition_responses[0]  # noqa: E731
    assert part(produce(s, topic, idem_batch(pid, epoch, 0, 3))).base_offset == 0
    assert part(produce(s, topic, idem_batch(pid, epoch, 3, 2))).base_offset == 3
    again = part(produce(s, topic, idem_batch(pid, epoch, 0, 3)))  # a retry of the first
    assert (again.error_code, again.base_offset) == (0, 0)
    assert part(produce(s, topic, idem_batch(pid, epoch, 9, 1))).error_code == 45  # OUT_OF_ORDER
    bumped = call(s, 22, 4, transactional_id=None, transaction_timeout=60000, producer_id=pid,
                  producer_epoch=epoch)
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
    assert part(produce(s, topic, idem_batch(pid, epoch + 1, 0, 1))).base_offset == 5
    assert part(produce(s, topic, idem_batch(pid, epoch, 5, 1))).error_code == 47  # old epoch
    lo = call(s, 2, 7, replica_id=-1, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -1}]}])
    assert lo.topics[0].partitions[0].offset == 6  # the retry added nothing
    s.close()


def test_acks_zero_gets_no_answer_and_the_next_request_does(broker):
    s = connect(broker)
    topic = unique("acks0")
    create_topic(s, topic)
    s.sendall(request(0, 9, 100, transactional_id=None, acks=0, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": encode_batch(
            [Record(0, 1, None, b"x")])}]}]))
    s.sendall(request(18, 3, 101, client_software_name="t", client_software_version="1"))
    frame = read_frame(s)
    corr, body, _ = decode_response(18, 3, frame)
    assert corr == 101 and body.error_code == 0
    s.close()


def test_view_is_read_only_and_fetch_long_polls(broker):
    s = connect(broker)
    src, view = unique("ro"), unique("ro-view")
    create_topic(s, src, 1, [("camus.schema", "n:u8=bytes:0:1")])
    created = create_topic(s, view, 1, [("camus.source", src), ("camus.filter", "n == 7")])
    assert created.error_code == 0 and created.topic_id.int != 0
    refused = produce(s, view, encode_batch([Record(0, 1, None, b"\x07")]))
    assert refused.responses[0].partition_responses[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
    t0 = time.monotonic()
    s.sendall(fetch_request(view, max_wait=400))
    fetched = decode_response(1, 12, read_frame(s))[1]
    waited = time.monotonic() - t0
    assert 0.35 <= waited < 3, waited  # held for max_wait, then answered empty
    assert fetched.responses[0].partitions[0].records in (b"", None)
    cluster = call(s, 60, 1, include_cluster_authorized_operations=False, endpoint_type=1)
    assert cluster.error_code == 0 and cluster.brokers[0].port == broker.port
    s.close()


def test_idempotent_state_is_rebuilt_from_the_log_after_a_restart(camus_server, tmp_path):
    from .test_bad_input import connect as connect_to

    s1 = camus_server(tmp_path / "d")
    s = connect_to(s1)
    topic = unique("idem-restart")
    create_topic(s, topic)
    init = call(s, 22, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1,
                producer_epoch=-1)
    pid, epoch = init.producer_id, init.producer_epoch
    part = lambda r: r.responses[0].partition_responses[0]  # noqa: E731
    produce(s, topic, idem_batch(pid, epoch, 0, 2))
    produce(s, topic, idem_batch(pid, epoch, 2, 2))
    s.close()
    s1.stop()
    s = connect_to(camus_server(tmp_path / "d"))
    retry = part(produce(s, topic, idem_batch(pid, epoch, 2, 2)))  # a retry across the restart
    assert (retry.error_code, retry.base_offset) == (0, 2)
    assert part(produce(s, topic, idem_batch(pid, epoch, 7, 1))).error_code == 45
    assert part(produce(s, topic, idem_batch(pid, epoch, 4, 1))).base_offset == 4
    fresh = call(s, 22, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1,
                 producer_epoch=-1)
    assert fresh.producer_id != pid  # ids are not handed out twice
    s.close()


def list_offsets_request(topic, partition, correlation_id):
    return request(2, 7, correlation_id, replica_id=-1, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": -2}]}])


def test_pipelined_answers_leave_together_and_a_parked_fetch_holds_none_back(broker):
    # librdkafka sends one ListOffsets per partition at once and acts on the first answer
    # it reads: answered one segment at a time, it sent a Fetch naming one partition, which
    # long-polled while the others waited. Answers to requests that arrived together now
    # leave in one write; a handler that may park (Fetch) first sends what is ready.
    s = connect(broker)
    topic = unique("pipe")
    create_topic(s, topic, 4)
    s.sendall(b"".join(list_offsets_request(topic, p, 100 + p) for p in range(4)))
    data = b""
    while len(data) < 4:
        data += s.recv(1 << 16)
    first_read = len(data)
    frames = []
    while len(frames) < 4:
        (size,) = struct.unpack_from(">i", data)
        while len(data) < 4 + size:
            data += s.recv(1 << 16)
        frames.append(data[:4 + size])
        data = data[4 + size:]
    assert first_read == sum(map(len, frames))  # all four in the first read
    assert [decode_response(2, 7, f)[1].topics[0].partitions[0].partition_index
            for f in frames] == [0, 1, 2, 3]

    fetch = fetch_request(topic, max_wait=1500, correlation_id=200)
    t0 = time.monotonic()
    s.sendall(list_offsets_request(topic, 1, 300) + fetch)
    before = decode_response(2, 7, read_frame(s))
    answered = time.monotonic() - t0
    parked = decode_response(1, 12, read_frame(s))
    held = time.monotonic() - t0
    assert before[0] == 300 and parked[0] == 200
    assert answered < 1.0 <= held  # the ListOffsets answer did not wait out the long-poll
    s.close()
