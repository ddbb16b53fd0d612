"""camus's controller: the targets compiled pipelines run on, and how they are programmed.

`controller.target` is the `Target` the broker drives (load, entry diff, frames in, copies
reported), the interface alone; `controller.targets.open_target` is the one place that knows
which targets exist;
`controller.embedded` is the in-process software switch as a target. `controller.diff`
computes the writes between two entries documents. `controller.p4runtime_client` is the
P4Runtime connection (arbitration, pipeline config, batched writes with per-update errors,
reads); `controller.push` makes a P4Runtime target hold a compiled entries.json, writing
only the difference; `controller.cli` is `camus controller`.
"""
