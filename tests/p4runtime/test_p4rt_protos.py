"""p4rt's protobuf modules: the wheel's own descriptors, registered under the wheel's names, and
no grpc for the compiler."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2

from p4rt.protos import p4runtime_pb2
from p4rt.wheel_descriptors import DESCRIPTORS, wheel_descriptors

ROOT = Path(__file__).resolve().parents[2]


def test_committed_descriptors_are_the_installed_wheels():
    """If this fails after a p4runtime upgrade: python -m p4rt.wheel_descriptors, and commit."""
    committed = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTORS.read_bytes())
    assert committed == descriptor_pb2.FileDescriptorSet.FromString(wheel_descriptors())


def test_the_wheels_stubs_use_these_modules():
    from p4.v1 import p4runtime_pb2 as by_wheel_name

    from p4rt.stubs import p4runtime_pb2_grpc

    assert by_wheel_name is p4runtime_pb2 is sys.modules["p4.v1.p4runtime_pb2"]
    assert p4runtime_pb2_grpc.p4_dot_v1_dot_p4runtime__pb2 is p4runtime_pb2
    request = p4runtime_pb2.WriteRequest(device_id=1)
    request.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.table_id = 7
    assert p4runtime_pb2.WriteRequest.FromString(request.SerializeToString()) == request


def test_compiling_and_writing_p4_does_not_import_grpc(tmp_path):
    code = (
        "import sys\n"
        "from compiler.compile import compile_files\n"
        "from compiler.p4 import write_p4\n"
        "c = compile_files('p4/itch/itch.p4', 'examples/itch.rules')\n"
        f"write_p4(c.pipeline, c.entries, {str(tmp_path)!r})\n"
        "print(sorted(m for m in sys.modules if m == 'grpc' or m.startswith('grpc.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert (tmp_path / "p4info.txtpb").exists() and (tmp_path / "entries.txtpb").exists()
