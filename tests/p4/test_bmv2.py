"""The golden programs on the real toolchain: p4c-bm2-ss, then simple_switch_grpc.

Neither tool is in any package registry the development machines reach, so every test here
skips unless the tool is on PATH; on such machines nothing here has ever run, and nothing
claims the programs compile. Where p4c exists: every golden program compiles, and p4c's
P4Info has the tables, keys, actions and parameters ours has, with the same ids and aliases
(the controller resolves names all the same). Where simple_switch_grpc exists too: the controller's `push`
writes each program and entries.json as it is (port-bitmap decisions need nothing derived
for a P4 target), and packets within the documented limits
(docs/p4.md), messages decided differently in one packet included, come out of bmv2 as they
come out of the software switch (bmv2's `--use-files` pcap ports, so no root
and no veth pairs are needed).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from google.protobuf import text_format

from compiler.compile import compile_files, write_outputs
from compiler.p4 import write_p4
from p4rt.p4info import program_p4info
from p4rt.protos import p4info_pb2
from controller.push import TargetConfig
from tests.p4.test_p4_golden import GOLDEN, ROOT, SPECS, STATE_SPECS

P4C = shutil.which("p4c-bm2-ss")
BMV2 = shutil.which("simple_switch_grpc")
needs_p4c = pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not on PATH (not installable here)")
needs_bmv2 = pytest.mark.skipif(P4C is None or BMV2 is None,
                                reason="p4c-bm2-ss and simple_switch_grpc are not both on PATH")
CASES = sorted(SPECS) + ["all"] + sorted(STATE_SPECS)


def p4c_compile(program: Path, out: Path) -> tuple[Path, Path]:
    p4info, json_out = out / "p4c.p4info.txtpb", out / "program.json"
    run = subprocess.run([P4C, "--arch", "v1model", "--p4runtime-files", str(p4info),
                          "-o", str(json_out), str(program)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"p4c-bm2-ss {program}:\n{run.stderr}"
    # Clean means no warnings either (issue 18): p4c writes them to stderr as "warning:".
    assert "warning" not in run.stderr.lower(), f"p4c-bm2-ss {program} warns:\n{run.stderr}"
    return p4info, json_out


def names(info: p4info_pb2.P4Info) -> tuple[set, set]:
    kind = p4info_pb2.MatchField.MatchType.Name
    tables = {(t.preamble.name, tuple((f.name, f.bitwidth, kind(f.match_type)) for f in t.match_fields))
              for t in info.tables}
    actions = {(a.preamble.name, tuple((p.name, p.bitwidth) for p in a.params)) for a in info.actions}
    registers = {(r.preamble.name, r.type_spec.bitstring.bit.bitwidth, r.size) for r in info.registers}
    return tables, actions, registers


@needs_p4c
@pytest.mark.parametrize("case", CASES)
def test_p4c_compiles_golden_program_with_our_names(case, tmp_path):
    p4info_path, _ = p4c_compile(GOLDEN / case / "program.p4", tmp_path)
    theirs = TargetConfig.from_files(p4info_path, p4info_path).p4info  # text, or binary (older p4c)
    ours = text_format.Parse((GOLDEN / case / "p4info.txtpb").read_text(), p4info_pb2.P4Info())
    assert names(theirs) == names(ours)
    # Our ids are computed the way p4c computes them (p4rt.ids, p4rt.p4info), so that
    # entries.txtpb replays on bmv2 as it is; a difference here means that computation is wrong.
    ids = lambda info: {x.preamble.name: (x.preamble.id, x.preamble.alias)  # noqa: E731
                        for items in (info.tables, info.actions, info.registers) for x in items}
    assert ids(theirs) == ids(ours)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _itch_frame(blocks: list[tuple[bytes, int, int]]) -> bytes:
    from switch.packet import mold_payload, udp_frame

    messages = [b"A" + bytes(10) + struct.pack("!QcI8sI", 7, b"B", shares, stock.ljust(8), price)
                for stock, shares, price in blocks]
    return udp_frame(mold_payload(b"SESSION001", 100, messages), dst_port=1234)


def _udp(payload: bytes, port: int) -> bytes:
    from switch.packet import udp_frame

    return udp_frame(payload, dst_port=port)


# Packets within the documented limits (docs/p4.md).
PACKETS = {
    "itch": [_itch_frame([(b"GOOGL", 10, 500)]),
             _itch_frame([(b"GOOGL", 10, 500), (b"IBM", 1, 1), (b"GOOGL", 20, 600)]),
             _itch_frame([(b"MSFT", 5, 4000000)]),
             # decided differently: GOOGL to 1, MSFT to 2, AAPL to the group {2, 3}
             _itch_frame([(b"GOOGL", 10, 500), (b"MSFT", 5, 4000000), (b"AAPL", 5000, 1)])],
    # INT: shim and MD header, then the top hop (switch id, ports, hop latency, queue)
    "int": [_udp(bytes(16) + struct.pack("!IHHII", 2, 0, 0, 200, 0), 1337),
            _udp(bytes(16) + struct.pack("!IHHII", 9, 0, 0, 9000, 0), 1337)],
    # Kafka: topic, partition, then the rest of the 104-byte header
    "kafka": [_udp(struct.pack("!II", 2, 0) + bytes(96), 9094),
              _udp(struct.pack("!II", 1, 0) + bytes(96), 9094)],
}


@contextlib.contextmanager
def bmv2(tmp_path: Path, ports=range(1, 5)):
    """simple_switch_grpc with pcap ports p0 (input, p0_in.pcap) and p1..p4, no program yet;
    yields its P4Runtime address. bmv2 starts reading p0_in.pcap 8 s after it starts."""
    from switch.pcap import write_pcap

    # bmv2's file ports open an input pcap for every port and do not start (nor its P4Runtime
    # server) while one is missing: the ports that only send get an empty one.
    for p in (0, *ports):
        if not (tmp_path / f"p{p}_in.pcap").exists():
            write_pcap(str(tmp_path / f"p{p}_in.pcap"), [])
    grpc_port = _free_port()
    switch = subprocess.Popen([BMV2, "--device-id", "1", "--no-p4", "--use-files", "8",
                               "-i", "0@p0", *[a for p in ports for a in ("-i", f"{p}@p{p}")],
                               "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield f"127.0.0.1:{grpc_port}"
    finally:
        switch.terminate()
        switch.wait(timeout=30)


def bmv2_outputs(c, packets: list[bytes], work: Path, ports=range(1, 5)) -> dict[int, list[bytes]]:
    """`packets` into port 0 of bmv2 running p4c's compile of `c`'s program, its entries
    pushed by the controller; per port, the copies in order."""
    from controller.p4runtime_client import P4RuntimeClient
    from controller.push import push
    from switch.pcap import write_pcap

    write_p4(c.pipeline, c.entries, work)
    p4info_path, json_path = p4c_compile(work / "program.p4", work)
    write_pcap(str(work / "p0_in.pcap"), packets)
    with bmv2(work, ports) as target:
        config = TargetConfig.from_files(p4info_path, json_path)
        with P4RuntimeClient(target, timeout=20) as client:
            client.arbitrate()
            push(client, config, c.entries)
        time.sleep(12)  # bmv2 starts reading p0_in.pcap 8 s after start
    out = {}
    for p in ports:
        path = work / f"p{p}_out.pcap"
        got = read_bmv2_pcap(path)
        if got:
            out[p] = got
    return out


def read_bmv2_pcap(path: Path) -> list[bytes]:
    """The frames of one of bmv2's output pcaps. bmv2 1.15.5 writes the file header with the
    first packet (shorter: none sent) and link type 0 over Ethernet frames, which
    `switch.pcap` refuses as not Ethernet; the frames are read as Ethernet all the same."""
    import io

    from switch.pcap import PcapReader

    data = path.read_bytes() if path.exists() else b""
    if len(data) < 24:
        return []
    if int.from_bytes(data[20:24], "little") == 0:
        data = data[:20] + (1).to_bytes(4, "little") + data[24:]
    return [r.data for r in PcapReader(io.BytesIO(data))]


@needs_bmv2
@pytest.mark.parametrize("case", sorted(SPECS))
def test_bmv2_runs_entries_pushed_by_the_controller_like_the_software_switch(case, tmp_path):
    c = compile_files(ROOT / SPECS[case], GOLDEN / case / "rules.txt")
    write_outputs(c, tmp_path)
    packets = PACKETS.get(case, [])
    got_all = bmv2_outputs(c, packets, tmp_path)
    expected = software_switch_outputs(c, packets)
    for p in range(1, 5):
        got = got_all.get(p, [])
        assert got == expected.get(p, []), f"port {p}"


@needs_bmv2
@pytest.mark.parametrize("case", CASES)
def test_bmv2_accepts_entries_txtpb_as_written(case, tmp_path):
    """entries.txtpb, ids and all, is a WriteRequest bmv2 takes under p4c's P4Info."""
    from p4rt.protos import p4runtime_pb2
    from controller.p4runtime_client import P4RuntimeClient

    p4info_path, json_path = p4c_compile(GOLDEN / case / "program.p4", tmp_path)
    config = TargetConfig.from_files(p4info_path, json_path)
    req = text_format.Parse((GOLDEN / case / "entries.txtpb").read_text(), p4runtime_pb2.WriteRequest())
    with bmv2(tmp_path) as target:
        with P4RuntimeClient(target, device_id=req.device_id, election_id=req.election_id.low,
                             timeout=20) as client:
            client.arbitrate()
            client.set_pipeline(config.p4info, config.device_config, config.cookie)
            assert client.write(req.updates) == len(req.updates)
            tables = [e.table_entry for e in client.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())])]
    assert len(tables) == sum(u.entity.HasField("table_entry") for u in req.updates)


