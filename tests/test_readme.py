"""The README's commands are part of the interface: every one is listed here with the short form a test runs, and
a README command missing from the list fails the first test, so none can rot unnoticed.

Short forms keep each test to seconds: fewer steps, the `tiny` preset where the command's data does not matter,
an emulated cluster only where root is available (CI runs as root), the Horovod environment only where it exists.
The nox sessions are not run from inside a test session: the test checks that each named session exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ("pip", "nox", "harness", "dslide", "python", ".nox/", "mpiexec")

# README command -> how it is checked
CHECKS: dict[str, str] = {
    "pip install nox && nox -s reproduce": "nox session: reproduce",
    "nox -s tests": "nox session: tests",
    'pip install -e ".[mpich]"': "extra: mpich",
    "nox -s horovod": "nox session: horovod",
    "harness run --system dslide --nodes 2 --cores 1 --bandwidth 1gbit --dataset amazon670k-small --max-steps 20": (
        "run: --max-steps 2"
    ),
    "harness run --system horovod --nodes 2 --cores 1 --bandwidth 1gbit --dataset amazon670k-small --max-steps 5": (
        "run: --max-steps 1"
    ),
    "python examples/torch_xc.py --dataset amazon670k-small --epochs 2": "example: --dataset tiny --epochs 1",
    ".nox/horovod/bin/python examples/keras_xc.py --dataset amazon670k-small --epochs 2": (
        "example: --dataset tiny --epochs 1"
    ),
}


def readme_commands() -> list[str]:
    """Commands in the README's indented code blocks, comments and alignment spaces removed."""
    out = []
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("    ") and line.strip().startswith(PROGRAMS):
            out.append(re.sub(r"\s+", " ", line.split(" # ")[0]).strip())
    return out


def test_every_readme_command_has_a_check():
    found = readme_commands()
    assert len(found) >= 8
    unchecked = [c for c in found if c not in CHECKS]
    assert not unchecked, f"README commands with no check in tests/test_readme.py: {unchecked}"
    stale = [c for c in CHECKS if c not in found]
    assert not stale, f"checks of commands no longer in the README: {stale}"


def nox_sessions() -> str:
    nox = shutil.which("nox")
    if nox is None:
        pytest.skip("nox is not installed here (.ci/run installs it)")
    return subprocess.run([nox, "-l"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.mark.parametrize("command", [c for c, how in CHECKS.items() if how.startswith("nox session")])
def test_the_nox_sessions_the_readme_names_exist(command):
    session = CHECKS[command].split(": ")[1]
    assert re.search(rf"^[*-] {session}\b", nox_sessions(), re.M), f"no nox session {session!r}"


def test_the_extra_the_readme_installs_exists():
    extras = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1].split("\n[")[0]
    assert re.search(r'^mpich = \["mpich[>=<]', extras, re.M), "pyproject.toml has no mpich extra"


def short_form(command: str) -> list[str]:
    words = command.split()
    how = CHECKS[command].split(": ")[1].split()
    for flag, value in zip(how[::2], how[1::2], strict=True):
        words[words.index(flag) + 1] = value
    return words


def baseline_python() -> str:
    python = os.environ.get("DSLIDE_BASELINE_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("the baseline environment (nox -s horovod) is not here")
    return python


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c, how in CHECKS.items() if how.startswith("run:")])
def test_the_first_runs_work_as_written(command, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("emulated clusters need root")
    env = dict(os.environ)
    if "--system horovod" in command:
        env["DSLIDE_BASELINE_PYTHON"] = baseline_python()
    harness = str(Path(sys.executable).parent / "harness")
    args = [harness, *short_form(command)[1:], "--out", str(tmp_path / "records"), "--work-dir", str(tmp_path / "w")]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = done.stdout + done.stderr  # the harness's console writes to stderr
    assert "ok:" in said and "per training step" in said


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c, how in CHECKS.items() if how.startswith("example:")])
def test_the_examples_run_as_written(command, tmp_path):
    words = short_form(command)
    python = baseline_python() if words[0].startswith(".nox/") else sys.executable
    if "torch" in command:
        pytest.importorskip("torch")
    env = {**os.environ, "DSLIDE_DATA_DIR": str(tmp_path)}
    done = subprocess.run([python, *words[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
