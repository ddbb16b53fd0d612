"""The paper's claim for this application: "Although the subscription predicates on many
fields, it can be evaluated in a single pipeline pass, without recirculation" (seed 000,
section V-6).

In camus a pass is one walk of the field-ordered stages: the report is parsed once, each
stage table (one per query field, in the compiler's field order) is looked up at most once,
taking the decision-diagram state to the next, and the last stage or the leaf gives the port
set. Several fields cost several stages, never several passes. What would cost passes is
several messages in one packet: a MoldUDP64 application's program resubmits the packet once
per further message (docs/p4.md); a position report is one message per packet (`single`
framing), so nothing here may resubmit, recirculate or clone.

Checked three ways, each on what actually runs:

* `program`: the static P4 program generated from the spec (what a P4 target runs) applies
  every stage table once on the report's path and holds no resubmit, recirculate or clone
  call;
* `p4c`: where p4c-bm2-ss is on PATH, its bmv2 JSON for that program: the primitives its
  actions use (no `resubmit`, `recirculate`, `clone*`) and the ingress tables;
* `counters`: the software switch's table counters after the run: the first stage was looked
  up exactly once per report it received, no stage table more often than that.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from compiler.compile import compile_rules
from compiler.p4 import emit_program
from compiler.spec import Spec
from pipeline.model import Application

P4C = "p4c-bm2-ss"
# Statements and bmv2 primitives that would send a packet through the pipeline again.
AGAIN = ("resubmit", "recirculate", "clone")


@dataclass
class ProgramCheck:
    stage_tables: list[str]  # in the program's (the spec's) field order
    applies: dict[str, int]  # table -> `.apply()` calls in the program text
    again: list[str]  # resubmit/recirculate/clone calls found
    lines: int

    @property
    def ok(self) -> bool:
        return not self.again and all(self.applies.get(t) == 1 for t in self.stage_tables)


@dataclass
class P4cCheck:
    ran: bool
    why_not: str = ""
    primitives: list[str] = field(default_factory=list)
    ingress_tables: list[str] = field(default_factory=list)

    @property
    def again(self) -> list[str]:
        return [p for p in self.primitives if p.startswith(AGAIN)]

    @property
    def ok(self) -> bool:
        return not self.ran or not self.again


def program_check(spec: Spec, out: Path) -> tuple[ProgramCheck, Path]:
    """Generate the spec's static program into `out/program.p4` and read it."""
    static = compile_rules(spec, [], static=True)
    app = static.application
    text = emit_program(static.pipeline)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "program.p4"
    path.write_text(text)
    tables = [s.table for s in app.stages] + [s.default_table for s in app.stages] + [app.leaf_table]
    applies = {t: len(re.findall(rf"\b{re.escape(t)}\.apply\(\)", text)) for t in tables}
    again = [m.group(0) for m in re.finditer(r"\b(resubmit\w*|recirculate\w*|clone\w*)\s*\(", text)]
    return ProgramCheck([s.table for s in app.stages], applies, again, text.count("\n")), path


def p4c_check(program: Path, out: Path) -> P4cCheck:
    """p4c-bm2-ss on `program` (where it is on PATH); the bmv2 JSON's primitives and tables."""
    if shutil.which(P4C) is None:
        return P4cCheck(False, f"{P4C} is not on PATH")
    from controller.launch import p4c_compile

    try:
        _, program_json = p4c_compile(program, out, error=RuntimeError)
    except RuntimeError as exc:
        return P4cCheck(False, str(exc).splitlines()[0])
    doc = json.loads(Path(program_json).read_text())
    primitives = sorted({p["op"] for a in doc["actions"] for p in a["primitives"]})
    ingress = next((p for p in doc["pipelines"] if p["name"] == "ingress"), {"tables": []})
    return P4cCheck(True, "", primitives, [t["name"] for t in ingress["tables"]])


@dataclass
class CounterCheck:
    received: int  # reports the switch took in on its ingress port
    lookups: dict[str, int]  # stage or leaf table -> hits + misses, in walk order

    @property
    def ok(self) -> bool:
        first = next(iter(self.lookups.values()), None)
        return first == self.received and all(n <= self.received for n in self.lookups.values())


def counter_check(app: Application, received: int, tables: dict[str, tuple[int, int]]) -> CounterCheck:
    """`tables`: the switch's counters, table -> (hits, misses)."""
    names = [s.table for s in app.stages] + [app.leaf_table]
    return CounterCheck(received, {t: sum(tables.get(t, (0, 0))) for t in names})
