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
    p.add_argument("spec", help="annotated P4_16 header spec, e.g. p4/itch/itch.p4")
    p.add_argument("rules", help="rules file, one rule per line (or '-' for stdin)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--field-order", help="comma-separated fields, first tested first")
    p.add_argument("--dot", help="also write the decision diagram as Graphviz dot")
    p.add_argument("--p4", action="store_true",
                   help="also write program.p4, p4info.txtpb and entries.txtpb (docs/p4.md)")
    p.add_argument("--max-entries", type=int, default=None, metavar="N",
                   help="refuse, within seconds and before building anything, a rule set whose "
                        "estimated size is over N entries, saying why and what would fit "
                        "(default 1,000,000; 0: no limit)")
    p.add_argument("--alpha", metavar="N|FIELD=N,...",
                   help="round numeric range constants to multiples of N (or per field: "
                        "price=100,shares=10): a superset of the rules, fewer entries")
    p.add_argument("--static", action="store_true",
                   help="one stage per query field with its declared match kind, whatever the "
                        "rules test: the pipeline then serves any rule set (entries change, "
                        "the program does not)")
    p.set_defaults(func=cmd_compile)

    e = sub.add_parser("eval", help="run compiled tables on JSON-lines messages from stdin",
                       description="Read one JSON object per line on stdin (field -> value; "
                                   "strings for character fields) and print, per line, the "
                                   "sorted JSON list of ports the compiled tables select.")
    e.add_argument("--pipeline", required=True, help="directory written by camus compile")
    e.add_argument("--app", help="application name (default: the only one)")
    e.set_defaults(func=cmd_eval)


def cmd_compile(args) -> int:
    from compiler import alpha_option
    from compiler.compile import compile_rules, no_cyclic_gc, write_outputs
    from compiler.dot import render
    from compiler.rules import parse_rules
    from compiler.spec import parse_spec

    try:
        spec = parse_spec(_read_text(Path(args.spec)), name=Path(args.spec).stem, source=args.spec)
        if args.rules == "-":
            text, source = sys.stdin.read(), "<stdin>"
        else:
            text, source = _read_text(Path(args.rules)), args.rules
        with no_cyclic_gc():
            rules = alpha_option.apply(parse_rules(text, spec, source=source), args.alpha, spec)
        order = [f.strip() for f in args.field_order.split(",")] if args.field_order else None
        from compiler.estimate import DEFAULT_MAX_ENTRIES

        budget = DEFAULT_MAX_ENTRIES if args.max_entries is None else args.max_entries
        with _Progress() as progress:
            c = compile_rules(spec, rules, order, progress=progress, static=args.static,
                              max_entries=budget, on_estimate=progress.start)
        if args.alpha is not None:
            c.stats["alpha"] = alpha_option.parse_alpha(args.alpha, spec)
    except CamusError as exc:
        print(f"camus compile: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"camus compile: error: {exc}", file=sys.stderr)
        return 2
    except OverflowError as exc:  # from tables.state_bits
        print(f"camus compile: error: the rules need more states than any target here can "
              f"number: {exc}", file=sys.stderr)
        return 2
    try:
        write_outputs(c, args.out)
        if args.p4:
            from compiler.p4 import write_p4

            write_p4(c.pipeline, c.entries, args.out)
        if args.dot:
            from compiler.tables import state_ids

            Path(args.dot).write_text(render(c.diagram, state_ids(c.diagram, c.diagram.reachable(),
                                                                  bits=c.pipeline.state_width)))
    except OSError as exc:
        print(f"camus compile: error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    st = c.stats
    print(f"{st['rules']} rules -> {st['entries']['total']} entries, {st['states']} states, "
          f"{st['multicast_groups']} multicast groups in {st['compile_seconds']:.2f} s; "
          f"wrote {args.out}/pipeline.json, entries.json, stats.json", file=sys.stderr)
    return 0


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
            self.bar.update(min(256, self.bar.total - self.bar.n))

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
            values = message_values(app, message)
        except ValueError as exc:
            print(f"camus eval: line {lineno}: {exc}", file=sys.stderr)
            print("null", flush=True)
            status = 1
            continue
        ports = sorted(tables.ports(app, values)) if values is not None else []
        print(json.dumps(ports), flush=True)
    return status
