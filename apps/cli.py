"""`camus demo ...`: one subcommand per application under apps/.

Each app package that has a demo exposes `cli.register_demo(demo_subparsers)`; this file
only lists them, so adding a demo never means editing another app's code. An app whose
package is not there (yet) is left out of `camus demo --help`.
"""

from __future__ import annotations

import argparse
import importlib

DEMOS = ("apps.itch_filter.cli", "apps.int_events.cli")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run an application demo end to end on this machine")
    demos = p.add_subparsers(dest="demo", metavar="DEMO")
    demos.required = True
    for name in DEMOS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Only the absence of the app's own module is skipped, never a broken import in it.
            if exc.name is not None and name.startswith(exc.name):
                continue
            raise
        module.register_demo(demos)
