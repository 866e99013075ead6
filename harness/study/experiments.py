"""The paper's experiments as data: one `Experiment` per research question, sized by a profile.

Profiles: `quick` (a smoke run: Horovod and dense TF a few steps, 1-2 nodes, amazon670k-small), `default`
(up to 8 nodes, 5 rates, D-SLIDE's RQ3 points 3 times, Horovod 10 steps per point; <= 90 min on a 2-core
machine), `paper` (full-size data and the paper's node counts, for a machine or cluster that has the cores),
`text8` (the paper's Text8 row alone, on real Wikipedia text, `real-text-wiki`; ~30 min here). D-SLIDE runs whole
epochs in every profile (they take seconds), so its epoch times contain the table rebuilds.
`plan(profile)` expands them into `Point`s, the runs `harness reproduce` makes. Each arm of an experiment
(a system with its arguments) keeps its records in its own file, `runs/<experiment>-<arm>.jsonl`, because
the sweep's resume key does not include the system's arguments.

Emulated nodes get 1 core here (the paper's had 4-16). What decides D-SLIDE's advantage is the ratio of
compute speed to link speed, so besides the nominal rates an experiment can carry ratio-preserving points:
1 core at 1 Gbit/s x 1/8 = 125 Mbit/s stands for an 8-core node at 1 Gbit/s (docs/reproduce.md).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from harness.cluster.rates import parse_rate

PROFILES = ("quick", "default", "paper", "text8")
# D-SLIDE with learned hash functions (dslide/lsh/learned.py): one extra line in the time-to-accuracy figure
# (the learned-refit arm of results/learned-hash: refits every 200 steps, drift-triggered rebuilds in between)
LEARNED_HASH_ARGS = ("--hash", "learned", "--bits", "14", "--rebuild-trigger", "drift", "--drift-threshold", "0.2",
                     "--redraw-every", "200")  # fmt: skip
BATCH = 128  # the global batch of every system (Horovod: BATCH / nodes per process, or BATCH per process)
# Horovod's and dense TF's steps take seconds to minutes here: they run this many steps and are extrapolated
# (D-SLIDE always runs whole epochs, table rebuilds included).
HOROVOD_STEPS = 10


@dataclass(frozen=True)
class RatioRate:
    """A link rate scaled so that an emulated node of few cores keeps a paper node's compute/link ratio."""

    paper_cores: int
    paper_rate: str

    def rate_for(self, cores: int) -> str:
        mbit = parse_rate(self.paper_rate) * cores / self.paper_cores / 1e6
        return f"{mbit:g}mbit"

    def label(self, cores: int) -> str:
        rate = self.rate_for(cores)
        return f"ratio-preserving: {cores} core(s) at {rate} ~ {self.paper_cores} cores at {self.paper_rate}"


@dataclass(frozen=True)
class Arm:
    """One system with its arguments, in one experiment."""

    name: str  # records file suffix and figure label, e.g. "dslide", "horovod"
    system: str
    args: tuple[str, ...] = ()
    max_steps: int | None = None
    nodes: tuple[int, ...] | None = None  # None: the experiment's nodes (Horovod is limited by memory here)
    batch_per_process: int | None = None  # None: dslide's global batch (Horovod: BATCH / nodes per process)
    repeats: int | None = None  # None: the experiment's
    cores_per_node: int | None = None  # None: the experiment's
    epochs: int | None = None  # None: the experiment's (time to accuracy lets the faster system run more epochs)


@dataclass(frozen=True)
class Experiment:
    name: str
    question: str
    dataset: str
    arms: tuple[Arm, ...]
    nodes: tuple[int, ...] = (1, 2)
    cores_per_node: int = 1
    bandwidths: tuple[str, ...] = ("1gbit",)
    ratio_rates: tuple[RatioRate, ...] = ()
    epochs: int = 1
    eval_points: int | None = 1000  # evaluate on the first N test points (dslide --test-points, else --eval-points)
    common_args: tuple[str, ...] = ()  # to every arm (e.g. --lr)
    budget_s: float = 1800.0  # per point
    repeats: int = 1  # runs of every point (the report takes medians); repeats come after every first run


@dataclass(frozen=True)
class Point:
    """One run of the plan."""

    experiment: str
    arm: str
    system: str
    nodes: int
    cores_per_node: int
    bandwidth: str
    rate_kind: str  # "nominal" or the ratio-preserving label
    dataset: str
    epochs: int
    max_steps: int | None
    args: tuple[str, ...]
    oversubscribe: bool
    budget_s: float
    repeat: int = 1  # 1, 2, ...: the same run again (its own records file, so the sweep does not skip it)

    @property
    def records_name(self) -> str:
        return f"{self.experiment}-{self.arm}" + (f"-r{self.repeat}" if self.repeat > 1 else "")


