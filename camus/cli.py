"""The `camus` command: one entry point, one subcommand family per piece.

Each piece owns its subcommands in its own `cli` module exposing `register(subparsers)`;
this file only lists them, so adding a piece never means editing another piece's code.
A piece whose module is not importable yet (or whose optional dependency is missing) is
left out of `--help` instead of breaking every other command.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules, in the order they appear in --help.
PIECES = (
    "compiler.cli",
    "switch.cli",
    "shim.cli",
    "shim.cluster.cli",
    "controller.cli",
    "controller.net_cli",
    "apps.cli",
)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("camus")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="camus",
        description="Packet subscriptions compiled into the data plane, behind a Kafka-compatible broker.",
    )
    parser.add_argument("--version", action="version", version=f"camus {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in PIECES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Only swallow the absence of the piece itself, never a broken import inside it.
            if exc.name is not None and name.startswith(exc.name):
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
