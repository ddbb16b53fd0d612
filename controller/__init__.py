"""camus's controller: pushes compiled pipelines and entries to targets over P4Runtime.

`controller.p4runtime_client` is the P4Runtime connection (arbitration, pipeline config,
batched writes with per-update errors, reads); `controller.push` makes a target hold a
compiled entries.json, writing only the difference; `controller.cli` is `camus controller`.
"""
