"""A data path on the embedded switch, whose reports come inline: what a send delivered is
known when the send returns."""

from __future__ import annotations

from controller.targets import open_target
from shim.datapath import DataPath


def data_path(impl: str = "native") -> DataPath:
    return DataPath(open_target(f"embedded:{impl}"))


def delivered(send, *args, **kw) -> dict:
    """What `send(*args, then=..., **kw)` (`DataPath.send` or `send_batch`) delivered."""
    got = []
    send(*args, then=got.append, **kw)
    [out] = got
    return out
