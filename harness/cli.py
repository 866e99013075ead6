"""`harness` command line: emulated clusters, runs, sweeps, reports, datasets."""

from __future__ import annotations

import click

from harness.data import data


@click.group()
def main() -> None:
    """Measure dslide against Horovod and dense TensorFlow on emulated or real clusters."""


main.add_command(data)

if __name__ == "__main__":
    main()
