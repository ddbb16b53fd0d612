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

An application with state (IR 4) may decide `stateful(ctx)`: `process` then runs the state
stages of docs/pipeline-ir.md ("State") step by step on `registers` (register name -> cells,
a missing cell being 0) at the message's time, and gives the decide table's port bitmap. The
stateless calls (`decisions`, `ports`) never touch registers.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.entries import Entry, check_version, parse_entry, parse_group
from pipeline.match_kinds import MATCH_KINDS
from pipeline.model import (COUNT_WIDTH, REGION_WIDTH, SUM_WIDTH, TAG_WIDTH, Application,
                            Field, Pipeline, StateVar, Table)

Result = tuple[str, int]  # (action, parameter); (action, (parameters...)) for bind and decide
N_MAX = (1 << COUNT_WIDTH) - 1
S_MAX = (1 << SUM_WIDTH) - 1


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
        # Every register of every state (IR 4), as {cell index: cell}; absent cells are 0.
        self.registers: dict[str, dict[int, int]] = {
            r: {} for app in pipeline.applications if app.state
            for var in app.state.vars for r in var.registers}

    def install(self, e: Entry) -> None:
        """Add `e`, or replace the action of the entry with its key."""
        result = (e.action, e.params) if e.params else (e.action, e.param)
        self.tables[e.table].install(e.state, e.a, e.b, e.priority, result)

    def reset_cells(self, register: str, first: int, count: int) -> None:
        """Zero cells first..first+count-1 of a register (a new rule's instances)."""
        cells = self.registers[register]
        for i in range(first, first + count):
            cells.pop(i, None)

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
        """The port set the tables give a message with these field values (by header.field).
        ValueError if the message needs state (an application with state: `ports_at`)."""
        decisions = self.decisions(app, lambda f: values[f.name])
        if any(d[0] == "stateful" for d in decisions):
            raise ValueError("this message's decision reads state, which needs its time: "
                             "use ports_at (camus eval: give \"@ts\")")
        return frozenset(p for p, _ in self.replicas_of(app, decisions))

    # ---- state (IR 4; docs/pipeline-ir.md, "State") -----------------------------------

    def process(self, app: Application, value: Callable[[Field], int], ts_us: int,
                length: int) -> tuple[tuple[int, int], ...]:
        """The replicas of one message at time `ts_us` (µs; the time field's value instead
        when the application declares one) and `length` bytes, running the state stages
        (and updating the registers) when the walk decides `stateful(ctx)`."""
        decisions = self.decisions(app, value)
        if decisions and decisions[0][0] == "stateful":  # an application with state: one lane
            decisions = [("mcast", self.run_state(app, decisions[0][1], value, ts_us, length))]
        return self.replicas_of(app, decisions)

    def ports_at(self, app: Application, values: dict[str, int], ts_us: int,
                 length: int | None = None) -> frozenset[int]:
        """`ports` of a timed message (length None: the spec's message size)."""
        replicas = self.process(app, lambda f: values.get(f.name, 0), ts_us,
                                app.message_bytes if length is None else length)
        return frozenset(p for p, _ in replicas)

    def run_state(self, app: Application, ctx: int, value: Callable[[Field], int], ts_us: int,
                  length: int) -> int:
        """Steps 3-5 of the per-message algorithm for context `ctx`: the decided port bitmap."""
        st = app.state
        if st.timestamp is not None:
            ts_us = st.timestamp.ts_us(value(st.timestamp.field))
        ts_us &= (1 << TAG_WIDTH) - 1
        lookup = self.lookup
        regions, writes, g = 0, [], 0
        for var in st.vars:
            for b, table in enumerate(var.bind_tables):
                hit = lookup(table, ctx)
                if hit is not None:
                    r, write = self._bank(var, b, hit[1], value, ts_us, length)
                    regions |= r << (REGION_WIDTH * g)
                    writes.append((g, write))
                g += 1
        hit = lookup(st.decide_table, ctx, regions)
        ports, update = hit[1] if hit is not None else (0, 0)
        for g, (cells, idx, cell, scoped) in writes:
            if scoped or update >> g & 1:
                cells[idx] = cell
        return ports

    def _bank(self, var: StateVar, bank: int, params: tuple[int, ...],
              value: Callable[[Field], int], ts_us: int, length: int) -> tuple[int, tuple]:
        """One bound bank: its region, and (cells, index, new cell, scoped) to write."""
        base, scoped, bounds, strict, *thresholds = params
        idx = base + (value(var.key) & (var.buckets - 1) if var.key is not None else 0)
        cells = self.registers[var.registers[bank]]
        tag, n, s = unpack_cell(var, cells.get(idx, 0))
        w = ts_us // var.window_us
        if tag != w:
            n = s = 0
        dn = length if var.kind == "meter" and var.unit == "bytes" else 1
        ds = value(var.field) if var.kind == "average" else 0
        n2, s2 = (n + dn, s + ds) if n + dn <= N_MAX and s + ds <= S_MAX else (n, s)
        cn, cs = (n2, s2) if scoped else (n, s)
        region = 0
        for j in range(bounds):
            t, strict_j = thresholds[j], strict >> j & 1
            if var.kind != "average":
                ok = cn > t if strict_j else cn >= t
            elif cn == 0:
                ok = not strict_j and t == 0
            else:
                ok = cs > t * cn if strict_j else cs >= t * cn
            region += ok
        return region, (cells, idx, pack_cell(var, w, n2, s2), scoped)


def pack_cell(var: StateVar, tag: int, n: int, s: int) -> int:
    """A cell's bits: tag | n (| s for an average), from the high bits."""
    if var.kind == "average":
        return tag << (COUNT_WIDTH + SUM_WIDTH) | n << SUM_WIDTH | s
    return tag << COUNT_WIDTH | n


def unpack_cell(var: StateVar, cell: int) -> tuple[int, int, int]:
    """(tag, n, s) of a cell (s is 0 but for an average)."""
    if var.kind == "average":
        return cell >> (COUNT_WIDTH + SUM_WIDTH), cell >> SUM_WIDTH & N_MAX, cell & S_MAX
    return cell >> COUNT_WIDTH, cell & N_MAX, 0


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
