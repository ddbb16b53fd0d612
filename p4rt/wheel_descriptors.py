"""How p4rt/p4runtime.binpb is made: the descriptors that the `p4runtime` wheel's modules carry.

    python -m p4rt.wheel_descriptors    # after changing the p4runtime pin in setup.cfg

The wheel's generated modules predate protobuf 4 and run only in protobuf's pure-Python mode,
which is chosen by an environment variable before protobuf is first imported. So they are
imported here in a child process started in that mode, and each one's serialized
FileDescriptorProto is collected into one FileDescriptorSet: exactly the data protoc would
embed in newly generated modules. tests/p4runtime/test_p4rt_protos.py checks that the
committed file is still what the installed wheel carries.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DESCRIPTORS = Path(__file__).with_name("p4runtime.binpb")
# The wheel's generated modules by the file each one holds, every file after those it imports
# (the Python modules of the well-known and google.rpc files it imports are modern already).
MODULES = {
    "p4/config/v1/p4types.proto": "p4.config.v1.p4types_pb2",
    "p4/config/v1/p4info.proto": "p4.config.v1.p4info_pb2",
    "p4/v1/p4data.proto": "p4.v1.p4data_pb2",
    "p4/v1/p4runtime.proto": "p4.v1.p4runtime_pb2",
}

_CHILD = """
import importlib, sys
from google.protobuf import descriptor_pb2
files = descriptor_pb2.FileDescriptorSet()
for name in sys.argv[1:]:
    files.file.add().ParseFromString(importlib.import_module(name).DESCRIPTOR.serialized_pb)
sys.stdout.buffer.write(files.SerializeToString(deterministic=True))
"""


def wheel_descriptors() -> bytes:
    """The installed wheel's files as a serialized FileDescriptorSet, in `MODULES` order."""
    env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}
    return subprocess.run([sys.executable, "-c", _CHILD, *MODULES.values()], env=env, check=True,
                          capture_output=True).stdout


def main() -> int:
    DESCRIPTORS.write_bytes(wheel_descriptors())
    print(f"wrote {DESCRIPTORS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
