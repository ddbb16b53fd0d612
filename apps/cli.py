"""`camus demo ...`: one subcommand per application under apps/, and what their commands share.

Each app package with a demo exposes `register_demo(demo_subparsers)`, either in the package
itself or in its `cli` module; this file only lists the packages, so adding a demo never
means editing another app's code. An app whose package is not there (yet) is left out of
`camus demo --help`. The demos' common options and the check that their Kafka half can run
are here too.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from types import ModuleType

APPS = ("apps.itch_filter", "apps.int_events", "apps.fabric", "apps.hicn", "apps.highway",
        "apps.dns")


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


def add_switch_and_kafka_options(p: argparse.ArgumentParser, kafka_half: str) -> None:
    """--impl, the software switch a demo runs, and --no-kafka, whose help says what the
    demo's Kafka half (`kafka_half`) does."""
    p.add_argument("--impl", choices=("native", "python"), default="native",
                   help="software switch implementation (default native)")
    p.add_argument("--no-kafka", dest="kafka", action="store_false",
                   help=f"skip the Kafka half ({kafka_half})")


def kafka_clients_missing(demo: str) -> bool:
    """True, once said on stderr, when the Kafka half of `camus demo DEMO` cannot run: its
    clients are kafka-python's, a test extra rather than a core dependency."""
    if importlib.util.find_spec("kafka") is not None:
        return False
    print(f"camus demo {demo}: the Kafka half needs kafka-python (pip install -e '.[test]'); "
          "or run with --no-kafka", file=sys.stderr)
    return True
