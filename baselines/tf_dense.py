"""Dense TensorFlow baseline on one node: full softmax over every label, Adam, dslide's batches and metrics.

python -m baselines.tf_dense --train T.txt --test V.txt --epochs 1 --threads 2 --out runs/tf-dense
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np
import tensorflow as tf

from baselines.common import StepResult, common_options, epoch_record, load_data, parse_hidden, train_epoch
from baselines.model import BATCH_SIGNATURE, Adam, SparseMLP, evaluate, make_batch, set_threads, soft_target_loss
from dslide import run_dir
from dslide.config import TrainConfig
from dslide.data.batching import num_batches
from dslide.data.dataset import SparseDataset


@dataclass
class Settings:
    """One baseline run's knobs (the CLI flags); the defaults are `dslide train`'s (lr, initialisation, Adam)."""

    epochs: int = 1
    threads: int = 1
    lr: float = TrainConfig.lr
    input_lr: float = TrainConfig.input_lr  # W0's rows
    batch_size: int = 128
    hidden: tuple[int, ...] = (128,)
    init_scale: float | None = None  # None: dslide's fan-in aware scales
    output_bias: str = "prior"  # or "zero"
    seed: int = 0
    max_steps: int | None = None
    eval_points: int | None = None
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8


StepBuilder = Callable[[SparseMLP, Adam], Callable[..., tf.Tensor]]


def dense_step(model: SparseMLP, adam: Adam) -> Callable[..., tf.Tensor]:
    """A compiled step: full-softmax loss over the batch, gradients, Adam; returns the loss."""

    @tf.function(input_signature=BATCH_SIGNATURE)
    def step(features: tf.SparseTensor, label_rows: tf.Tensor, label_ids: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = soft_target_loss(model.logits(features), label_rows, label_ids, features.dense_shape[0])
        adam.apply(tape.gradient(loss, model.parameters), model.parameters)
        return loss

    return step


def fit(
    train: SparseDataset,
    test: SparseDataset,
    settings: Settings,
    out_dir: Path | None = None,
    system: str = "tf-dense",
    build_step: StepBuilder = dense_step,
    avg_active: float | None = None,
) -> tuple[SparseMLP, list[dict]]:
    """Train for settings.epochs, evaluate after each; append one record per epoch to out_dir/metrics.jsonl."""
    set_threads(settings.threads)
    model = SparseMLP.for_data(train, settings.hidden, settings.init_scale, settings.seed, settings.output_bias)
    adam = Adam(
        model.parameters, model.step_sizes(settings.lr, settings.input_lr), settings.beta1, settings.beta2, settings.eps
    )
    compiled = build_step(model, adam)
    compiled.get_concrete_function()  # trace now, so epoch 0's time is training, not graph building

    def step(rows: np.ndarray) -> StepResult:
        batch = make_batch(train, rows)
        return StepResult(float(compiled(batch.features, batch.label_rows, batch.label_ids)), len(rows))

    held_out = test if settings.eval_points is None else test.subset(np.arange(min(settings.eval_points, len(test))))
    steps_per_epoch = num_batches(len(train), settings.batch_size)
    if settings.max_steps is not None:
        steps_per_epoch = min(steps_per_epoch, settings.max_steps)
    records = []
    for epoch in range(settings.epochs):
        progress = None if out_dir is None else Path(out_dir) / run_dir.PROGRESS
        batch = settings.batch_size
        results, seconds = train_epoch(step, len(train), batch, settings.seed, epoch, settings.max_steps, progress)
        started = time.perf_counter()
        scores = evaluate(model, held_out)
        record = epoch_record(
            system=system,
            epoch=epoch,
            results=results,
            steps_per_epoch=steps_per_epoch,
            epoch_time_s=seconds,
            scores=scores,
            avg_active=float(train.num_labels if avg_active is None else avg_active),
            eval_time_s=time.perf_counter() - started,
            threads=settings.threads,
        )
        record["tf_intra_op_threads"] = tf.config.threading.get_intra_op_parallelism_threads()  # what TF really uses
        records.append(record)
        if out_dir is not None:
            run_dir.append_line(Path(out_dir) / run_dir.METRICS, record)
    return model, records


def settings_from_cli(kwargs: dict) -> Settings:
    return Settings(
        epochs=kwargs["epochs"],
        threads=kwargs["threads"],
        lr=kwargs["lr"],
        input_lr=kwargs["input_lr"],
        batch_size=kwargs["batch_size"],
        hidden=parse_hidden(kwargs["hidden"]),
        init_scale=kwargs["init_scale"],
        output_bias=kwargs["output_bias"],
        seed=kwargs["seed"],
        max_steps=kwargs["max_steps"],
        eval_points=kwargs["eval_points"],
    )


@click.command()
@common_options
def main(
    train_path: str | None, test_path: str | None, dataset: str | None, data_dir: str | None, out_dir: str, **kwargs
) -> None:
    """Dense TensorFlow (full softmax) on one node; writes OUT/metrics.jsonl."""
    set_threads(kwargs["threads"])  # before TensorFlow runs any op
    train, test = load_data(train_path, test_path, dataset, data_dir)
    _, records = fit(train, test, settings_from_cli(kwargs), Path(out_dir))
    for r in records:
        click.echo(f"epoch {r['epoch']}: loss {r['loss']:.4f} p@1 {r['p@1']:.4f} {r['samples_per_s']:.1f} samples/s")


if __name__ == "__main__":
    main()
