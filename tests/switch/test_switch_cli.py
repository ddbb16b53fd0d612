"""pcap files and `camus switch run`: round trips, both byte orders, errors reported, not raised."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys

import pytest

from switch.pcap import PcapError, PcapReader, Record, read_pcap, write_pcap
from switch_helpers import ITCH_PIPELINE, add_order, ascii_int, itch_frame, leaf, stage


def test_pcap_round_trip_keeps_frames_and_timestamps(tmp_path):
    records = [Record(1, 2, b"\x01" * 60), Record(3, 999999, b""), Record(5, 6, bytes(range(256)) * 4)]
    write_pcap(str(tmp_path / "a.pcap"), records)
    assert read_pcap(str(tmp_path / "a.pcap")) == records


def test_big_endian_nanosecond_pcap_is_read():
    head = struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    body = struct.pack(">IIII", 7, 123456789, 3, 3) + b"abc"
    reader = PcapReader(io.BytesIO(head + body))
    assert reader.nanoseconds and list(reader) == [Record(7, 123456789, b"abc")]


@pytest.mark.parametrize("data, message", [
    (b"\x0a\x0d\x0d\x0a" + bytes(20), "pcapng"),
    (b"nope" + bytes(20), "not a pcap"),
    (b"\xd4\xc3\xb2\xa1", "too short"),
    (struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101), "not Ethernet"),
])
def test_bad_pcap_headers_are_refused(data, message):
    with pytest.raises(PcapError, match=message):
        PcapReader(io.BytesIO(data))


@pytest.mark.parametrize("tail, message", [
    (struct.pack("<IIII", 0, 0, 10, 10) + b"short", "inside a record (5 of 10 bytes)"),
    (b"\0" * 7, "inside a record header (7 of 16 bytes)"),
])
def test_a_truncated_last_record_ends_the_records_and_is_reported(tail, message):
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    whole = struct.pack("<IIII", 1, 2, 3, 3) + b"abc"
    reader = PcapReader(io.BytesIO(head + whole + tail))
    assert list(reader) == [Record(1, 2, b"abc")]
    assert message in reader.truncated


def write_pipeline(directory, entries):
    directory.mkdir()
    (directory / "pipeline.json").write_text(json.dumps(ITCH_PIPELINE))
    (directory / "entries.json").write_text(json.dumps(entries))


def test_camus_switch_run_as_a_command(tmp_path):
    """The installed entry point end to end: one pcap in, per-port pcaps and counters out."""
    write_pipeline(tmp_path / "pipe", {"camus_entries": 2, "table_entries": [
        stage("itch_stock", 0, "itch_order.stock", {"exact": ascii_int("AAPL")}, 1),
        leaf("itch_leaf", 1, "fwd", 3), leaf("itch_leaf", 0, "fwd", 4)]})
    frames = [itch_frame([add_order("AAPL", 1), add_order("IBM", 2)], seq=10), b"junk",
              itch_frame([add_order("IBM", 3)], seq=12)]
    write_pcap(str(tmp_path / "in.pcap"), [Record(100 + i, 0, f) for i, f in enumerate(frames)])
    done = subprocess.run(
        [sys.executable, "-m", "camus", "switch", "run", "--pipeline", str(tmp_path / "pipe"), "--pcap-in",
         str(tmp_path / "in.pcap"), "--out-dir", str(tmp_path / "out"), "--in-port", "7",
         "--counters-json", str(tmp_path / "c.json")],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "truncated 1" in done.stdout and "itch_leaf" in done.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["port-3.pcap", "port-4.pcap"]
    port4 = read_pcap(str(tmp_path / "out" / "port-4.pcap"))
    assert [r.seconds for r in port4] == [100, 102]  # input order, input timestamps
    counters = json.loads((tmp_path / "c.json").read_text())
    assert counters["ports"]["7"] == {"rx_packets": 3, "tx_packets": 0}


def test_switch_run_processes_a_truncated_capture_and_reports_it(tmp_path, capsys):
    from camus.cli import main

    write_pipeline(tmp_path / "pipe", {"camus_entries": 2, "table_entries": [
        leaf("itch_leaf", 0, "fwd", 4)]})
    write_pcap(str(tmp_path / "in.pcap"), [Record(i, 0, itch_frame([add_order("IBM", i)], seq=i))
                                          for i in range(3)])
    data = (tmp_path / "in.pcap").read_bytes()
    (tmp_path / "in.pcap").write_bytes(data[:-10])  # the third record loses its end
    args = ["switch", "run", "--pipeline", str(tmp_path / "pipe"), "--pcap-in",
            str(tmp_path / "in.pcap"), "--out-dir", str(tmp_path / "out")]
    assert main(args) == 1
    out = capsys.readouterr()
    assert "file ends inside a record" in out.err and "records before it were processed" in out.err
    assert "itch_leaf" in out.out  # the counters are printed
    assert [r.seconds for r in read_pcap(str(tmp_path / "out" / "port-4.pcap"))] == [0, 1]


def test_switch_run_reports_bad_inputs(tmp_path, capsys):
    from camus.cli import main

    write_pipeline(tmp_path / "pipe", {"camus_entries": 2, "table_entries": [{"table": "nope"}]})
    (tmp_path / "in.pcap").write_bytes(b"not a pcap at all, sorry")
    args = ["switch", "run", "--pipeline", str(tmp_path / "pipe"), "--pcap-in", str(tmp_path / "in.pcap"),
            "--out-dir", str(tmp_path / "out")]
    assert main(args) == 2
    assert "no table named 'nope'" in capsys.readouterr().err
    (tmp_path / "pipe" / "entries.json").unlink()
    assert main(args) == 2
    assert "not a pcap" in capsys.readouterr().err
