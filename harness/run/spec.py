"""What one run is: the system, the cluster it runs on, the data, and the limits; checked before anything runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dslide.config import NetworkConfig, TrainConfig

SYSTEMS = ("dslide", "tf-dense", "tf-sampled", "horovod", "payload")
SINGLE_NODE_SYSTEMS = ("tf-dense", "tf-sampled")
EMULATIONS = ("netns", "none", "hostfile", "slurm")


class RunError(RuntimeError):
    """The run cannot start (bad arguments, missing data, no permission)."""


@dataclass
class RunSpec:
    system: str
    nodes: int = 1
    cores_per_node: int = 1
    bandwidth: str = "1gbit"
    train: str | None = None
    test: str | None = None
    dataset: str | None = None
    data_dir: str | None = None
    epochs: int = 1
    max_steps: int | None = None
    out: Path = Path("results/runs")
    name: str | None = None  # records go to OUT/<name>.jsonl (default: the system)
    emulation: str = "netns"
    hostfile: str | None = None
    iface: str | None = None  # real hosts: the interface whose counters are read (and shaped with `shape`)
    shape: str | None = None  # real hosts: a tbf of this rate on `iface` for the run
    ssh: str = "ssh"  # real hosts: the program mpiexec and the harness reach them with
    head_address: str | None = None  # real hosts: where they reach this machine (Hydra's -localhost)
    oversubscribe: bool = False
    mtu: int | None = None
    timeout_s: float = 3600.0
    work_root: Path | None = None  # systems' output dirs go here (default: ~/.cache/dslide/runs)
    keep_checkpoints: bool = False  # dslide writes a checkpoint per epoch (1.4 GB at Amazon-670K size)
    system_args: list[str] = field(default_factory=list)  # passed through to the system
    force_tcp: bool = True  # False only to demonstrate the shared-memory trap (and the check that catches it)

    def check(self) -> None:
        if self.system not in SYSTEMS:
            raise RunError(f"unknown system {self.system!r}; choose one of {', '.join(SYSTEMS)}")
        if self.emulation not in EMULATIONS:
            raise RunError(f"unknown emulation {self.emulation!r}")
        if self.system in SINGLE_NODE_SYSTEMS and self.nodes != 1:
            raise RunError(f"{self.system} runs as one process on one node: use --nodes 1")
        if self.nodes < 1 or self.cores_per_node < 1 or self.epochs < 1:
            raise RunError("--nodes, --cores and --epochs must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise RunError("--max-steps must be at least 1")
        if self.system != "payload" and not self.dataset and not (self.train and self.test):
            raise RunError("give --dataset NAME, or --train PATH and --test PATH")
        if self.dataset and (self.train or self.test):
            raise RunError("give either --dataset or --train/--test, not both")
        if self.emulation == "hostfile" and not self.hostfile:
            raise RunError("--hostfile FILE is needed to run on real hosts")
        real_only = {"--iface": self.iface, "--shape": self.shape, "--head-address": self.head_address,
                     "--ssh": self.ssh if self.ssh != "ssh" else None}  # fmt: skip
        given = [option for option, value in real_only.items() if value]
        if self.emulation not in ("hostfile", "slurm") and given:
            raise RunError(f"{', '.join(given)}: only for real hosts (--hostfile or --launcher slurm)")
        if self.emulation == "slurm" and self.ssh != "ssh":
            raise RunError("--ssh: a Slurm run reaches its nodes with srun, not ssh")
        if self.shape and not self.iface:
            raise RunError("--shape needs --iface: the interface the ranks talk over on every host")


def option_value(args: Sequence[str], option: str) -> str | None:
    """The value given to `option` in a command's arguments (the last one wins, as click reads them), or None."""
    at = [i for i, a in enumerate(args[:-1]) if a == option]
    return args[at[-1] + 1] if at else None


def batch_size(args: Sequence[str]) -> int:
    """The batch size a system's arguments ask for: --batch-size, else dslide train's default."""
    value = option_value(args, "--batch-size")
    return int(value) if value is not None else TrainConfig.batch_size


def first_hidden_width(args: Sequence[str]) -> int:
    """The first hidden layer's width a system's arguments ask for: --hidden, else dslide train's default."""
    value = option_value(args, "--hidden")
    return int(value.split(",")[0]) if value is not None else NetworkConfig.hidden[0]
