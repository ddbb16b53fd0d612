"""P4 emission: the pipeline IR as a P4_16 v1model program, with its P4Info and entries.

`emit_program(pipeline)` writes the program (`compiler.p4.program`, controls in
`compiler.p4.controls`); `write_p4(pipeline, entries, out)` writes `program.p4`,
`p4info.txtpb` and `entries.txtpb` into a directory, which is what `camus compile --p4` and
`python -m compiler.p4` (several specs in one program) call. The program needs a few entries
beyond entries.json, derived from it (`compiler.p4.derived`: the all-ports multicast group
and the egress membership tables for MoldUDP64); entries.txtpb includes them, and a
controller writes them to a P4 target with `derived.for_target`. docs/p4.md describes the
program, the MoldUDP64 design and its limits, and how to run it on bmv2.
"""

from compiler.p4.program import emit_program
from compiler.p4.runtime import entries_text, p4info_text, write_p4

__all__ = ["emit_program", "entries_text", "p4info_text", "write_p4"]
