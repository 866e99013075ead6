"""The data directory, where datasets and the cache of parsed files live: an override, else $DSLIDE_DATA_DIR, else
~/.cache/dslide/data."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "DSLIDE_DATA_DIR"


def data_dir(override: str | None = None) -> Path:
    """The data directory: `override`, else $DSLIDE_DATA_DIR, else ~/.cache/dslide/data."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "dslide" / "data"
