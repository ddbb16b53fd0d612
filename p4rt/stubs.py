"""The P4Runtime gRPC service stubs (the `p4runtime` wheel's `p4runtime_pb2_grpc`, unmodified).

Kept apart from `p4rt.protos` because they import grpc: only the P4Runtime client
(controller/p4runtime_client.py) and server (switch/p4runtime_server.py) need them, and the
compiler, which writes P4Info and entries with `p4rt.protos`, must not pull grpc in.
Importing `p4rt.protos` first registers the message modules the stubs import by name.
"""

from p4rt import protos  # noqa: F401  (registers p4.v1.p4runtime_pb2 before the stubs import it)
from p4.v1 import p4runtime_pb2_grpc

__all__ = ["p4runtime_pb2_grpc"]
