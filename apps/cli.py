"""`camus demo ...`: one subcommand per application under apps/.

Each app package with a demo exposes `register_demo(demo_subparsers)`, either in the package
itself or in its `cli` module; this file only lists the packages, so adding a demo never
means editing another app's code. An app whose package is not there (yet) is left out of
`camus demo --help`.
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType

APPS = ("apps.itch_filter", "apps.int_events")


def _import_if_present(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        # Only the absence of the module itself is skipped, never a broken import inside it.
        if exc.name is not None and name.startswith(exc.name):
            return None
        raise


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run an application demo end to end on this machine")
    demos = p.add_subparsers(dest="demo", metavar="DEMO")
    demos.required = True
    for name in APPS:
        package = _import_if_present(name)
        if package is None:
            continue
        hook = getattr(package, "register_demo", None)
        if hook is None:
            cli = _import_if_present(f"{name}.cli")
            hook = getattr(cli, "register_demo", None)
        if hook is not None:
            hook(demos)
