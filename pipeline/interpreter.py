"""The one Python table interpreter: a pipeline's tables holding entries, and the stage walk.

`Tables` installs reduced entries (`pipeline.entries.Entry`) into one structure per table
(the match kind's, from `pipeline.match_kinds`; default and leaf tables are keyed by the
state alone), looks them up, and walks an application's stages the way docs/pipeline-ir.md
says every target must: from state 0, each stage looks up (state, field value), then the
state alone in its default table, a miss in both keeping the state; `fwd`/`mcast` decide at
once, else the leaf table decides; `mcast(ports)` replicates through the application's
multicast group and keeps the replicas whose port's bit is set. An application with several
lanes walks each the same way from state 0, and the message's replicas are the union of every
lane's decision's (`decisions`, `replicas_of`). `camus eval` runs it on JSON messages (`load`), the
reference switch on packets (it counts hits and misses by overriding `lookup`).
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.entries import Entry, check_version, parse_entry, parse_group
from pipeline.match_kinds import MATCH_KINDS
from pipeline.model import Application, Field, Pipeline, Table

Result = tuple[str, int]  # (action, parameter)


class StateTable:
    """Keyed by the state alone (default and leaf tables)."""

    def __init__(self) -> None:
        self.map: dict[int, Result] = {}

    def install(self, state: int, a: int, b: int, priority: int, result: Result) -> None:
        self.map[state] = result

    def uninstall(self, state: int, a: int, b: int, priority: int) -> None:
        del self.map[state]

    def lookup(self, state: int, value: int) -> Result | None:
        return self.map.get(state)


def new_table(info: Table):
    """An empty structure for one table of the pipeline."""
    kind = info.match_kind
    if kind is None:
        return StateTable()
    return MATCH_KINDS[kind].table(info.keys[-1].width)


class Tables:
    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.tables = {name: new_table(info) for name, info in pipeline.tables.items()}
        self.groups: dict[int, tuple[tuple[int, int], ...]] = {}

    def install(self, e: Entry) -> None:
        """Add `e`, or replace the action of the entry with its key."""
        self.tables[e.table].install(e.state, e.a, e.b, e.priority, (e.action, e.param))

    def uninstall(self, e: Entry) -> None:
        self.tables[e.table].uninstall(e.state, e.a, e.b, e.priority)

    def lookup(self, table: str, state: int, value: int = 0) -> Result | None:
        return self.tables[table].lookup(state, value)

    def decide(self, app: Application, value: Callable[[Field], int]) -> Result | None:
        """The deciding (action, parameter) of the application's first lane (its only one, for
        a one-lane application) for a message whose field values `value` gives."""
        return self.walk(app.stages, app.leaf_table, value)

    def decisions(self, app: Application, value: Callable[[Field], int]) -> list[Result]:
        """Every lane's decision (lanes that decide nothing left out), in lane order."""
        if not app.lanes:
            hit = self.walk(app.stages, app.leaf_table, value)
            return [] if hit is None else [hit]
        out = []
        for lane in app.all_lanes:
            hit = self.walk(lane.stages, lane.leaf_table, value)
            if hit is not None:
                out.append(hit)
        return out

    def walk(self, stages, leaf_table: str, value: Callable[[Field], int]) -> Result | None:
        """One lane's walk: its stages from state 0, then its leaf."""
        state = 0
        lookup = self.lookup
        for stage in stages:
            hit = lookup(stage.table, state, value(stage.field))
            if hit is None:
                hit = lookup(stage.default_table, state)
            if hit is None:
                continue  # a miss in both keeps the state
            if hit[0] != "set_state":
                return hit  # fwd/mcast decide: later stages and the leaf are skipped
            state = hit[1]
        return lookup(leaf_table, state)

    def replicas(self, app: Application, decision: Result | None) -> tuple[tuple[int, int], ...]:
        """The (port, rid) replicas of a decision: fwd's port; for mcast, the replicas of the
        application's group whose port's bit is set (none if the group is absent)."""
        if decision is None:
            return ()
        action, param = decision
        if action == "fwd":
            return ((param, 0),)
        return tuple(r for r in self.groups.get(app.multicast_group, ()) if param >> r[0] & 1)

    def replicas_of(self, app: Application,
                    decisions: list[Result]) -> tuple[tuple[int, int], ...]:
        """The union of the replicas of several lanes' decisions, in ascending order."""
        if len(decisions) == 1:
            return self.replicas(app, decisions[0])
        return tuple(sorted({r for d in decisions for r in self.replicas(app, d)}))

    def ports(self, app: Application, values: dict[str, int]) -> frozenset[int]:
        """The port set the tables give a message with these field values (by header.field)."""
        return frozenset(p for p, _ in self.replicas_of(
            app, self.decisions(app, lambda f: values[f.name])))


def load(pipeline: Pipeline, entries: dict) -> Tables:
    """Tables holding an entries.json document (checked as the switch checks it)."""
    check_version(entries)
    t = Tables(pipeline)
    for g in entries.get("multicast_groups", []):
        gid, replicas = parse_group(g)
        t.groups[gid] = replicas
    for e in entries.get("table_entries", []):
        t.install(parse_entry(pipeline, e))
    return t
