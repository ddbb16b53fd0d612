"""`shim.protocol.native`: the Kafka fast paths are loaded once, checked, and never lost quietly.

A missing or stale `shim.protocol._native` leaves the broker correct but ~30x slower on produce, so it
must say so: one warning per process, naming the module, the pure-Python fallback, its cost
and the fix. CI builds the extension, so here it must be present and current.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

from shim import reframe, schema
from shim.protocol import native as fast_paths, records


def test_the_extension_is_built_current_and_shared():
    assert fast_paths.native is not None, "shim.protocol._native is missing or stale: pip install -e ."
    assert fast_paths.native.ABI_VERSION == fast_paths.ABI_VERSION
    # Beside the codec, which uses it and imports nothing of the server (.importlinter).
    assert fast_paths.native.__name__ == "shim.protocol._native"
    # Every user takes the one checked module (datapath through reframe).
    assert records._native is reframe._native is schema._native is fast_paths.native


def _load_recording_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = fast_paths.load()
    return module, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def _names_fallback_cost_and_fix(message: str) -> None:
    for words in ("shim.protocol._native", "pure Python", "30x slower", "pip install -e ."):
        assert words in message, (words, message)


def test_a_stale_build_falls_back_with_one_warning(monkeypatch):
    monkeypatch.setattr(fast_paths, "ABI_VERSION", fast_paths.ABI_VERSION + 1)
    module, messages = _load_recording_warnings()
    assert module is None
    assert len(messages) == 1
    assert "stale" in messages[0]
    _names_fallback_cost_and_fix(messages[0])


def test_a_missing_build_falls_back_with_one_warning(monkeypatch):
    monkeypatch.setitem(sys.modules, "shim.protocol._native", None)  # what an absent module raises
    module, messages = _load_recording_warnings()
    assert module is None
    assert len(messages) == 1
    assert "not built" in messages[0]
    _names_fallback_cost_and_fix(messages[0])


def test_one_warning_per_process_however_many_modules_fall_back():
    # A fresh interpreter without the module: every user of the fast paths is imported, the
    # broker still works on the references, and the warning appears once.
    code = """
import sys
sys.modules["shim.protocol._native"] = None
import shim.protocol.records, shim.reframe, shim.schema, shim.datapath, shim.broker
assert shim.protocol.records._native is shim.reframe._native is shim.schema._native is None
"""
    run = subprocess.run([sys.executable, "-W", "default", "-c", code],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("RuntimeWarning") == 1, run.stderr
    _names_fallback_cost_and_fix(run.stderr)
