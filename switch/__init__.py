"""camus's software switch: executes a pipeline IR (docs/pipeline-ir.md) on packets.

`switch.dataplane` is the in-process interface (construct from pipeline.json, write
entries.json entries, process packets, read counters); `switch.reference` is the pure-Python
implementation that defines the semantics in code, `switch.native_dataplane` the compiled fast
path (the `switch._native` Rust extension, crate switch/native/, loaded and checked by
`switch.native_switch`) behind the same interface. `switch.cli` holds the
`camus switch ...` commands.
"""