def software_switch_outputs(c, packets: list[bytes]) -> dict[int, list[bytes]]:
    from switch.dataplane import load

    dp = load(c.pipeline, c.entries, impl="python")
    out: dict[int, list[bytes]] = {}
    for frame in packets:
        for port, copy in dp.process(frame, 0):
            out.setdefault(port, []).append(copy)
    return out


def test_bmv2_packets_are_selected_and_pruned_by_the_software_switch():
    """The bmv2 test's packets are selected (ITCH ones pruned too), not just dropped or routed."""
    from switch.packet import read_mold, read_udp

    for case in ("int", "kafka"):
        c = compile_files(ROOT / SPECS[case], GOLDEN / case / "rules.txt")
        assert software_switch_outputs(c, PACKETS[case]), case
    c = compile_files(ROOT / SPECS["itch"], GOLDEN / "itch" / "rules.txt")
    out = software_switch_outputs(c, PACKETS["itch"])
    assert sorted(out) == [1, 2, 3]  # GOOGL -> 1; MSFT above 300.0000 -> 2; AAPL -> 2, 3
    blocks = [read_mold(read_udp(copy).payload)[2] for copy in out[1]]
    assert [len(b) for b in blocks] == [1, 3, 1]
    assert blocks[1][1] == b""  # IBM between the two GOOGL messages: a placeholder
    assert [len(read_mold(read_udp(copy).payload)[2]) for copy in out[2]] == [1, 2]  # MSFT; MSFT, AAPL


