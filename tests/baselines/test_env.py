"""The harness finds the baseline interpreter through baselines.env, and that interpreter has the stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

from baselines import env  # noqa: E402


def test_override_names_the_interpreter(monkeypatch):
    monkeypatch.setenv("DSLIDE_BASELINE_PYTHON", sys.executable)
    assert env.baseline_python() == Path(sys.executable)
    assert env.baseline_command("horovod", "--epochs", "1") == [
        sys.executable,
        "-m",
        "baselines.horovod_tf",
        "--epochs",
        "1",
    ]
    assert env.mpiexec() == Path(sys.executable).parent / "mpiexec" and env.mpiexec().exists()


def test_check_reports_the_pinned_stack(monkeypatch):
    monkeypatch.setenv("DSLIDE_BASELINE_PYTHON", sys.executable)
    summary = env.check()
    assert "tensorflow 2.15.1" in summary and "horovod 0.28.1" in summary and "mpi True gloo True" in summary


def test_env_module_imports_no_tensorflow():
    code = "import sys, baselines.env; assert 'tensorflow' not in sys.modules and 'horovod' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
