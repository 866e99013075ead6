"""Sessions users and CI type: tests, lint, bench, reproduce (see README)."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The engine, data, harness and MPI tests (root-only tests skip themselves without root)."""
    session.install("-e", ".[test]")
    session.run("pytest", "tests", "--ignore=tests/baselines", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.5,<1")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """pytest-benchmark regression checks (run on a quiet machine)."""
    session.install("-e", ".[test]")
    session.run("pytest", "benchmarks", "--benchmark-only", "--benchmark-enable", *session.posargs)


@nox.session(python=PYTHON)
def reproduce(session: nox.Session) -> None:
    """Reproduce the paper's experiments at this machine's scale (until the harness lands: prints the plan)."""
    session.install("-e", ".")
    session.log("The reproduction sweep needs the harness (issue 6); nothing is run and no result is claimed.")