def test_our_p4info_is_what_the_golden_files_hold():
    """The P4Info the bmv2 test compares p4c's with: the software switch's names and ids."""
    import json

    for case, spec in sorted({**SPECS, **STATE_SPECS}.items()):
        c = compile_files(ROOT / spec, GOLDEN / case / "rules.txt")
        golden = text_format.Parse((GOLDEN / case / "p4info.txtpb").read_text(), p4info_pb2.P4Info())
        assert golden == program_p4info(c.pipeline)


@needs_p4c
@pytest.mark.parametrize("spec", ["p4/itch/itch.p4", "p4/int/int.p4"])
def test_p4c_compiles_the_fabric_program_with_our_names_and_ids(spec, tmp_path):
    """The fabric variant (compiler/p4/fabric.py: hash with a run-time max, two more tables)
    as `camus net compile --p4` writes it, compiled cleanly, its P4Info equal to ours."""
    from compiler.compile import compile_rules
    from compiler.spec import load_spec

    c = compile_rules(load_spec(ROOT / spec), [], static=True)
    write_p4(c.pipeline, None, tmp_path, fabric=True)
    p4info_path, _ = p4c_compile(tmp_path / "program.p4", tmp_path)
    theirs = TargetConfig.from_files(p4info_path, p4info_path).p4info
    ours = program_p4info(c.pipeline, fabric=True)
    assert names(theirs) == names(ours)
    ids = lambda info: {x.preamble.name: (x.preamble.id, x.preamble.alias)  # noqa: E731
                        for items in (info.tables, info.actions, info.registers) for x in items}
    assert ids(theirs) == ids(ours)
