"""Pushing a compiled pipeline directory to a P4Runtime target, writing only what changed.

`push(client, config, entries)` makes the target hold exactly `entries` (entries.json):
1. It asks the target for its config cookie; if the target runs another config (or none), it
   sets ours (VERIFY_AND_COMMIT), which leaves the target empty.
2. It reads what the target holds (table entries of every table, multicast groups), decoded by
   name through the P4Info the target reports, and diffs that against `entries` with
   `controller.diff` (the same difference the broker applies to its embedded switch).
3. It writes the difference in diff's order, one Write per step (never a dangling group
   reference, never a transient range overlap), groups as INSERT or MODIFY depending on
   what the target has.

State (IR 4, docs/pipeline-ir.md "State"): a new rule's instances start empty, so before the
new entries go in, `push` zeroes the register cells of every instance range of `entries`
(`state_instances`) that the target may hold stale values in: all of them, or with
`previous` (the document the target was last given) those not held there by the same rule
(text and line). A pipeline just set needs none (its cells start 0). Cells are zeroed with
P4Runtime `RegisterEntry` MODIFYs; a server that refuses them (bmv2's, "Register writes are
not supported yet") gets `write_cells` if the caller has another way (tests/p4's bmv2
harness: bmv2's Thrift CLI), or else, when every range is to be zeroed anyway, the pipeline
set anew (every cell 0, every entry written again); a selective reset it cannot do is an
error (`CellsUnwritable`), never a silent carry-over.

The cookie is a hash of the P4Info and device config, so an unchanged pipeline is never
re-pushed (that would wipe every entry). Desired entries are round-tripped through the
P4Runtime encoding before the diff, so the two sides are compared in one canonical form.
`TargetConfig` builds the software switch's config from pipeline.json, or takes a P4Info and
device config written by p4c for bmv2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import text_format

from controller.diff import diff
from controller.p4runtime_client import DEFAULT_BATCH, P4RuntimeClient, WriteError
from p4rt.entries import entry_dict, group_dict, multicast_entry, register_entry, table_entry
from p4rt.entry_key import entry_key
from p4rt.index import P4InfoIndex
from p4rt.p4info import build_p4info, config_cookie
from p4rt.protos import code_pb2, p4info_pb2, p4runtime_pb2
from pipeline import document
from pipeline.entries import parse_instance
from pipeline.model import Pipeline

Update = p4runtime_pb2.Update


@dataclass
class TargetConfig:
    p4info: p4info_pb2.P4Info
    device_config: bytes

    @property
    def cookie(self) -> int:
        return config_cookie(self.p4info, self.device_config)

    @classmethod
    def software_switch(cls, directory: str | Path) -> "TargetConfig":
        """camus's software switch: P4Info from the IR, device config = pipeline.json."""
        raw = (Path(directory) / "pipeline.json").read_bytes()
        return cls(build_p4info(document.from_json(json.loads(raw)), counters=True), raw)

    @classmethod
    def from_files(cls, p4info_path: str | Path, device_config_path: str | Path) -> "TargetConfig":
        """A p4c output (e.g. bmv2: `prog.p4info.txtpb` and `prog.json`)."""
        data = Path(p4info_path).read_bytes()
        info = p4info_pb2.P4Info()
        try:
            text_format.Parse(data.decode(), info)
        except (UnicodeDecodeError, text_format.ParseError):
            info.ParseFromString(data)
        return cls(info, Path(device_config_path).read_bytes())


@dataclass
class PushReport:
    pipeline_set: bool = False
    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    groups: dict[str, int] = field(default_factory=lambda: {"inserted": 0, "modified": 0, "deleted": 0})
    cells_zeroed: int = 0  # register cells of new rules' instances (IR 4)

    @property
    def updates(self) -> int:
        return self.inserted + self.modified + self.deleted + sum(self.groups.values())

    def __str__(self) -> str:
        g = self.groups
        return (f"{'pipeline set; ' if self.pipeline_set else ''}table entries: {self.inserted} inserted, "
                f"{self.modified} modified, {self.deleted} deleted; multicast groups: {g['inserted']} inserted, "
                f"{g['modified']} modified, {g['deleted']} deleted"
                + (f"; {self.cells_zeroed} register cells zeroed" if self.cells_zeroed else ""))


class CellsUnwritable(Exception):
    """The target refuses register writes, and the cells to zero are not all of them."""


Cells = tuple[str, int, int]  # (register, first cell, count), as Changes.reset_cells


