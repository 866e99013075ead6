"""`harness data ...`: fetch real datasets, make synthetic ones, into the data directory."""

from __future__ import annotations

import click


@click.group()
def data() -> None:
    """Fetch real datasets or make synthetic ones."""
