"""Golden P4 output for the three product specs: program.p4, p4info.txtpb, entries.txtpb.

Regenerate after an intended change with `CAMUS_REGEN_GOLDEN=1 pytest tests/p4` and read the
diff before committing it. The programs are checked structurally here (tests/p4/p4_structure.py);
whether p4c accepts them is test_bmv2.py's job, which runs only where p4c is installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compiler.compile import compile_files
from compiler.p4 import write_p4
from compiler.p4.__main__ import main as p4_main
from p4rt.p4info import program_p4info
from tests.p4.p4_structure import problems

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "p4"
SPECS = {"itch": "p4/itch/itch.p4", "int": "p4/int/int.p4", "kafka": "p4/kafka/kafka.p4"}
# Stateful programs (IR 4): the ITCH spec with the paper's Fig. 4 counter (the switch's
# ingress time); and with the slides' average, a counter and a byte meter, timed by the
# messages' own timestamps. Their specs live beside their golden files.
STATE_SPECS = {"fig4": "tests/golden/p4/fig4/itch.p4", "itch_state": "tests/golden/p4/itch_state/itch.p4"}
FILES = ("program.p4", "p4info.txtpb", "entries.txtpb")


def _compare(got_dir: Path, golden_dir: Path) -> None:
    for name in FILES:
        got = (got_dir / name).read_text()
        if os.environ.get("CAMUS_REGEN_GOLDEN"):
            (golden_dir / name).write_text(got)
        assert got == (golden_dir / name).read_text(), f"{golden_dir.name}/{name} differs"


@pytest.mark.parametrize("case", sorted(SPECS))
def test_golden(case, tmp_path):
    c = compile_files(ROOT / SPECS[case], GOLDEN / case / "rules.txt")
    write_p4(c.pipeline, c.entries, tmp_path)
    _compare(tmp_path, GOLDEN / case)
    assert problems((tmp_path / "program.p4").read_text(), program_p4info(c.pipeline)) == []


@pytest.mark.parametrize("case", sorted(STATE_SPECS))
def test_golden_stateful(case, tmp_path):
    c = compile_files(ROOT / STATE_SPECS[case], GOLDEN / case / "rules.txt")
    assert c.pipeline.version == 4
    write_p4(c.pipeline, c.entries, tmp_path)
    _compare(tmp_path, GOLDEN / case)
    assert problems((tmp_path / "program.p4").read_text(), program_p4info(c.pipeline)) == []


def test_golden_three_applications_in_one_program(tmp_path):
    args = []
    for case in sorted(SPECS):
        args += ["--app", str(ROOT / SPECS[case]), str(GOLDEN / case / "rules.txt")]
    assert p4_main(args + ["--out", str(tmp_path)]) == 0
    _compare(tmp_path, GOLDEN / "all")
    program = (tmp_path / "program.p4").read_text()
    for port in (1234, 1337, 9094):  # one dispatch case and one ingress branch per application
        assert program.count(f"16w{port}: parse_") == 1
        assert program.count(f"hdr.udp.dst_port == {port})") == 1


def test_entries_name_only_tables_and_groups_of_the_program():
    """Every table id in entries.txtpb is a table of the golden P4Info; the applications'
    groups (one each, whatever the port sets) are inserted, within bmv2's ids 1..32767."""
    from google.protobuf import text_format

    from p4rt.protos import p4info_pb2, p4runtime_pb2

    for case in sorted(SPECS):
        info = text_format.Parse((GOLDEN / case / "p4info.txtpb").read_text(), p4info_pb2.P4Info())
        req = text_format.Parse((GOLDEN / case / "entries.txtpb").read_text(), p4runtime_pb2.WriteRequest())
        tables = {t.preamble.id for t in info.tables}
        groups = {u.entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id
                  for u in req.updates if u.entity.HasField("packet_replication_engine_entry")}
        for u in req.updates:
            assert u.type == p4runtime_pb2.Update.INSERT
            if u.entity.HasField("table_entry"):
                assert u.entity.table_entry.table_id in tables
        assert len(groups) == 1 and all(1 <= g <= 32767 for g in groups), case


def test_camus_compile_p4_writes_the_three_files(tmp_path):
    from camus.cli import main

    assert main(["compile", str(ROOT / SPECS["int"]), str(GOLDEN / "int" / "rules.txt"),
                 "--out", str(tmp_path), "--p4"]) == 0
    for name in FILES:
        assert (tmp_path / name).read_text() == (GOLDEN / "int" / name).read_text()
