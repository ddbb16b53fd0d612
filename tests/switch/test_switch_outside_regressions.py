"""Regressions found by the outside brute-force judge (tests/compiler/outside.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from switch.dataplane import load
from switch_helpers import ITCH_PIPELINE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("port", ["-1", "4294967296", "x"])
def test_switch_run_refuses_an_ingress_port_that_is_not_32_bit(tmp_path, port):
    # It was an OverflowError traceback from the native data plane (the python one took it).
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "pipeline.json").write_text(__import__("json").dumps(ITCH_PIPELINE))
    (tmp_path / "in.pcap").write_bytes(b"")
    p = subprocess.run([sys.executable, "-m", "camus", "switch", "run", "--pipeline", str(tmp_path / "p"),
                        "--pcap-in", str(tmp_path / "in.pcap"), "--out-dir", str(tmp_path / "o"),
                        f"--in-port={port}"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "--in-port" in p.stderr, p.stderr


@pytest.mark.parametrize("impl", ["native", "python"])
def test_both_data_planes_refuse_an_ingress_port_that_is_not_32_bit(impl):
    dp = load(ITCH_PIPELINE, None, impl=impl)
    for port in (-1, 1 << 32):
        with pytest.raises(OverflowError):
            dp.process(b"\0" * 60, port)
    assert dp.process(b"\0" * 60, (1 << 32) - 1) == []
