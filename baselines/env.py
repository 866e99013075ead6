"""Where the baselines' interpreter lives (TensorFlow 2.15 needs numpy 1.26, so it has its own venv).

`nox -s horovod` builds it at .nox/horovod (`nox -s tests` at .nox/tests-suite-baselines, also used);
$DSLIDE_BASELINE_PYTHON overrides. The harness runs every baseline
as `baseline_python() -m baselines.<system> ...`. This module imports neither TensorFlow nor Horovod, so the
engine's interpreter can import it too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

REPO_ROOT = Path(__file__).resolve().parent.parent
SYSTEM_MODULES = {
    "tf-dense": "baselines.tf_dense",
    "tf-sampled": "baselines.tf_sampled",
    "horovod": "baselines.horovod_tf",
}


# the same environment, built by `nox -s horovod` or by `nox -s tests` (its baselines suite): whichever exists
BASELINE_VENVS = (REPO_ROOT / ".nox" / "horovod", REPO_ROOT / ".nox" / "tests-suite-baselines")


def baseline_python() -> Path:
    """The baseline venv's python: $DSLIDE_BASELINE_PYTHON, else the first of BASELINE_VENVS that exists (else
    .nox/horovod's, for the error message)."""
    override = os.environ.get("DSLIDE_BASELINE_PYTHON")
    if override:
        return Path(override)
    found = [v / "bin" / "python" for v in BASELINE_VENVS if (v / "bin" / "python").exists()]
    return found[0] if found else BASELINE_VENVS[0] / "bin" / "python"


def baseline_command(system: str, *args: str) -> list[str]:
    """argv that runs one baseline (prefix it with `mpiexec -n P` for horovod)."""
    return [str(baseline_python()), "-m", SYSTEM_MODULES[system], *args]


def mpiexec() -> Path:
    """The mpiexec of the baseline venv's mpich wheel (Horovod was built against that MPI)."""
    return baseline_python().parent / "mpiexec"


def check() -> str:
    """Import TensorFlow and Horovod in the baseline interpreter; return a one-line summary or raise."""
    code = (
        "import numpy, tensorflow as tf, horovod, horovod.tensorflow as hvd;"
        "print(f'numpy {numpy.__version__} tensorflow {tf.__version__} horovod {horovod.__version__} "
        "mpi {hvd.mpi_built()} gloo {hvd.gloo_built()}')"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([str(baseline_python()), "-c", code], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{baseline_python()} cannot import the baselines' stack:\n{done.stderr[-2000:]}")
    return done.stdout.strip()


@click.command()
@click.option("--check", "run_check", is_flag=True, help="Import TensorFlow and Horovod in the baseline venv.")
def main(run_check: bool) -> None:
    """Print the baseline interpreter's path (and check it works)."""
    click.echo(baseline_python())
    if run_check:
        try:
            click.echo(check())
        except RuntimeError as err:
            raise click.ClickException(str(err)) from err


if __name__ == "__main__":
    sys.exit(main())
