"""`switch.native_switch`: a missing or stale `switch._native` is an ImportError that names
the fix (`pip install -e .`) and the pure-Python alternative (`--switch python`), raised when
a native data plane is asked for; never a quiet fallback."""

from __future__ import annotations

import sys

import pytest

from switch import native_switch
from switch.dataplane import new
from switch_helpers import ITCH_PIPELINE


def _refused(reason: str):
    with pytest.raises(ImportError) as info:
        new(ITCH_PIPELINE, "native")
    message = str(info.value)
    for words in ("switch._native", reason, "pip install -e .", "--switch python"):
        assert words in message, (words, message)


def test_a_stale_build_is_refused(monkeypatch):
    monkeypatch.setattr(native_switch, "ABI_VERSION", native_switch.ABI_VERSION + 1)
    _refused("stale")


def test_a_missing_build_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "switch._native", None)  # what an absent module raises
    _refused("not built")


def test_the_current_build_is_accepted():
    assert native_switch.load().ABI_VERSION == native_switch.ABI_VERSION
    new(ITCH_PIPELINE, "native")
