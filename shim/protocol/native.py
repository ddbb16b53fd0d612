"""The broker's Kafka fast paths, loaded once and checked: `shim.protocol._native`.

The extension is the Rust crate shim/native (PyO3), built by `pip install -e .`: the
record-batch walk (`check_records`, `decode_records`) for `shim.protocol.records`, JSON slots
(`JsonPaths`) for `shim.schema`, reframing (`frame_records`, `frame_body`) for `shim.reframe`
and the copy tally (`tally_copies`) for `shim.datapath`. It lands here, beside the codec, the
lowest layer that uses it: the sans-IO codec imports nothing of the server around it (the
import contract, .importlinter, holds that), and the server imports the rest from here. The
software switch's own packet path is a separate crate and module (switch/native,
`switch._native`).

Every caller keeps a pure-Python reference that gives the same answers, so the broker works
without the extension, only ~30x slower on produce. That must never happen unnoticed: when the
module is missing, or was built from other source than this checkout's (its `ABI_VERSION` is
not `ABI_VERSION` here), `native` is None and one warning says so, with the fallback, its cost
and the fix. Callers use `native`, never import `shim.protocol._native` themselves, so the
check is made once per process.
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

# The interface this checkout's callers are written against: shim/native/src/lib.rs
# `ABI_VERSION`, bumped with it whenever a function or class there changes.
ABI_VERSION = 3


def load() -> ModuleType | None:
    """The extension if it is built and its ABI is this checkout's, else None (and a warning)."""
    try:
        module = importlib.import_module("shim.protocol._native")
    except ImportError as exc:
        problem = f"is not built ({exc})"
    else:
        built = getattr(module, "ABI_VERSION", None)
        if built == ABI_VERSION:
            return module
        problem = f"is stale (its ABI_VERSION is {built!r}, this source expects {ABI_VERSION})"
    warnings.warn(
        f"shim.protocol._native, the broker's compiled Kafka fast paths (shim/native), {problem}: the "
        "record walk, JSON fields and reframing fall back to pure Python, about 30x slower "
        "produce. Rebuild it with `pip install -e .`.", RuntimeWarning, stacklevel=2)
    return None


native = load()
