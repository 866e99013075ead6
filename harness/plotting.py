"""Figures written as files: matplotlib on its file-only backend, each PNG written atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib  # deferred: slow to import, and most commands draw nothing

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> None:
    plt = pyplot()

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".png")
    os.fchmod(fd, 0o644)  # mkstemp makes 0600; figures are for every user to read, as records are
    os.close(fd)
    try:
        fig.tight_layout()
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)
