"""`dslide` command line: train (one node or under mpiexec) and data tools."""

from __future__ import annotations

import click

from dslide.data.cli import data


@click.group()
@click.version_option(package_name="dslide")
def main() -> None:
    """dslide: LSH-sampled sparse training (SLIDE), model-parallel across MPI ranks (D-SLIDE)."""


main.add_command(data)

if __name__ == "__main__":
    main()
