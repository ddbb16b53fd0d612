"""Framing and malformed input: the right error, never a crash, never unbounded buffering."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shim.protocol import ErrorCode, FramingError, ProtocolError, ServerConnection
from shim.protocol.framing import FrameDecoder, frame
from protocol_helpers import FIXTURES


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_frames_split_anywhere():
    decoder = FrameDecoder()
    decoder.feed(frame(b"abc") + frame(b"") + frame(b"de")[:3])
    assert decoder.next_frame() == b"abc"
    assert decoder.next_frame() == b""
    assert decoder.next_frame() is None
    decoder.feed(frame(b"de")[3:])
    assert decoder.next_frame() == b"de"
    assert decoder.buffered == 0


@pytest.mark.parametrize("size", [-1, -(2**31), 101 * 1024 * 1024, 2**31 - 1])
def test_absurd_size_rejected_before_buffering(size):
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", size))
    with pytest.raises(FramingError) as info:
        decoder.next_frame()
    assert info.value.error_code == ErrorCode.invalid_request
    assert info.value.close_connection
    assert decoder.buffered == 0
    # Broken for good: the stream has no trustworthy frame boundary any more.
    with pytest.raises(FramingError):
        decoder.feed(b"\x00" * 16)


def test_tls_client_hello_on_a_plaintext_port():
    # 0x16 0x03 0x01 ... reads as a 370 MB frame.
    conn = ServerConnection()
    conn.receive_data(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    with pytest.raises(FramingError, match="TLS or HTTP"):
        conn.next_request()


def test_max_frame_size_is_configurable():
    decoder = FrameDecoder(max_frame_size=10)
    decoder.feed(frame(b"x" * 10))
    assert decoder.next_frame() == b"x" * 10
    decoder.feed(frame(b"x" * 11))
    with pytest.raises(FramingError):
        decoder.next_frame()


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x03\x00\x09\x00\x00"])
def test_frame_shorter_than_a_header_closes(payload):
    conn = ServerConnection()
    conn.receive_data(frame(payload))
    with pytest.raises(ProtocolError) as info:
        conn.next_request()
    assert info.value.close_connection and info.value.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_truncated_body_inside_a_well_sized_frame(cut):
    data = _fixture("librdkafka-metadata-v13.bin")
    payload = data[4:-cut]
    conn = ServerConnection()
    conn.receive_data(frame(payload) + data)
    with pytest.raises(ProtocolError) as info:
        conn.next_request()
    assert info.value.error_code == ErrorCode.invalid_request
    assert info.value.close_connection
    assert info.value.correlation_id is not None
    # The bad frame was consumed whole; a server that chose to go on could.
    assert conn.next_request().api.name == "Metadata"


def test_garbage_body_for_a_known_api():
    conn = ServerConnection()
    conn.receive_data(frame(struct.pack(">hhih", 0, 9, 12, 1) + b"c" + b"\xff" * 40))
    with pytest.raises(ProtocolError, match="malformed Produce v9") as info:
        conn.next_request()
    assert info.value.correlation_id == 12


def test_frame_size_larger_than_the_request_leaves_trailing_bytes_counted():
    data = _fixture("librdkafka-heartbeat-v3.bin")
    conn = ServerConnection()
    conn.receive_data(frame(data[4:] + b"\x00\x00\x00"))
    assert conn.next_request().trailing_bytes == 3


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data):
    conn = ServerConnection(max_frame_size=1 << 16)
    conn.receive_data(data)
    for _ in range(50):
        try:
            if conn.next_request() is None:
                break
        except FramingError:
            break
        except ProtocolError as error:
            assert isinstance(error.error_code, ErrorCode)


ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.bin"))


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_mutated_real_frames_never_crash(data):
    raw = bytearray(_fixture(data.draw(st.sampled_from(ALL_FIXTURES))))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(4, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    conn = ServerConnection()
    conn.receive_data(bytes(raw))
    try:
        conn.next_request()
    except ProtocolError as error:
        assert isinstance(error.error_code, ErrorCode)


HUGE_ARRAYS = {
    # Metadata v12 (flexible): topics as a compact array announcing 2^32 - 2 elements.
    "compact": struct.pack(">hhih", 3, 12, 1, -1) + b"\x00" + b"\xff\xff\xff\xff\x0f",
    # Metadata v1: a legacy int32 array announcing 2^31 - 1 topics.
    "legacy": struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 2**31 - 1),
    # Fetch v12: a nested compact array (partitions) announcing 2^34 elements.
    "nested": struct.pack(">hhih", 1, 12, 1, -1) + b"\x00" + struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
    + b"\x02" + b"\x02t" + b"\x80\x80\x80\x80\x40",
}


@pytest.mark.parametrize("name", sorted(HUGE_ARRAYS))
def test_huge_array_lengths_are_refused_before_allocation(name):
    # kio's native reader reserves memory for the announced length; 2^32 elements
    # abort the process. Run in a child so a regression cannot take pytest down.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from shim.protocol import ServerConnection, ProtocolError\n"
        "from shim.protocol.framing import frame\n"
        "c = ServerConnection(); c.receive_data(frame(sys.stdin.buffer.read()))\n"
        "try:\n    c.next_request()\nexcept ProtocolError as e:\n    print(int(e.error_code), e.close_connection)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input=HUGE_ARRAYS[name], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.split() == [str(int(ErrorCode.invalid_request)).encode(), b"True"]
