"""The demos' pictures: matplotlib without a display, on the Agg backend (CI, ssh).

matplotlib is imported only when a demo draws, so nothing else in camus pays for it.
"""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib.pyplot with the Agg backend, chosen before pyplot loads so that no display is
    looked for."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: str | Path, dpi: float | None = None) -> Path:
    """Write `fig` to `path` (at the figure's own dpi unless `dpi` is given) and close it:
    pyplot keeps every figure alive until it is closed."""
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path
