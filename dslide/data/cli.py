"""`dslide data ...` commands."""

from __future__ import annotations

import click


@click.group()
def data() -> None:
    """Inspect and convert datasets."""
