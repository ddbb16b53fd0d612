"""The software switch's compiled packet path, loaded and checked: `switch._native`.

The extension is the Rust crate switch/native (PyO3), built by `pip install -e .`: one class,
`Switch` (parse, table walk, replication, MoldUDP64 pruning), which `NativeDataPlane` drives.
The broker's Kafka fast paths are a separate crate and module (shim/native, `shim.protocol._native`).

There is no silent fallback: the pure-Python switch is another data plane, chosen by name
(`--switch python`, `impl="python"`). So a missing build, or one made from other source than
this checkout's (its `ABI_VERSION` is not `ABI_VERSION` here), is an ImportError that says how
to fix it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The interface switch/native_dataplane.py is written against: switch/native/src/lib.rs
# `ABI_VERSION`, bumped with it whenever `Switch` or its plan changes.
ABI_VERSION = 4


def load() -> ModuleType:
    """`switch._native`, checked; ImportError naming the fix when it is missing or stale."""
    try:
        module = importlib.import_module("switch._native")
    except ImportError as exc:
        raise ImportError(_advice(f"is not built ({exc})")) from exc
    built = getattr(module, "ABI_VERSION", None)
    if built != ABI_VERSION:
        raise ImportError(_advice(f"is stale (its ABI_VERSION is {built!r}, "
                                  f"this source expects {ABI_VERSION})"))
    return module


def _advice(problem: str) -> str:
    return (f"switch._native, the software switch's compiled packet path (switch/native), "
            f"{problem}. Rebuild it with `pip install -e .`, or run the pure-Python switch "
            "(`camus serve --switch python`, `--impl python` elsewhere), which is far slower.")
