"""Behaviour pinned against golden files (tests/pinned/), so that a change of structure can show it changed nothing.

- a fixed-seed `dslide train` on one node (the generated `tiny` preset, 2 epochs of 20 steps): its data files and
  metrics.jsonl and recall.jsonl;
- a fixed-seed `harness run --system dslide` on 2 emulated nodes (root, network namespaces, mpiexec): the record;
- the help of every `harness` command (options, defaults, text);
- the report `harness report` writes from the report tests' fixture records, and the reproduction's plans.

Compared: every field name, and every value that does not depend on the clock, the machine, paths, hosts, process
ids or the run's id (losses, P@k, counted bytes, active counts, steps, rebuilds, recall, the command's arguments).
Bytes measured on the links vary from run to run (TCP) and are left out; the bytes the systems count are not.
Floats are compared to 1e-6 relative: another CPU may round the last bits differently, while a change of seed,
data, default or arithmetic moves them far more.

After a deliberate change of behaviour (and only then; say so in the commit), rewrite the golden files with
`DSLIDE_PIN_UPDATE=1 pytest tests/test_pinned_behaviour.py` and read their diff.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness.report.test_report import results  # noqa: F401 (the report's fixture records, reused)

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "pinned"
UPDATE = bool(os.environ.get("DSLIDE_PIN_UPDATE"))

# `dslide train` options shared by both runs: small enough for seconds, every sampling part exercised (LSH
# retrieval, padding, frequent labels, uniform tail, rebuilds, a redraw), a seed other than the default
TRAIN_ARGS = ["--hidden", "16", "--batch-size", "64", "--no-progress", "--hash", "srp", "--bits", "4", "--tables",
              "8", "--range-pow", "4", "--min-active", "20", "--pad-threshold", "30", "--frequent", "5", "--tail", "5",
              "--rebuild-first", "5", "--redraw-every", "12", "--seed", "5"]  # fmt: skip
# per-run values: the run's id and directories, when it finished, who ran it, the emulated cluster's names, bytes
# measured on the links (TCP's share varies)
VARYING = {"run_id", "work_dir", "finished_at", "cluster_prefix", "git", "machine", "hosts", "wire", "wire_bytes"}


def varies(key: str) -> bool:
    """Times (`*_s`, the timeout apart), rates per second and memory vary from run to run."""
    return key in VARYING or (key.endswith("_s") and key != "timeout_s") or "rss" in key or key == "pid"


def normalised(value: Any, key: str | None = None) -> Any:
    """`value` with what varies replaced by "<varies>" (names kept), absolute paths by "<path>" and the emulated
    cluster's subnet by S."""
    if key is not None and varies(key):
        return "<varies>"
    if isinstance(value, dict):
        return {k: normalised(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    if isinstance(value, str):
        return "<path>" if value.startswith("/") else re.sub(r"\b198\.18\.\d+\.", "198.18.S.", value)
    return value


def differences(got: Any, want: Any, where: str = "") -> list[str]:
    """Where `got` differs from `want` (floats to 1e-6 relative), one line each."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{where}: field {k!r} {'missing' if k in want else 'added'}" for k in sorted(set(want) ^ set(got))]
        return out + [line for k in want if k in got for line in differences(got[k], want[k], f"{where}/{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items, pinned {len(want)}"]
        pairs = enumerate(zip(got, want, strict=True))
        return [line for i, (g, w) in pairs for line in differences(g, w, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(want, float) and isinstance(got, numbers) and not isinstance(got, bool):
        return [] if math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12) else [f"{where}: {got!r}, pinned {want!r}"]
    if isinstance(want, str) and isinstance(got, str) and "\n" in want:  # a help text: its lines
        return differences(got.splitlines(), want.splitlines(), where)
    if type(got) is not type(want) or got != want:
        return [f"{where}: {got!r}, pinned {want!r}"]
    return []


def check_pinned(name: str, got: Any) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=False) + "\n")
        pytest.skip(f"wrote {path}")
    found = differences(got, json.loads(path.read_text()))
    assert not found, f"{len(found)} difference(s) from {path.relative_to(ROOT)}:\n" + "\n".join(found[:40])


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """The data directory holding the `tiny` preset, generated here."""
    from dslide.data.registry import dataset_paths

    root = tmp_path_factory.mktemp("data")
    dataset_paths("tiny", root)
    return root


def bin_of(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def test_a_fixed_seed_training_run_on_one_node(tiny, tmp_path):
    out = tmp_path / "run"
    argv = [bin_of("dslide"), "train", "--dataset", "tiny", "--data-dir", str(tiny), "--out", str(out), "--epochs", "2",
            "--max-steps", "20", "--threads", "1", "--recall-every", "7", *TRAIN_ARGS]  # fmt: skip
    subprocess.run(argv, check=True, capture_output=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"}, timeout=600)
    data = {name: sha256(tiny / "tiny" / name) for name in ("train.txt", "test.txt")}
    got = {"data_sha256": data, "metrics": jsonl(out / "metrics.jsonl"), "recall": jsonl(out / "recall.jsonl")}
    check_pinned("train-one-node.json", normalised(got))


@pytest.mark.root
@pytest.mark.mpi
def test_a_fixed_seed_run_on_two_emulated_nodes(tiny, tmp_path):
    from harness.cluster.emulated import emulation_problem

    problem = emulation_problem()
    if problem:
        pytest.skip(problem)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--system", "dslide", "--nodes", "2",
                           "--bandwidth", "1gbit", "--dataset", "tiny", "--data-dir", str(tiny), "--epochs", "2",
                           "--max-steps", "6", "--out", str(tmp_path), "--name", "pinned", "--work-dir",
                           str(tmp_path / "work"), "--", *TRAIN_ARGS],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = jsonl(tmp_path / "pinned.jsonl")
    check_pinned("run-two-emulated-nodes.json", normalised(record))


def test_every_harness_command_s_help():
    import click
    from click.testing import CliRunner

    from harness.cli import main

    def commands(group: click.Group, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = [prefix]
        for name in sorted(group.commands):
            command = group.commands[name]
            found += commands(command, (*prefix, name)) if isinstance(command, click.Group) else [(*prefix, name)]
        return found

    helps = {}
    for argv in commands(main, ()):
        # wide enough that no line wraps: the text does not depend on where the checkout is
        result = CliRunner().invoke(main, [*argv, "--help"], prog_name="harness", terminal_width=1000)
        assert result.exit_code == 0, result.output
        helps[" ".join(("harness", *argv))] = result.output.replace(str(ROOT), "<repo>")
    check_pinned("harness-help.json", helps)


def test_the_report_of_the_fixture_records_and_the_reproduction_plans(results, tmp_path, monkeypatch):  # noqa: F811
    from harness.report.document import write_report
    from harness.run.store import machine_id
    from harness.study.experiments import PROFILES, plan

    monkeypatch.setenv("DSLIDE_DATA_DIR", str(tmp_path / "no-data"))  # the commonest labels: n/a, whatever is cached
    text = write_report(results / "runs", results).read_text()
    text = re.sub(r"Generated \S+ by", "Generated <time> by", text).replace(machine_id(), "<machine>")
    figures = sorted(p.name for p in (results / "figures").iterdir())
    plans = {profile: [vars(p) for p in plan(profile, machine_cores=2)] for profile in PROFILES}
    check_pinned("report-and-plans.json",
                 normalised({"report": text.replace(str(results), "<out>").splitlines(), "figures": figures,
                             "plans": json.loads(json.dumps(plans))}))  # fmt: skip