def system_args(experiment: Experiment, arm: Arm, nodes: int) -> tuple[str, ...]:
    args = [*experiment.common_args, *arm.args]
    if experiment.eval_points:
        args += ["--test-points" if arm.system == "dslide" else "--eval-points", str(experiment.eval_points)]
    if arm.system == "horovod":  # per process: the same global batch as dslide, or the arm's batch per node
        args += ["--batch-size", str(arm.batch_per_process or max(1, BATCH // nodes))]
    elif arm.system != "payload":
        args += ["--batch-size", str(arm.batch_per_process or BATCH)]
    return tuple(args)


def expand(experiment: Experiment, machine_cores: int) -> list[Point]:
    """Every run of one experiment (single-node systems once per rate); oversubscribe when the machine is short."""
    points: list[Point] = []
    repeats: list[Point] = []
    for arm in experiment.arms:
        c = arm.cores_per_node or experiment.cores_per_node
        rates = [(bw, "nominal") for bw in experiment.bandwidths]
        rates += [(r.rate_for(c), r.label(c)) for r in experiment.ratio_rates]
        single_node = arm.system in ("tf-dense", "tf-sampled")
        for n in (1,) if single_node else arm.nodes or experiment.nodes:
            for bw, kind in rates:
                point = Point(experiment.name, arm.name, arm.system, n, c, bw, kind, experiment.dataset,
                              arm.epochs or experiment.epochs, arm.max_steps, system_args(experiment, arm, n),
                              n * c > machine_cores, experiment.budget_s)  # fmt: skip
                if point not in points:
                    points.append(point)
                    times = arm.repeats or experiment.repeats
                    repeats += [dataclasses.replace(point, repeat=r) for r in range(2, times + 1)]
                if single_node or n == 1:
                    break  # one node has no link: one rate is enough
    return points + sorted(repeats, key=lambda p: p.repeat)


def plan(profile: str, machine_cores: int | None = None) -> list[Point]:
    cores = machine_cores or len(os.sched_getaffinity(0))
    return [p for e in experiments(profile) for p in expand(e, cores)]


def experiments(profile: str) -> list[Experiment]:
    """RQ1-RQ5 (RQ4 in two parts: accuracy on `small`, time on the Amazon-670K shape) and time to accuracy (`tta`)
    for `profile`; the `text8` profile is the paper's Text8 row alone (`paper` has it on the real text8)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if profile == "text8":
        return [TEXT8]
    if profile == "paper":
        return [_sized(e, profile) for e in BASE] + [TEXT8_PAPER]
    return [_sized(e, profile) for e in BASE]


_RATIO_8_AT_1G = RatioRate(paper_cores=8, paper_rate="1gbit")  # the paper's 2 nodes x 8 cores at 1 Gbit/s
_RATIO_4_AT_1G = RatioRate(paper_cores=4, paper_rate="1gbit")  # its 8 nodes x 4 cores at 1 Gbit/s
_AMAZON_SMALL = "amazon670k-small"

BASE: tuple[Experiment, ...] = (
    Experiment(
        name="rq1",
        question="Can D-SLIDE train a large sparse model (Amazon-670K shape, 104M parameters) on a few "
        "low-bandwidth, few-core nodes?",
        dataset=_AMAZON_SMALL,
        arms=(Arm("dslide", "dslide"),),
        nodes=(2,),
        bandwidths=("100mbit",),
        ratio_rates=(_RATIO_8_AT_1G,),
    ),
    Experiment(
        name="rq2",
        question="How many bytes cross the network per step with sparsity and model parallelism (D-SLIDE) and "
        "without (Horovod's dense gradient allreduce)?",
        dataset=_AMAZON_SMALL,
        arms=(Arm("dslide", "dslide"), Arm("horovod", "horovod", max_steps=3)),
        nodes=(2,),
        bandwidths=("10gbit",),
    ),
    Experiment(
        name="rq3",
        question="How does D-SLIDE's epoch time compare with Horovod's over nodes and bandwidth?",
        dataset=_AMAZON_SMALL,
        arms=(Arm("dslide", "dslide"), Arm("horovod", "horovod", max_steps=3)),
        nodes=(1, 2),
        bandwidths=("1gbit",),
        ratio_rates=(_RATIO_8_AT_1G,),
    ),
    Experiment(
        name="tta",
        question="Which system reaches a given P@1 sooner at the Amazon-670K shape (time to accuracy)?",
        dataset=_AMAZON_SMALL,
        arms=(
            Arm("dslide", "dslide"),
            Arm("dslide-learned", "dslide", args=LEARNED_HASH_ARGS),
            # Horovod's P@1 after each epoch: a step of Horovod on P processes equals one step of the dense model
            # on the global batch (tests/baselines/test_horovod.py), so one process of dense TF gives it; the
            # time per step comes from RQ3's Horovod points at the same rate (report: time to accuracy).
            Arm("tf-dense", "tf-dense", cores_per_node=2),
        ),
        nodes=(2,),
        bandwidths=("1gbit",),
        ratio_rates=(_RATIO_8_AT_1G,),
        epochs=1,
    ),
    Experiment(
        name="links",
        question="What share of each emulated rate does TCP deliver (the cost model's link efficiency)?",
        dataset=_AMAZON_SMALL,  # not read: the payload moves bytes only
        arms=(Arm("payload", "payload", args=("--bytes", str(16 << 20), "--repeat", "3")),),
        nodes=(2,),
        bandwidths=("1gbit",),
        ratio_rates=(_RATIO_8_AT_1G,),
        eval_points=None,
        budget_s=300.0,
    ),
    Experiment(
        name="rq4",
        question="D-SLIDE against dense TensorFlow on one node: time per epoch and accuracy.",
        dataset="small",
        arms=(Arm("dslide", "dslide"), Arm("tf-dense", "tf-dense")),
        nodes=(1,),
        cores_per_node=2,
        epochs=2,
        common_args=("--lr", "0.001"),
    ),
    Experiment(
        name="rq4-amazon",
        question="D-SLIDE against dense TensorFlow on one node, Amazon-670K shape: time per epoch.",
        dataset=_AMAZON_SMALL,
        arms=(Arm("dslide", "dslide"), Arm("tf-dense", "tf-dense", max_steps=3)),
        nodes=(1,),
        cores_per_node=2,
    ),
    Experiment(
        name="rq5",
        question="Does the ~800M-parameter model (hidden 1024: 826,015,115 parameters) train within per-node "
        "memory when split across nodes?",
        dataset=_AMAZON_SMALL,
        arms=(Arm("dslide", "dslide", args=("--hidden", "1024")),),
        nodes=(4,),
        bandwidths=("1gbit",),
        eval_points=200,
    ),
)

# The paper's Text8 row (RQ4): skip-gram, one word in, its context words out; 2 D-SLIDE nodes against TensorFlow.
# Its own profile, on real text: `real-text-wiki` (the first articles of an English Wikipedia dump, text8's own
# source, cleaned by text8's rules; 418,000 training points, 33,651 words), 2 whole epochs of every arm, dense TF
# included, so accuracy is compared at equal epochs. The 8.4M-token `real-text` would take ~50 min an epoch per
# D-SLIDE core and hours for dense TF over its 235,055 words; text8 itself is the `paper` profile's.
TEXT8 = Experiment(
    name="rq4-text8",
    question="Text8-style skip-gram on real text: D-SLIDE on 1 and 2 nodes against TF sampled and dense softmax: "
    "P@1 at equal epochs and time per epoch (the paper: 2 nodes 6.7x faster per epoch than a V100, 2.5x than an "
    "A100, comparable accuracy).",
    dataset="real-text-wiki",
    arms=(
        Arm("dslide", "dslide"),
        Arm("tf-sampled", "tf-sampled", cores_per_node=2),
        Arm("tf-dense", "tf-dense", cores_per_node=2),
    ),
    nodes=(1, 2),
    bandwidths=("1gbit",),
    epochs=2,
    eval_points=20000,
    budget_s=3600.0,
)
# The paper profile: text8 itself, 3 epochs; dense TF over 253,855 words times 10 steps (an epoch takes hours).
TEXT8_PAPER = dataclasses.replace(
    TEXT8,
    dataset="text8-wiki",
    epochs=3,
    eval_points=5000,
    arms=TEXT8.arms[:2] + (Arm("tf-dense", "tf-dense", cores_per_node=2, max_steps=HOROVOD_STEPS),),
)

# Per profile: experiment name -> field overrides (arms are replaced whole).
_DEFAULT: dict[str, dict] = {
    "rq1": dict(arms=(Arm("dslide", "dslide"),), nodes=(2, 4), epochs=2),
    "rq2": dict(
        arms=(
            Arm("dslide", "dslide"),
            Arm("dslide-dense", "dslide", args=("--sampling", "dense"), max_steps=5),
            Arm("horovod", "horovod", max_steps=HOROVOD_STEPS),
            Arm("horovod-dense", "horovod", args=("--dense-gradient",), max_steps=HOROVOD_STEPS),
        )
    ),
    "rq3": dict(
        arms=(
            Arm("dslide", "dslide"),
            Arm("horovod", "horovod", max_steps=HOROVOD_STEPS, nodes=(1, 2), repeats=1),
            Arm("horovod-b128", "horovod", max_steps=HOROVOD_STEPS, nodes=(2,), batch_per_process=BATCH, repeats=1),
        ),
        nodes=(1, 2, 4, 8),
        bandwidths=("100mbit", "1gbit", "10gbit"),
        ratio_rates=(_RATIO_8_AT_1G, _RATIO_4_AT_1G),
        repeats=3,
    ),
    "tta": dict(
        epochs=3,
        # a race to a P@1: D-SLIDE's epoch takes ~11 s here, dense TF's ~3 min and Horovod's step ~4 s at 1 Gbit/s,
        # so D-SLIDE gets the epochs a 20,000-point sample needs (3 left it at 0.139 against dense TF's 0.184)
        arms=(
            Arm("dslide", "dslide", epochs=10),
            Arm("dslide-learned", "dslide", args=LEARNED_HASH_ARGS, epochs=10),
            Arm("tf-dense", "tf-dense", cores_per_node=2),
            Arm("tf-dense-b256", "tf-dense", cores_per_node=2, batch_per_process=2 * BATCH),  # horovod-b128's 2 nodes
        ),
    ),
    "links": dict(bandwidths=("100mbit", "1gbit", "10gbit"), ratio_rates=(_RATIO_8_AT_1G, _RATIO_4_AT_1G)),
    "rq4": dict(epochs=5),
    "rq4-amazon": dict(arms=(Arm("dslide", "dslide"), Arm("tf-dense", "tf-dense", max_steps=HOROVOD_STEPS))),
    "rq5": dict(nodes=(8,), arms=(Arm("dslide", "dslide", args=("--hidden", "1024")),)),
}
_PAPER: dict[str, dict] = {
    "rq1": dict(
        dataset="amazon-670k",
        arms=(Arm("dslide", "dslide"),),
        nodes=(2, 4, 8),
        cores_per_node=8,
        bandwidths=("100mbit", "1gbit"),
        ratio_rates=(),
        epochs=5,
        eval_points=None,
    ),  # fmt: skip
    "rq2": dict(
        dataset="amazon-670k",
        cores_per_node=8,
        eval_points=None,
        arms=(
            Arm("dslide", "dslide"),
            Arm("horovod", "horovod", max_steps=20),
            Arm("horovod-dense", "horovod", args=("--dense-gradient",), max_steps=20),
        ),
    ),  # fmt: skip
    "rq3": dict(
        dataset="amazon-670k",
        nodes=(1, 2, 4, 8),
        cores_per_node=4,
        eval_points=None,
        bandwidths=("100mbit", "1gbit", "10gbit"),
        ratio_rates=(),
        arms=(
            Arm("dslide", "dslide"),
            Arm("horovod", "horovod"),
            Arm("horovod-b128", "horovod", nodes=(2, 4, 8), batch_per_process=BATCH),
        ),
    ),  # fmt: skip
    "tta": dict(
        dataset="amazon-670k",
        cores_per_node=4,
        epochs=5,
        eval_points=None,
        ratio_rates=(),
        arms=(
            Arm("dslide", "dslide"),
            Arm("dslide-learned", "dslide", args=LEARNED_HASH_ARGS),
            Arm("tf-dense", "tf-dense", cores_per_node=16),
        ),
    ),  # fmt: skip
    "rq4": dict(dataset="amazon-670k", cores_per_node=16, epochs=5, eval_points=None),
    "rq4-amazon": dict(
        dataset="amazon-670k",
        cores_per_node=16,
        eval_points=None,
        arms=(Arm("dslide", "dslide"), Arm("tf-dense", "tf-dense", max_steps=40)),
    ),  # fmt: skip
    "rq5": dict(
        dataset="amazon-670k",
        nodes=(4, 8, 16),
        cores_per_node=4,
        eval_points=10000,
        arms=(Arm("dslide", "dslide", args=("--hidden", "1024")),),
    ),  # fmt: skip
}


def _sized(experiment: Experiment, profile: str) -> Experiment:
    overrides = {"quick": {}, "default": _DEFAULT, "paper": _PAPER}[profile].get(experiment.name, {})
    return dataclasses.replace(experiment, **overrides)


def describe(point: Point) -> str:
    steps = f", {point.max_steps} steps/epoch" if point.max_steps else ""
    return (f"{point.experiment} {point.arm}: {point.nodes} node(s) x {point.cores_per_node} core(s) at "
            f"{point.bandwidth} ({point.rate_kind}), {point.dataset}, {point.epochs} epoch(s){steps}")  # fmt: skip
