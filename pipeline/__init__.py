"""The typed pipeline IR: what the compiler hands to every target, in one model.

`pipeline.model` holds the dataclasses (applications, stages, tables with their role,
actions with their parameter widths); `pipeline.document` reads and writes pipeline.json
(docs/pipeline-ir.md) and is the one place it is validated; `pipeline.match_kinds` is the
registry of match kinds (how each appears in the IR, in entries.json, in P4Info and
P4Runtime, how an entry of it is reduced, looked up and refused when it conflicts);
`pipeline.entries` reads and checks entries.json; `pipeline.interpreter` executes the
tables (what `camus eval` and the reference switch run).

This package is the bottom layer: it imports nothing else of camus.
"""