def cell_resets(pipeline: Pipeline, entries: dict, previous: dict | None = None) -> list[Cells]:
    """The cells to zero before `entries` is installed over a target that runs `pipeline`
    already: every instance range of `entries`, or only those `previous` does not hold with
    the same rule (docs/pipeline-ir.md, "Slots, instances and resets")."""
    held = set()
    for doc in (previous or {}).get("state_instances", ()):
        i = parse_instance(pipeline, doc)
        held.add((i.application, i.state, i.bank, i.base, i.buckets, i.rule, i.line))
    out = []
    for doc in entries.get("state_instances", ()):
        i = parse_instance(pipeline, doc)
        if (i.application, i.state, i.bank, i.base, i.buckets, i.rule, i.line) in held:
            continue
        app = next(a for a in pipeline.applications if a.name == i.application)
        var = next(v for v in app.state.vars if v.name == i.state)
        out.append((var.registers[i.bank], i.base, i.buckets))
    return out


def reset_updates(index: P4InfoIndex, cells: list[Cells]) -> list[p4runtime_pb2.Update]:
    """RegisterEntry MODIFYs writing 0 into every cell of `cells` (P4Runtime has no range
    write: one update per cell)."""
    return [_update(Update.MODIFY, register_entry=register_entry(index, register, i, 0))
            for register, first, count in cells for i in range(first, first + count)]


def write_resets(client: P4RuntimeClient, index: P4InfoIndex, cells: list[Cells], batch: int,
                 write_cells=None) -> None:
    """Zero `cells` through P4Runtime or, where the server refuses register writes,
    `write_cells(register P4 name, first, count)`; CellsUnwritable if neither can."""
    try:
        client.write(reset_updates(index, cells), batch)
        return
    except WriteError as exc:
        if not all(e.code == code_pb2.UNIMPLEMENTED for e in exc.errors):
            raise
        why = exc.errors[0].message
    if write_cells is None:
        raise CellsUnwritable(f"the target cannot write register cells through P4Runtime ({why}), "
                              f"and {sum(c for _, _, c in cells)} cells of new rules must be zeroed")
    for register, first, count in cells:
        write_cells(index.register(register).name, first, count)


def _update(kind: int, **entity) -> p4runtime_pb2.Update:
    return Update(type=kind, entity=p4runtime_pb2.Entity(**entity))


def ensure_pipeline(client: P4RuntimeClient, config: TargetConfig, force: bool = False) -> bool:
    """Set `config` unless the target already runs it (`force`: set it anyway, which leaves
    the target empty: no entry, no group, every register cell 0); return whether it was set."""
    try:
        current = client.get_pipeline("COOKIE_ONLY").cookie.cookie
    except grpc.RpcError as exc:
        if exc.code() not in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND,
                              grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNIMPLEMENTED):
            raise
        current = None
    if current == config.cookie and not force:
        return False
    if current is not None:
        _delete_groups(client)
    client.set_pipeline(config.p4info, config.device_config, config.cookie)
    return True


def _delete_groups(client: P4RuntimeClient) -> None:
    """Delete every multicast group the target holds, before its pipeline is replaced.

    bmv2 keeps its replication engine's groups across SetForwardingPipelineConfig while its
    P4Runtime server (PI) forgets them: a group id written again under the new pipeline then
    replicates through the old group's replicas as well as the new ones (duplicate copies,
    copies to ports no rule names; found by tests/p4/test_bmv2_differential.py). Deleted
    through P4Runtime while PI still knows them, they are gone from the engine too."""
    wildcard = p4runtime_pb2.PacketReplicationEngineEntry()
    wildcard.multicast_group_entry.multicast_group_id = 0
    try:
        held = [e.packet_replication_engine_entry
                for e in client.read([p4runtime_pb2.Entity(packet_replication_engine_entry=wildcard)])]
    except grpc.RpcError as exc:
        if exc.code() not in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.FAILED_PRECONDITION):
            raise
        return  # an older PI cannot read groups back; nothing to delete that we know of
    if held:
        client.write([_update(Update.DELETE, packet_replication_engine_entry=g) for g in held])


def read_state(client: P4RuntimeClient, index: P4InfoIndex) -> tuple[dict, dict | None]:
    """What the target holds: {entry key: entry} and {group id: group} (None if unreadable)."""
    entries = {}
    for e in client.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())]):
        d = entry_dict(index, e.table_entry)
        entries[entry_key(d)] = d
    try:
        wildcard = p4runtime_pb2.PacketReplicationEngineEntry()
        wildcard.multicast_group_entry.multicast_group_id = 0
        groups = {}
        for e in client.read([p4runtime_pb2.Entity(packet_replication_engine_entry=wildcard)]):
            g = group_dict(e.packet_replication_engine_entry)
            groups[g["id"]] = g
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
            raise
        groups = None  # older bmv2 cannot read groups back
    return entries, groups


