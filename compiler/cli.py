"""`camus compile` and `camus eval`: the compiler from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from compiler.errors import CamusError


def register(sub) -> None:
    p = sub.add_parser("compile", help="compile a spec and rules into pipeline IR and entries",
                       description="Compile an annotated P4 header spec and packet-subscription "
                                   "rules into the pipeline IR (pipeline.json), table entries "
                                   "(entries.json) and statistics (stats.json).")
    p.add_argument("spec", nargs="?", help="annotated P4_16 header spec, e.g. p4/itch/itch.p4")
    p.add_argument("rules", nargs="?", help="rules file, one rule per line (or '-' for stdin)")
    p.add_argument("--app", action="append", metavar="NAME=SPEC[:RULES]",
                   help="instead of SPEC RULES: one application of several on one switch "
                        "(repeatable; NAME prefixes its tables), all in one static program "
                        "whose rules change per application (docs/multi-app.md)")
    p.add_argument("--ipv4", metavar="ROUTES",
                   help="with --app: plain IPv4 routes, one 'PREFIX/LEN PORT' or "
                        "'PREFIX/LEN drop' a line, into the ipv4_lpm table")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--field-order", help="comma-separated fields, first tested first")
    p.add_argument("--dot", help="also write the decision diagram as Graphviz dot")
    p.add_argument("--p4", action="store_true",
                   help="also write program.p4, p4info.txtpb and entries.txtpb (docs/p4.md)")
    p.add_argument("--max-entries", type=int, default=None, metavar="N",
                   help="refuse a rule set that compiles to more than N entries, saying why and "
                        "what would fit: one whose estimate (an upper bound) is over N is built "
                        "on trial and refused once N entries are counted, or after 10 s of "
                        "CPU in the build (default 1,000,000; 0: no limit)")
    p.add_argument("--alpha", metavar="N|FIELD=N,...",
                   help="round numeric range constants to multiples of N (or per field: "
                        "price=100,shares=10): a superset of the rules, fewer entries")
    p.add_argument("--changes", metavar="FILE",
                   help="then apply FILE's changes in turn, one a line: '+ RULE' adds a rule, "
                        "'- RULE' removes one equal to it; each change's time and writes are "
                        "printed, and the outputs are those of the final rule set (identical "
                        "to compiling it from scratch, but that stateful rules keep the "
                        "register banks and cells they were given when added); with --app, "
                        "NAME=FILE: the changes are to application NAME")
    p.add_argument("--lanes", metavar="auto|N", default=None,
                   help="split the rules into up to N groups compiled into separate diagrams "
                        "whose port bitmaps are OR-ed (rules on independent fields: the sum of "
                        "their sizes instead of the product); auto: lanes only when the "
                        "estimate says they are much smaller than one diagram; 1 (default): one "
                        "diagram")
    p.add_argument("--static", action="store_true",
                   help="one stage per query field with its declared match kind, whatever the "
                        "rules test: the pipeline then serves any rule set (entries change, "
                        "the program does not)")
    p.set_defaults(func=cmd_compile)

    e = sub.add_parser("eval", help="run compiled tables on JSON-lines messages from stdin",
                       description="Read one JSON object per line on stdin (field -> value; "
                                   "strings for character fields) and print, per line, the "
                                   "sorted JSON list of ports the compiled tables select. "
                                   "With state, the messages are a timed sequence: \"@ts\" "
                                   "is a message's time in microseconds (required unless the "
                                   "spec declares query_timestamp), \"@length\" its length "
                                   "in bytes (default: the spec's message size).")
    e.add_argument("--pipeline", required=True, help="directory written by camus compile")
    e.add_argument("--app", help="application name (default: the only one)")
    e.set_defaults(func=cmd_eval)


def cmd_compile(args) -> int:
    from compiler import alpha_option
    from compiler.compile import compile_rules, no_cyclic_gc, write_outputs
    from compiler.dot import render
    from compiler.rules import parse_rules
    from compiler.spec import parse_spec

    if args.app or args.ipv4:
        return cmd_compile_apps(args)
    if args.spec is None or args.rules is None:
        print("camus compile: error: give SPEC RULES, or --app NAME=SPEC[:RULES] (repeatable)",
              file=sys.stderr)
        return 2
    try:
        spec = parse_spec(_read_text(Path(args.spec)), name=Path(args.spec).stem, source=args.spec)
        if args.rules == "-":
            text, source = sys.stdin.read(), "<stdin>"
        else:
            text, source = _read_text(Path(args.rules)), args.rules
        with no_cyclic_gc():
            rules = parse_rules(text, spec, source=source)
            rules = alpha_option.apply(rules, args.alpha, spec, source)
        order = [f.strip() for f in args.field_order.split(",")] if args.field_order else None
        from compiler.estimate import DEFAULT_MAX_ENTRIES

        budget = DEFAULT_MAX_ENTRIES if args.max_entries is None else args.max_entries
        from compiler.lanes import parse_lanes

        lanes = 1 if args.lanes is None else parse_lanes(args.lanes)
        if args.changes:
            if args.dot:
                raise CamusError("--dot draws one compile's diagram: not with --changes")
            if args.lanes not in (None, "1"):
                raise CamusError("--changes compiles one diagram: --lanes 1 only")
            changes = read_changes(Path(args.changes), spec)
            with no_cyclic_gc():
                c = apply_changes(spec, rules, changes, order, args.static, args.changes,
                                  budget)
        else:
            with _Progress() as progress:
                c = compile_rules(spec, rules, order, progress=progress, static=args.static,
                                  max_entries=budget, on_estimate=progress.start, lanes=lanes)
        if args.alpha is not None:
            c.stats["alpha"] = alpha_option.parse_alpha(args.alpha, spec)
        if args.p4 and any(a.state for a in c.pipeline.applications):
            raise CamusError("--p4: the P4 program does not run state yet (issue 25; "
                             "docs/pipeline-ir.md, \"State\", is what it will implement); "
                             "compile without --p4")
        if args.p4 and any(a.uses_actions for a in c.pipeline.applications):
            raise CamusError("--p4: the P4 program does not run actions beyond fwd, default "
                             "actions or DNS framing yet (camus_ir 5; docs/actions.md, "
                             "\"Targets\", says what it needs); compile without --p4")
    except CamusError as exc:
        print(f"camus compile: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"camus compile: error: {exc}", file=sys.stderr)
        return 2
    except OverflowError as exc:  # from tables.state_bits (or the ids' IdSpace)
        print(f"camus compile: error: the rules need more states than any target here can "
              f"number: {exc}", file=sys.stderr)
        return 2
    try:
        write_outputs(c, args.out)
        if args.p4:
            from compiler.p4 import write_p4

            write_p4(c.pipeline, c.entries, args.out)
        if args.dot and c.lanes:
            print(f"camus compile: --dot draws one diagram; these rules compiled to "
                  f"{len(c.lanes)} lanes (--lanes 1 for one diagram): not drawn", file=sys.stderr)
        elif args.dot:
            from compiler.tables import state_ids

            Path(args.dot).write_text(render(c.diagram, state_ids(c.diagram, c.diagram.reachable(),
                                                                  bits=c.pipeline.state_width)))
    except OSError as exc:
        print(f"camus compile: error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    st = c.stats
    in_lanes = f" in {len(st['lanes'])} lanes" if "lanes" in st else ""
    print(f"{st['rules']} rules -> {st['entries']['total']} entries{in_lanes}, {st['states']} states, "
          f"{st['multicast_groups']} multicast groups in {st['compile_seconds']:.2f} s; "
          f"wrote {args.out}/pipeline.json, entries.json, stats.json", file=sys.stderr)
    return 0


def cmd_compile_apps(args) -> int:
    """`camus compile --app NAME=SPEC[:RULES] ... [--ipv4 ROUTES] [--changes NAME=FILE]`:
    several applications and plain IPv4 in one static pipeline (compiler.multi)."""
    from compiler.multi import AppSource, Switchboard

    if args.spec is not None or args.rules is not None:
        print("camus compile: error: --app replaces SPEC RULES: give one or the other",
              file=sys.stderr)
        return 2
    if not args.app:
        print("camus compile: error: --ipv4 goes with --app NAME=SPEC[:RULES]", file=sys.stderr)
        return 2
    for flag, given in (("--field-order", args.field_order), ("--dot", args.dot),
                        ("--alpha", args.alpha), ("--lanes", args.lanes)):
        if given is not None:
            print(f"camus compile: error: {flag} compiles one application: not with --app",
                  file=sys.stderr)
            return 2
    try:
        board = Switchboard.from_sources([AppSource.parse(a) for a in args.app], args.ipv4,
                                         lambda path: _read_text(Path(path)))
        for text in ([args.changes] if args.changes else []):
            name, eq, path = text.partition("=")
            if not eq:
                raise CamusError("with --app, --changes is NAME=FILE: the application the "
                                 "changes are to")
            for n, sign, rs in read_changes(Path(path), board.spec(name)):
                step = board.change(name, rs, []) if sign > 0 else board.change(name, [], rs)
                touched = sorted({e["table"] for e in (*step.insert, *step.modify,
                                                        *step.delete)})
                print(f"change (line {n}, {'+' if sign > 0 else '-'}) to {name}: "
                      f"{len(step.insert)} inserts, {len(step.modify)} modifies, "
                      f"{len(step.delete)} deletes, {len(step.set_groups)} groups set, "
                      f"{len(step.delete_groups)} groups deleted; tables "
                      f"{', '.join(touched) or 'none'}", file=sys.stderr)
        entries = board.entries()
        if args.max_entries and len(entries["table_entries"]) > args.max_entries:
            raise CamusError(f"the applications compile to {len(entries['table_entries']):,} "
                             f"entries, more than the budget of {args.max_entries:,} "
                             f"(--max-entries; 0: no limit)")
        if args.p4 and board.pipeline.version != 3:
            raise CamusError("--p4: the P4 program does not run actions beyond fwd, default "
                             "actions, DNS framing or state yet (docs/actions.md, "
                             "\"Targets\"); compile without --p4, or without those "
                             "applications")
    except (CamusError, ValueError, OSError) as exc:
        print(f"camus compile: error: {exc}", file=sys.stderr)
        return 2
    from pipeline import document
    from pipeline.entries import write as write_entries

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "pipeline.json").write_text(document.dumps(board.pipeline))
        with open(out / "entries.json", "w") as fh:
            write_entries(entries, fh)
        if args.p4:
            from compiler.p4 import write_p4

            write_p4(board.pipeline, entries, out)
    except OSError as exc:
        print(f"camus compile: error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    per_app = ", ".join(f"{name} {len(a.rules)} rules" for name, a in board.apps.items())
    print(f"{per_app}, {len(board.routes)} routes -> {len(entries['table_entries'])} entries; "
          f"wrote {args.out}/pipeline.json, entries.json", file=sys.stderr)
    return 0


def read_changes(path: Path, spec) -> list[tuple[int, int, list]]:
    """(line, +1 or -1, rules) per change line of a --changes file; errors name the line and
    column in that file, and nothing is applied if any line is wrong."""
    from compiler.rules import parse_rules

    text = _read_text(path)
    lines = text.split("\n")
    signs: dict[int, int] = {}
    blanked = []
    for n, line in enumerate(lines, start=1):
        body = line.lstrip()
        if not body or body.startswith("#"):
            blanked.append("")
            continue
        if body[0] not in "+-" or body[1:2] not in (" ", "\t"):
            raise CamusError("a change is '+ RULE' or '- RULE'", n,
                             len(line) - len(body) + 1, str(path))
        signs[n] = 1 if body[0] == "+" else -1
        i = len(line) - len(body)
        blanked.append(line[:i] + " " + line[i + 1:])  # the rule keeps its columns
    rules = parse_rules("\n".join(blanked), spec, source=str(path))
    by_line: dict[int, list] = {}
    for r in rules:
        by_line.setdefault(r.line, []).append(r)
    return [(n, signs[n], by_line.get(n, [])) for n in sorted(signs)]


def apply_changes(spec, rules, changes, order, static, source: str | None = None,
                  max_entries: int | None = None):
    """Compile `rules`, apply `changes` in turn printing each one's time and writes, and
    return the final result in `compile_rules`' form (without a diagram). A removal of a
    rule that is not there, or a first or final rule set that compiles to more than
    `max_entries` entries (`compiler.compile.check_size`), is refused before any change is
    applied."""
    import time

    from compiler.compile import Compiled, check_size
    from compiler.incremental import Incremental, rule_key

    have: dict[tuple, list] = {}
    for r in rules:
        have.setdefault(rule_key(r), []).append(r)
    for n, sign, rs in changes:
        for r in rs:
            same = have.setdefault(rule_key(r), [])
            if sign > 0:
                same.append(r)
            elif not same:
                raise CamusError(f"no such rule to remove: {r.text}", n, None, source)
            else:
                same.pop()
    if max_entries:
        check_size(spec, rules, order, static, max_entries)
        if changes:
            check_size(spec, [r for same in have.values() for r in same], order, static,
                       max_entries)
    started = time.perf_counter()
    inc = Incremental(spec, rules, order, static=static)
    _within(inc, max_entries, "the rules")
    print(f"{len(rules)} rules compiled in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    times = []
    for n, sign, rs in changes:
        step = inc.change(rs, []) if sign > 0 else inc.change([], rs)
        times.append(step.seconds)
        what = "rebuilt from scratch (the field order or a match kind changed), " \
            if step.rebuilt else ""
        if step.resized:
            what += "the state ids' or port bitmaps' width changed (so did the program), "
        resets = (f", {sum(c for _, _, c in step.reset_cells)} register cells zeroed"
                  if step.reset_cells else "")
        print(f"change {len(times)} (line {n}, {'+' if sign > 0 else '-'}): {what}"
              f"{len(step.insert)} inserts, {len(step.modify)} modifies, "
              f"{len(step.delete)} deletes, {len(step.set_groups)} groups set, "
              f"{len(step.delete_groups)} groups deleted{resets} in "
              f"{step.seconds * 1e3:.2f} ms", file=sys.stderr)
    _within(inc, max_entries, "the rules after the changes")
    stats = inc.stats()
    if times:
        ordered = sorted(times)
        stats["changes"] = {"count": len(times),
                            "median_ms": round(ordered[len(ordered) // 2] * 1e3, 3),
                            "max_ms": round(ordered[-1] * 1e3, 3)}
    stats["compile_seconds"] = round(time.perf_counter() - started, 4)
    return Compiled(spec, inc.current_rules(), None, inc.stages, inc.pipeline, inc.entries(),
                    stats)


def _within(inc, max_entries: int | None, what: str) -> None:
    """Refuse (before anything is written) when `inc` holds more entries than the budget (the
    same rule sets `check_size` refuses: a last check on the incremental compiler's count)."""
    if max_entries:
        total = inc.stats()["entries"]["total"]
        if total > max_entries:
            raise CamusError(f"{what} compile to {total:,} entries, more than the budget of "
                             f"{max_entries:,} entries (--max-entries; 0: no limit)")


def _read_text(path: Path) -> str:
    """A file's text; bytes that are not UTF-8 are an error at their line and column."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise CamusError(f"byte 0x{data[exc.start]:02x} is not UTF-8 text", line, column,
                         str(path)) from None


class _Progress:
    """A progress bar on a terminal only (CI logs get nothing), counting states split against
    the estimate's states (`compiler.estimate`) as its total, so that it shows an ETA. The
    estimate errs on the large side: the bar may finish short of its total."""

    def __init__(self) -> None:
        self.bar = None

    def __enter__(self):
        return self

    def start(self, predicted) -> None:
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(desc="compiling", unit=" states", total=max(predicted.splits, 1),
                            leave=False, file=sys.stderr)

    def __call__(self, stage: int, done: int) -> None:
        if self.bar is not None:
            self.bar.set_postfix(stage=stage)
            self.bar.update(max(0, min(done, self.bar.total) - self.bar.n))

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_eval(args) -> int:
    from compiler.messages import message_values
    from pipeline import document, interpreter

    root = Path(args.pipeline)
    try:
        pipeline = document.from_json(json.loads((root / "pipeline.json").read_text()))
        entries = json.loads((root / "entries.json").read_text())
        apps = pipeline.applications
        if args.app:
            apps = [a for a in apps if a.name == args.app]
            if not apps:
                print(f"camus eval: error: no application {args.app!r}", file=sys.stderr)
                return 2
        elif len(apps) != 1:
            names = ", ".join(a.name for a in apps)
            print(f"camus eval: error: several applications ({names}): choose one with --app",
                  file=sys.stderr)
            return 2
        tables = interpreter.load(pipeline, entries)
    except (OSError, ValueError) as exc:
        print(f"camus eval: error: cannot read {root}: {exc}", file=sys.stderr)
        return 2
    app = apps[0]
    status = 0
    for lineno, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError("expected a JSON object")
            timing = {k: message.pop(k) for k in ("@ts", "@length") if k in message}
            values = message_values(app, message)
            if app.uses_actions:  # IR 5: the ports and the verdict (docs/actions.md)
                if timing:
                    raise ValueError(f"{', '.join(timing)}: this application has no state")
                print(json.dumps(_outcome(tables, app, values)), flush=True)
                continue
            if values is None:
                ports = []
            elif app.state is None:
                if timing:
                    raise ValueError(f"{', '.join(timing)}: this application has no state")
                ports = sorted(tables.ports(app, values))
            else:
                ts, length = _timing(app, timing)
                ports = sorted(tables.ports_at(app, values, ts, length))
        except ValueError as exc:
            print(f"camus eval: line {lineno}: {exc}", file=sys.stderr)
            print("null", flush=True)
            status = 1
            continue
        print(json.dumps(ports), flush=True)
    return status


def _outcome(tables, app, values: dict | None) -> dict:
    """`camus eval`'s line for an application with actions: {"ports": [...], "verdict":
    null | {"action": name, "args": [...]}}; a message of no subscription type gets the
    default action."""
    from pipeline.interpreter import default_result, verdict_of

    if values is None:
        d = default_result(app) if app.default_action is not None else None
        ports, verdict = sorted(p for p, _ in tables.replicas(app, d)), verdict_of(d)
    else:
        ports, verdict = tables.outcome(app, values)
        ports = sorted(ports)
    return {"ports": ports, "verdict": None if verdict is None else
            {"action": verdict[0], "args": list(verdict[1])}}


def _timing(app, timing: dict) -> tuple[int, int | None]:
    """A message's "@ts" (µs, 48 bits) and "@length" (bytes), checked."""
    from pipeline.model import TIMESTAMP_WIDTH

    ts = timing.get("@ts")
    if ts is None:
        if app.state.timestamp is None:
            raise ValueError('"@ts" (the message\'s time in µs) is required: the application '
                             'has state and its spec declares no query_timestamp')
        ts = 0  # not read: the time field is
    if type(ts) is not int or not 0 <= ts < 1 << TIMESTAMP_WIDTH:
        raise ValueError(f'"@ts" must be an integer number of µs below 2^48, not {ts!r}')
    length = timing.get("@length")
    if length is not None and (type(length) is not int or not 0 <= length <= 0xFFFF):
        raise ValueError(f'"@length" must be 0..65535 bytes, not {length!r}')
    return ts, length
