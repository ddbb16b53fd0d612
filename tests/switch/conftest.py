"""One fixture, `impl`, runs every switch test against both data planes (the dd pattern).

The native implementation is required: if `switch._native` is not built, its tests fail
(ImportError from NativeDataPlane) rather than skip, so a broken build never passes CI.
"""

from __future__ import annotations

import pytest

from switch.dataplane import IMPLEMENTATIONS


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request) -> str:
    return request.param
