"""`python -m compiler.p4`: one P4 program for several application specs.

    python -m compiler.p4 --app p4/itch/itch.p4 examples/itch.rules \\
                          --app p4/int/int.p4 --app p4/kafka/kafka.p4 --out build/p4

Each `--app SPEC [RULES]` is compiled on its own (without rules, it has no entries: the
program and its P4Info are still complete); their applications become one pipeline
(`compiler.lowering.pipeline`, which refuses two applications on one UDP port) and their entries
one entries document. DIR gets program.p4, p4info.txtpb, entries.txtpb and, so that
`camus switch` and `camus eval` can use the same configuration, pipeline.json and
entries.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from compiler import lowering
from compiler.errors import CamusError
from compiler.p4.runtime import write_p4
from p4rt.names import DEFAULT_SLOTS
from pipeline import document
from pipeline.entries import ENTRIES_VERSION
from pipeline.model import Pipeline


def merge_entries(docs: list[dict]) -> dict:
    """One entries document; a multicast group id used for two different port sets is an error."""
    groups: dict[int, dict] = {}
    table_entries = []
    for d in docs:
        table_entries += d["table_entries"]
        for g in d["multicast_groups"]:
            if g["id"] in groups and groups[g["id"]] != g:
                raise ValueError(f"multicast group {g['id']} means different replicas in two "
                                 f"applications; compile them with disjoint ports or recompile")
            groups[g["id"]] = g
    return {"camus_entries": ENTRIES_VERSION, "table_entries": table_entries,
            "multicast_groups": [groups[k] for k in sorted(groups)]}


def build(apps: list[list[str]]) -> tuple[Pipeline, dict]:
    from compiler.compile import compile_rules
    from compiler.rules import load_rules
    from compiler.spec import load_spec

    applications, docs, widths = [], [], []
    for app in apps:
        spec = load_spec(app[0])
        rules = load_rules(app[1], spec) if len(app) > 1 else []
        c = compile_rules(spec, rules)
        applications.append(c.application)
        docs.append(c.entries)
        widths.append((c.pipeline.state_width, c.pipeline.ports_width))
    # Every application's entries fit the widest state and bitmap any of them needs.
    return (lowering.pipeline(applications, max(w for w, _ in widths), max(w for _, w in widths)),
            merge_entries(docs))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m compiler.p4", description=__doc__.split("\n\n")[0])
    p.add_argument("--app", nargs="+", action="append", required=True, metavar="SPEC [RULES]",
                   help="an application spec and, optionally, its rules file (repeatable)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--slots", type=int, default=DEFAULT_SLOTS,
                   help=f"MoldUDP64 message blocks evaluated per packet (default {DEFAULT_SLOTS})")
    args = p.parse_args(argv)
    if any(len(a) > 2 for a in args.app):
        p.error("--app takes a spec and at most one rules file")
    try:
        pipeline, entries = build(args.app)
    except (CamusError, OSError, ValueError) as exc:
        print(f"compiler.p4: error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    written = write_p4(pipeline, entries, out, args.slots)
    out.joinpath("pipeline.json").write_text(document.dumps(pipeline))
    out.joinpath("entries.json").write_text(json.dumps(entries, indent=1) + "\n")
    print(f"wrote {out}/{', '.join(written + ['pipeline.json', 'entries.json'])}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
