"""Everything P4Runtime, shared by the compiler's P4 output, the controller and the software switch.

Below `compiler`, `switch` and `controller`, above `pipeline`; it imports none of them.

* `protos`: the standard P4Runtime protobuf modules; `stubs`: their gRPC stubs (grpc only there).
* `names`: the P4 names of a camus program; `ids`: p4c's id and alias algorithm.
* `p4info`: the program's P4Info and the software switch's, one set of ids for both.
* `index`: names <-> ids of a P4Info; `entries`: entries.json <-> TableEntry and multicast
  groups, dispatching match kinds through `match_kinds`, values as `values` bytestrings.
* `entry_key`: what identifies an entry, for every diff (no protobuf needed).
"""
