"""TF sampled-softmax baseline (the naive sparse alternative the SLIDE paper measured): same network and data,
training loss tf.nn.sampled_softmax_loss over a random ~10% of the classes, evaluation exact over all classes.

    python -m baselines.tf_sampled --train T.txt --test V.txt --sample-fraction 0.1 --out runs/tf-sampled

Multi-label points: tf.nn.sampled_softmax_loss needs the same number of true labels per row, so every point's
labels are repeated cyclically up to the largest label count of the training set (num_true); a point with
|y| dividing num_true gets exactly the 1/|y| targets of the full loss. Points without labels are left out of
the loss; it is summed over the rest and divided by the batch size, as in the dense loss. Negatives are drawn
uniformly (XC label ids carry no frequency order, so TensorFlow's default log-uniform sampler would favour
low ids for no reason); --sampler log_uniform gives TensorFlow's default.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click
import numpy as np
import tensorflow as tf

from baselines.common import common_options, load_data
from baselines.model import BATCH_SIGNATURE, Adam, SparseMLP, set_threads
from baselines.tf_dense import Settings, fit, settings_from_cli
from dslide.data.dataset import SparseDataset


def num_sampled_classes(num_labels: int, fraction: float) -> int:
    return max(1, min(num_labels - 1, round(fraction * num_labels)))


def sampled_step_builder(num_labels: int, num_true: int, num_sampled: int, sampler: str = "uniform"):
    """A StepBuilder for baselines.tf_dense.fit whose loss is the sampled softmax."""

    def build(model: SparseMLP, adam: Adam) -> Callable[..., tf.Tensor]:
        @tf.function(input_signature=BATCH_SIGNATURE)
        def step(features: tf.SparseTensor, label_rows: tf.Tensor, label_ids: tf.Tensor) -> tf.Tensor:
            rows = tf.cast(features.dense_shape[0], tf.int32)
            counts = tf.math.bincount(label_rows, minlength=rows, maxlength=rows)
            starts = tf.math.cumsum(counts, exclusive=True)
            labelled = tf.where(counts > 0)[:, 0]
            # Row r's j-th target: its (j mod |y_r|)-th label.
            slot = tf.range(num_true)[None, :] % tf.gather(counts, labelled)[:, None]
            picks = tf.gather(starts, labelled)[:, None] + slot
            targets = tf.cast(tf.gather(label_ids, picks), tf.int64)
            sampled = sampler_fn(targets)
            with tf.GradientTape() as tape:
                hidden = tf.gather(model.hidden(features), labelled)
                per_point = tf.nn.sampled_softmax_loss(
                    weights=tf.transpose(model.weights[-1]),
                    biases=model.biases[-1],
                    labels=targets,
                    inputs=hidden,
                    num_sampled=num_sampled,
                    num_classes=num_labels,
                    num_true=num_true,
                    sampled_values=sampled,
                )
                loss = tf.reduce_sum(per_point) / tf.cast(rows, tf.float32)
            adam.apply(tape.gradient(loss, model.parameters), model.parameters)
            return loss

        def sampler_fn(targets: tf.Tensor):
            sample = (
                tf.random.uniform_candidate_sampler if sampler == "uniform" else tf.random.log_uniform_candidate_sampler
            )
            return sample(targets, num_true, num_sampled, unique=True, range_max=num_labels)

        return step

    return build


def fit_sampled(
    train: SparseDataset,
    test: SparseDataset,
    settings: Settings,
    out_dir: Path | None = None,
    sample_fraction: float = 0.1,
    sampler: str = "uniform",
) -> tuple[SparseMLP, list[dict]]:
    """Train with the sampled softmax; evaluate exactly; records as baselines.tf_dense.fit writes them."""
    tf.random.set_seed(settings.seed)
    num_true = max(1, int(np.diff(train.label_indptr).max(initial=1)))
    num_sampled = num_sampled_classes(train.num_labels, sample_fraction)
    build = sampled_step_builder(train.num_labels, num_true, num_sampled, sampler)
    return fit(train, test, settings, out_dir, system="tf-sampled", build_step=build, avg_active=num_sampled)


@click.command()
@common_options
@click.option("--sample-fraction", default=0.1, show_default=True, help="Share of the classes sampled per batch.")
@click.option("--sampler", type=click.Choice(["uniform", "log_uniform"]), default="uniform", show_default=True)
def main(
    train_path: str | None,
    test_path: str | None,
    dataset: str | None,
    data_dir: str | None,
    out_dir: str,
    sample_fraction: float,
    sampler: str,
    **kwargs,
) -> None:
    """TensorFlow with sampled softmax on one node; writes OUT/metrics.jsonl."""
    set_threads(kwargs["threads"])  # before TensorFlow runs any op
    train, test = load_data(train_path, test_path, dataset, data_dir)
    _, records = fit_sampled(train, test, settings_from_cli(kwargs), Path(out_dir), sample_fraction, sampler)
    for r in records:
        click.echo(f"epoch {r['epoch']}: loss {r['loss']:.4f} p@1 {r['p@1']:.4f} {r['samples_per_s']:.1f} samples/s")


if __name__ == "__main__":
    main()
