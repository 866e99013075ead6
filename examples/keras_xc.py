"""A Keras model ending in the D-SLIDE output layer: an embedding-bag encoder over the sparse XC features.

    python examples/keras_xc.py --dataset amazon670k-small --epochs 2
    mpiexec -n 2 python examples/keras_xc.py --dataset amazon670k-small --epochs 2   # output layer split in 2

Runs in the baseline environment (TensorFlow 2.15: `nox -s horovod` builds it in .nox/horovod). The encoder is
`dslide train`'s first layer written in Keras (a sum of feature embeddings weighted by the feature values, a bias,
ReLU; the same initial weights), trained by `model.fit` with Keras' Adam made lazy for the embedding rows
(dslide.keras.LazyAdam); the output layer is dslide.keras.SparseOutput with `dslide train`'s defaults, fed the same
batches. Prints a line per epoch and, last, the epoch records as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import numba
import numpy as np
import tensorflow as tf

import dslide.keras
from dslide.comm import Communicator
from dslide.config import LSHConfig, SamplingConfig, TrainConfig
from dslide.data.batching import batches, num_batches
from dslide.data.dataset import SparseDataset
from dslide.init import init_columns, layer_scales


class XCModel(dslide.keras.Model):
    """(feature ids, feature values) -> ReLU(sum of value x embedding + bias) -> SparseOutput."""

    def __init__(self, num_features: int, num_labels: int, hidden: int, seed: int, input_sq_norm: float, **head):
        super().__init__()
        scale = layer_scales([num_features, hidden], None, input_sq_norm)[0]
        weights = init_columns(seed, 0, num_features, hidden, np.arange(hidden), scale)  # dslide's initial weights
        self.embedding = tf.keras.layers.Embedding(
            num_features, hidden, embeddings_initializer=tf.constant_initializer(weights)
        )
        self.bias = self.add_weight(name="bias", shape=(hidden,), initializer="zeros")
        self.head = dslide.keras.SparseOutput(num_labels, **head)

    def call(self, inputs, labels=None, training=None):
        ids, values = inputs
        h = tf.nn.relu(tf.reduce_sum(self.embedding(ids) * values[..., None], axis=1) + self.bias)
        return self.head(h, labels=labels, training=training)


class Batches(tf.keras.utils.Sequence):
    """`dslide train`'s batches (the same order for a seed and epoch), each padded to its own longest row."""

    def __init__(self, ds: SparseDataset, batch_size: int, seed: int, shuffle: bool = True) -> None:
        super().__init__()
        self.ds, self.batch_size, self.seed, self.shuffle, self.epoch = ds, batch_size, seed, shuffle, 0
        self._order()

    def _order(self) -> None:
        if self.shuffle:
            self.rows = list(batches(len(self.ds), self.batch_size, self.seed, self.epoch))
        else:
            n = len(self.ds)
            self.rows = [np.arange(s, min(s + self.batch_size, n)) for s in range(0, n, self.batch_size)]

    def __len__(self) -> int:
        return num_batches(len(self.ds), self.batch_size)

    def __getitem__(self, i: int):
        ids, values, labels = self.ds.subset(self.rows[i]).padded()
        return (ids, values), labels

    def on_epoch_end(self) -> None:
        self.epoch += 1
        self._order()


def compiled_model(
    train_ds: SparseDataset,
    hidden: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
    comm: Communicator | None = None,
    sampling: SamplingConfig | None = None,
    lsh: LSHConfig | None = None,
    input_lr: float = 1e-2,
) -> XCModel:
    tf.keras.utils.set_random_seed(seed)
    counts = np.bincount(train_ds.label_indices, minlength=train_ds.num_labels)
    model = XCModel(
        train_ds.num_features,
        train_ds.num_labels,
        hidden,
        seed,
        train_ds.mean_sq_norm(),
        label_counts=counts,
        comm=comm,
        sampling=sampling or SamplingConfig(),
        lsh=lsh,
        train=TrainConfig(lr=lr, seed=seed),
    )
    # lazy Adam on the embedding rows of the batch with their own step size, as dslide train's first layer (Keras'
    # Adam decays every row); the bias takes lr, as there
    model.compile(optimizer=dslide.keras.LazyAdam(learning_rate=lr, sparse_learning_rate=input_lr))
    return model


def fit(
    train_ds: SparseDataset,
    test_ds: SparseDataset,
    epochs: int = 2,
    hidden: int = 128,
    lr: float = 1e-3,
    batch_size: int = 128,
    seed: int = 0,
    test_points: int | None = None,
    comm: Communicator | None = None,
    sampling: SamplingConfig | None = None,
    max_steps: int | None = None,
    return_model: bool = False,
    lsh: LSHConfig | None = None,
    input_lr: float = 1e-2,
):
    """Train with model.fit and evaluate with model.evaluate; returns one record per epoch."""
    model = compiled_model(train_ds, hidden, lr, seed, comm, sampling, lsh, input_lr)
    test = Batches(test_ds.subset(np.arange(min(test_points or len(test_ds), len(test_ds)))), 512, seed, False)
    train = Batches(train_ds, batch_size, seed)
    records: list[dict] = []

    class EpochEnd(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started, self.active, self.losses = time.perf_counter(), [], []

        def on_train_batch_end(self, batch, logs=None):
            self.active.append(model.head.engine.last_active)
            self.losses.append(float(logs["batch_loss"]))

        def on_epoch_end(self, epoch, logs=None):
            seconds = time.perf_counter() - self.started
            steps = len(self.active)
            p1 = model.evaluate(test, verbose=0, return_dict=True)["p_at_1"]
            records.append(
                {
                    "epoch": epoch + 1,
                    "p@1": float(p1),
                    "train_seconds": seconds,
                    "samples_per_s": min(len(train_ds), steps * batch_size) / seconds,
                    "loss": float(np.mean(self.losses)),
                    "step_losses": self.losses,
                    "active_per_sample": float(np.mean(self.active)),
                    "bytes_sent": model.head.engine.comm.stats.total_sent(),
                }
            )

    model.fit(train, epochs=epochs, steps_per_epoch=max_steps, shuffle=False, verbose=0, callbacks=[EpochEnd()])
    return (records, model) if return_model else records


def main(argv: list[str] | None = None) -> None:
    from dslide.data.registry import dataset_paths
    from dslide.data.xc_format import load_dataset

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="amazon670k-small", help="a dslide data set name (harness data list)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3, help="the encoder's bias and the output layer")
    p.add_argument("--input-lr", type=float, default=1e-2, help="the embedding rows (dslide train --input-lr)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--threads", type=int, default=1, help="numba and TensorFlow threads")
    p.add_argument("--test-points", type=int, default=None, help="evaluate on the first N test points only")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    numba.set_num_threads(args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    train_path, test_path = dataset_paths(args.dataset)
    comm = Communicator()
    records = fit(
        load_dataset(train_path),
        load_dataset(test_path),
        args.epochs,
        args.hidden,
        args.lr,
        args.batch_size,
        args.seed,
        args.test_points,
        comm,
        input_lr=args.input_lr,
    )
    if comm.rank == 0:
        for r in records:
            print(f"epoch {r['epoch']}: P@1 {r['p@1']:.4f}, {r['samples_per_s']:,.0f} samples/s, loss {r['loss']:.3f}")
        records = [{k: v for k, v in r.items() if k != "step_losses"} for r in records]
        print(json.dumps({"framework": "keras", "dataset": args.dataset, "ranks": comm.size, "records": records}))


if __name__ == "__main__":
    main()
