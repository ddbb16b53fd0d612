"""P4 emission: the pipeline IR as a P4_16 v1model program, with its P4Info and entries.

`emit_program(pipeline)` writes the program (`compiler.p4.program`, controls in
`compiler.p4.controls`); `write_p4(pipeline, entries, out)` writes `program.p4`,
`p4info.txtpb` and `entries.txtpb` into a directory, which is what `camus compile --p4` and
`python -m compiler.p4` (several specs in one program) call. The program needs exactly the
entries of entries.json: port-bitmap decisions replicate through each application's one
multicast group and egress prunes per copy, so no table or group is derived for the P4
target. docs/p4.md describes the program, the MoldUDP64 design and its limits, and how to
run it on bmv2.
"""

from compiler.p4.program import emit_program
from compiler.p4.runtime import entries_text, p4info_text, write_p4

__all__ = ["emit_program", "entries_text", "p4info_text", "write_p4"]
