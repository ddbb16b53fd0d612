"""Several applications and plain IPv4 forwarding in one static program (seed 000, §V-D).

`Switchboard` compiles each application's rules on its own, against its own spec, into the
tables of that application only (`{name}_...`, its own multicast group), and the routes into
`ipv4_lpm`. The program is static (`compile_rules(static=True)`: every query field of every
spec has its stage, the state and port-bitmap widths are the largest any target takes), so
it depends on the specs alone: no rule change ever changes it, and one application's rules
never reach another's tables.

A change to one application (`change`) goes through the incremental compiler where that
application's spec allows it (stateless `fwd`-only rules), else through a compile of that
application's whole rule set diffed against its previous entries (specs with actions or a
default action, such as dns.p4: the incremental compiler refuses them, docs/actions.md).
Either way the writes are checked to name only that application's tables and multicast
group before they are returned: a write elsewhere would be a compiler bug, raised as one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from compiler import lowering
from compiler.compile import compile_rules
from compiler.errors import CamusError
# The incremental compiler's document diff: compiler may not import controller.diff.
from compiler.incremental import Incremental, _doc_diff as diff, rule_key
from compiler.routes import Route, parse_routes, route_entries
from compiler.rules import parse_rules
from compiler.spec import Spec, parse_spec
from compiler.ast import Rule
from pipeline.changes import Changes
from pipeline.entries import ENTRIES_VERSION
from pipeline.model import IPV4_TABLE, Pipeline


@dataclass(frozen=True)
class AppSource:
    """`--app NAME=SPEC[:RULES]`: an application's name (its tables' prefix), spec and rules."""

    name: str
    spec: str
    rules: str | None = None

    @classmethod
    def parse(cls, text: str) -> AppSource:
        name, eq, rest = text.partition("=")
        if not eq or not name or not rest:
            raise CamusError(f"--app {text!r}: expected NAME=SPEC[:RULES]")
        if not name.isidentifier():
            raise CamusError(f"--app {text!r}: the name {name!r} must be an identifier "
                             f"(it prefixes the application's table names)")
        spec, colon, rules = rest.partition(":")
        return cls(name, spec, rules if colon and rules else None)


class _App:
    """One application's spec, rules and current entries; its incremental compiler when the
    spec allows one."""

    def __init__(self, spec: Spec, rules: Sequence[Rule]):
        self.spec = spec
        self.incremental: Incremental | None = None
        if not spec.actions and spec.default is None:
            self.incremental = Incremental(spec, rules, static=True)
            self.entries = self.incremental.entries()
            self.rules = list(rules)
        else:
            self.rules = list(rules)
            self.entries = compile_rules(spec, self.rules, static=True).entries
        self.application = compile_rules(spec, [], static=True).application


class Switchboard:
    """The applications and routes of one switch: `pipeline` (static), `entries()` (all of
    them), and changes to one application (`change`) or to the routes (`set_routes`)."""

    def __init__(self, apps: Mapping[str, tuple[Spec, Sequence[Rule]]],
                 routes: Sequence[Route] = ()):
        if not apps:
            raise CamusError("no application: give at least one NAME=SPEC[:RULES]")
        self.apps: dict[str, _App] = {}
        for name, (spec, rules) in apps.items():
            if spec.name != name:
                raise CamusError(f"application {name!r}: its spec was read as {spec.name!r}")
            self.apps[name] = _App(spec, rules)
        # PipelineError here when two specs share a UDP port or their names a group id.
        self.pipeline: Pipeline = lowering.pipeline([a.application for a in self.apps.values()])
        self.routes = list(routes)

    @classmethod
    def from_sources(cls, sources: Sequence[AppSource], routes_path: str | None = None,
                     read: Callable[[str], str] | None = None) -> Switchboard:
        """The applications of `sources` and the routes file; `read` reads a file's text
        (the command line's reports bytes that are not UTF-8 at their line and column)."""
        _read = read or _read_file
        apps: dict[str, tuple[Spec, list[Rule]]] = {}
        for s in sources:
            if s.name in apps:
                raise CamusError(f"two applications are named {s.name!r}")
            spec = parse_spec(_read(s.spec), name=s.name, source=s.spec)
            rules = parse_rules(_read(s.rules), spec, source=s.rules) if s.rules else []
            apps[s.name] = (spec, rules)
        routes = parse_routes(_read(routes_path), routes_path) if routes_path else []
        return cls(apps, routes)

    # --- what the switch holds --------------------------------------------------------

    def entries(self) -> dict:
        """entries.json for the whole switch: every application's, then the routes."""
        table_entries: list[dict] = []
        groups: list[dict] = []
        for a in self.apps.values():
            table_entries += a.entries["table_entries"]
            groups += a.entries["multicast_groups"]
        table_entries += route_entries(self.routes, self.pipeline.ipv4_table)
        return {"camus_entries": ENTRIES_VERSION, "table_entries": table_entries,
                "multicast_groups": sorted(groups, key=lambda g: g["id"])}

    def rules(self, name: str) -> list[Rule]:
        return list(self._app(name).rules)

    def spec(self, name: str) -> Spec:
        return self._app(name).spec

    def owned(self, name: str) -> tuple[frozenset[str], int]:
        """The tables and the multicast group that application `name` writes."""
        app = self._app(name).application
        tables = frozenset(t for t in self.pipeline.tables
                           if self.pipeline.application_of(t) is not None
                           and self.pipeline.application_of(t).name == app.name)
        return tables, app.multicast_group

    # --- changes ----------------------------------------------------------------------

    def change(self, name: str, added: Sequence[Rule] = (), removed: Sequence[Rule] = ()
               ) -> Changes:
        """Add and remove rules of application `name` (a removed rule must be there, equal in
        meaning); the writes that take the switch there, all in that application's tables."""
        a = self._app(name)
        have: dict[tuple, int] = {}
        for r in a.rules:
            have[rule_key(r)] = have.get(rule_key(r), 0) + 1
        for r in removed:
            if not have.get(rule_key(r)):
                raise CamusError(f"application {name!r}: no such rule to remove: {r.text}",
                                 r.line or None)
            have[rule_key(r)] -= 1
        left = list(a.rules)
        for r in removed:
            k = rule_key(r)
            left.pop(next(i for i, x in enumerate(left) if rule_key(x) == k))
        new_rules = left + list(added)
        if a.incremental is not None:
            step: Changes = a.incremental.change(list(added), list(removed))
            new_entries = a.incremental.entries()
        else:
            new_entries = compile_rules(a.spec, new_rules, static=True).entries
            step = diff(a.entries, new_entries)
        self._check_own(name, step)
        a.rules, a.entries = new_rules, new_entries
        return step

    def replace(self, name: str, rules: Sequence[Rule]) -> Changes:
        """Application `name`'s rules become `rules`: the writes, as `change`'s."""
        a = self._app(name)
        want: dict[tuple, list[Rule]] = {}
        for r in rules:
            want.setdefault(rule_key(r), []).append(r)
        removed = []
        for r in a.rules:
            same = want.get(rule_key(r))
            if same:
                same.pop()
            else:
                removed.append(r)
        added = [r for same in want.values() for r in same]
        return self.change(name, added, removed)

    def set_routes(self, routes: Sequence[Route]) -> Changes:
        """The routes become `routes`: writes to the IPv4 table only."""
        step = diff({"table_entries": route_entries(self.routes, self.pipeline.ipv4_table),
                     "multicast_groups": []},
                    {"table_entries": route_entries(routes, self.pipeline.ipv4_table),
                     "multicast_groups": []})
        self.routes = list(routes)
        return step

    def _check_own(self, name: str, step: Changes) -> None:
        tables, group = self.owned(name)
        stray = {e["table"] for e in (*step.insert, *step.modify, *step.delete)} - tables
        groups = (set(step.set_groups) | set(step.delete_groups)) - {group}
        state = self._app(name).application.state
        registers = {r for v in state.vars for r in v.registers} if state else set()
        cells = {r for r, _, _ in step.reset_cells} - registers
        if stray or groups or cells:
            raise AssertionError(f"a change to {name!r} would write outside its tables: "
                                 f"{sorted(stray)}, groups {sorted(groups)}, registers "
                                 f"{sorted(cells)}")

    def _app(self, name: str) -> _App:
        if name not in self.apps:
            raise CamusError(f"no application named {name!r} (there are: "
                             f"{', '.join(self.apps)})")
        return self.apps[name]


def _read_file(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise CamusError(f"cannot read {path}: {exc.strerror or exc}") from None


__all__ = ["AppSource", "Switchboard", "IPV4_TABLE"]