def push(client: P4RuntimeClient, config: TargetConfig, entries: dict,
         batch: int = DEFAULT_BATCH, *, pipeline: Pipeline | None = None, previous: dict | None = None,
         write_cells=None, fresh: bool = False) -> PushReport:
    """Make the target hold exactly `entries`; WriteError lists the updates that failed.
    `fresh`: set the pipeline even if the target runs it already (every cell 0, no entry).

    State (entries with `state_instances`): `pipeline` is the IR the target runs (read from
    the config's pipeline.json when that is the device config: the software switch's), and
    the cells of new instances are zeroed (`cell_resets`, `write_resets`, the module's
    docstring)."""
    report = PushReport(pipeline_set=ensure_pipeline(client, config, force=fresh))
    resets: list[Cells] = []
    if entries.get("state_instances") and not report.pipeline_set:
        if pipeline is None:
            try:
                pipeline = document.from_json(json.loads(config.device_config))
            except (ValueError, UnicodeDecodeError) as exc:
                raise ValueError("entries with state need the pipeline to zero their cells: "
                                 "push(..., pipeline=...)") from exc
        resets = cell_resets(pipeline, entries, previous)
    index = P4InfoIndex(client.get_pipeline("P4INFO_AND_COOKIE").p4info)
    want = {}
    for e in entries.get("table_entries", []):
        d = entry_dict(index, table_entry(index, e))  # canonical form, checked against the P4Info
        want[entry_key(d)] = d
    want_groups = {g["id"]: group_dict(multicast_entry(g)) for g in entries.get("multicast_groups", [])}
    have, have_groups = ({}, {}) if report.pipeline_set else read_state(client, index)
    unknown_groups = have_groups is None
    have_groups = have_groups or {}
    changes = diff({"table_entries": list(have.values()), "multicast_groups": list(have_groups.values())},
                   {"table_entries": list(want.values()), "multicast_groups": list(want_groups.values())})

    def te(d: dict) -> p4runtime_pb2.TableEntry:
        return table_entry(index, d)

    def pre(gid: int) -> p4runtime_pb2.PacketReplicationEngineEntry:
        return multicast_entry(want_groups[gid] if gid in want_groups else have_groups[gid])

    group_new = [g for g in sorted(changes.set_groups) if g not in have_groups]
    group_changed = [g for g in sorted(changes.set_groups) if g in have_groups]
    # controller.diff's steps, each a Write of its own (a server may reorder within one): no
    # dangling group reference, no transient overlap.
    steps = [[_update(Update.DELETE, table_entry=te(e)) for e in changes.delete],
             [_update(Update.INSERT, packet_replication_engine_entry=pre(g)) for g in group_new]
             + [_update(Update.MODIFY, packet_replication_engine_entry=pre(g)) for g in group_changed],
             [_update(Update.INSERT, table_entry=te(e)) for e in changes.insert],
             [_update(Update.MODIFY, table_entry=te(e)) for e in changes.modify],
             [_update(Update.DELETE, packet_replication_engine_entry=pre(g)) for g in changes.delete_groups]]
    errors = []
    try:  # stale entries out (no packet reaches a cell through them any more), groups in
        client.write_steps(steps[:2], batch)
    except WriteError as exc:
        errors += exc.errors
    if resets:  # then the new instances' cells zeroed, before any entry binds them
        try:
            write_resets(client, index, resets, batch, write_cells)
        except CellsUnwritable:
            if previous is not None or errors:
                raise
            # Every range is to be zeroed: a program set anew does that (and takes every
            # entry again).
            return push(client, config, entries, batch, pipeline=pipeline, fresh=True)
        report.cells_zeroed = sum(count for _, _, count in resets)
    try:
        client.write_steps(steps[2:], batch)
    except WriteError as exc:
        errors += exc.errors
    if errors:
        if unknown_groups:
            errors = _retry_existing_groups(client, errors, batch)
        if errors:
            raise WriteError(errors) from None
    report.deleted, report.inserted, report.modified = len(changes.delete), len(changes.insert), len(changes.modify)
    report.groups.update(inserted=len(group_new), modified=len(group_changed), deleted=len(changes.delete_groups))
    return report


def _retry_existing_groups(client: P4RuntimeClient, errors: list, batch: int) -> list:
    """Where groups could not be read, an insert of an existing group becomes a modify."""
    retry = [e for e in errors if e.code == code_pb2.ALREADY_EXISTS and e.update is not None
             and e.update.entity.WhichOneof("entity") == "packet_replication_engine_entry"]
    rest = [e for e in errors if e not in retry]
    if retry:
        try:
            client.write([Update(type=Update.MODIFY, entity=e.update.entity) for e in retry], batch)
        except WriteError as exc:
            rest += exc.errors
    return rest
