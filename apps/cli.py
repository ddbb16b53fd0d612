"""`camus demo`: one subcommand per application under apps/.

Each app package exposes `register_demo(demo_subparsers)`; this module only lists the
packages, so adding a demo never means editing another app's code. An app whose package is
not present is left out instead of breaking the others.
"""

from __future__ import annotations

import argparse
import importlib

# App packages, in the order their demos appear in `camus demo --help`.
APPS = (
    "apps.itch_filter",
    "apps.int_events",
)


def register(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="run an application demo end to end on this machine")
    demos = demo.add_subparsers(dest="demo", metavar="DEMO")
    demos.required = True
    for name in APPS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Only the app's own absence is tolerated, never a broken import inside it.
            if exc.name is not None and name.startswith(exc.name):
                continue
            raise
        register_demo = getattr(module, "register_demo", None)
        if register_demo is not None:  # an app still being built may not have a demo yet
            register_demo(demos)
