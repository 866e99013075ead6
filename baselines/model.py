"""dslide's network in TensorFlow: sparse input -> hidden ReLU layers -> full softmax over every label.

Same maths as the engine: the same initial weights as `dslide train` for the same seed (dslide.init: fan-in
aware scales by default, or N(0, init_scale^2) everywhere; output biases at the label prior or 0);
soft-target cross-entropy (target 1/|y| on each of the point's labels, points without labels contribute 0,
summed and divided by the batch size); Adam with bias correction m_hat / (sqrt(v_hat) + eps), applied by
TensorFlow's fused kernel (ResourceApplyAdam, what Keras' legacy Adam runs) with its epsilon rescaled so the
update is exactly that formula. The first layer is tf.sparse.sparse_dense_matmul, sparse like the paper's TF
baseline (its weight gradient is a dense features x hidden tensor), or a gather whose gradient is
IndexedSlices over the rows a batch touches (`sparse_gradient`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dslide.data.dataset import SparseDataset
from dslide.init import init_rows, layer_scales, output_bias_prior
from dslide.metrics import precision_at_k


def set_threads(threads: int) -> None:
    """T threads for TensorFlow's kernels (intra-op) and T ops at a time (inter-op): the node's cores.

    TensorFlow fixes both once it has run an op; a process that already ran one (a test run calling several
    baselines in turn) keeps its pools and gets a warning. The command-line baselines always set them first.
    """
    threading = tf.config.threading
    if threading.get_intra_op_parallelism_threads() == threading.get_inter_op_parallelism_threads() == threads:
        return
    try:
        threading.set_intra_op_parallelism_threads(threads)
        threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError as err:
        warnings.warn(f"TensorFlow's thread pools already run; threads={threads} ignored ({err})", stacklevel=2)


@dataclass(frozen=True)
class Batch:
    """One mini-batch as tensors: features as a SparseTensor, labels as (row, label) pairs."""

    features: tf.SparseTensor  # (rows, num_features)
    label_rows: tf.Tensor  # int32 (nlab,): row of each label
    label_ids: tf.Tensor  # int32 (nlab,)

    @property
    def size(self) -> int:
        return int(self.features.dense_shape[0])


def make_batch(data: SparseDataset, rows: np.ndarray) -> Batch:
    """The points `rows` of `data` (in that order) as a Batch."""
    part = data.subset(np.asarray(rows, dtype=np.int64))
    n = len(part)
    feat_rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(part.feat_indptr))
    indices = np.stack([feat_rows, part.feat_indices.astype(np.int64)], axis=1).reshape(-1, 2)
    features = tf.SparseTensor(indices, part.feat_values.astype(np.float32), [n, data.num_features])
    label_rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(part.label_indptr))
    return Batch(features, tf.constant(label_rows), tf.constant(part.label_indices.astype(np.int32)))


BATCH_SIGNATURE = (
    tf.SparseTensorSpec(shape=[None, None], dtype=tf.float32),
    tf.TensorSpec(shape=[None], dtype=tf.int32),
    tf.TensorSpec(shape=[None], dtype=tf.int32),
)


class SparseMLP(tf.Module):
    """Weights W[0] (features x hidden[0]), ..., W[-1] (hidden[-1] x labels); biases b[i].

    init_scale None: dslide's fan-in aware scales (input_sq_norm: the training inputs' mean squared norm);
    label_counts: output biases start at dslide's label prior (else 0).
    """

    def __init__(
        self,
        num_features: int,
        num_labels: int,
        hidden: Sequence[int] = (128,),
        init_scale: float | None = 0.01,
        seed: int = 0,
        sparse_gradient: bool = False,
        input_sq_norm: float = 1.0,
        label_counts: np.ndarray | None = None,
    ) -> None:
        super().__init__(name="sparse_mlp")
        self.sparse_gradient = sparse_gradient
        sizes = [num_features, *hidden, num_labels]
        scales = layer_scales(sizes[:-1], init_scale, input_sq_norm)
        # dslide's own initialisation (same seed -> same starting weights as `dslide train`); dslide keeps the
        # output layer as (labels x hidden) rows, hence the transpose.
        initial = [
            init_rows(seed, i, np.arange(a), b, scales[i])
            for i, (a, b) in enumerate(zip(sizes[:-2], sizes[1:-1], strict=True))
        ]
        initial.append(
            np.ascontiguousarray(init_rows(seed, len(hidden), np.arange(num_labels), sizes[-2], scales[-1]).T)
        )
        self.weights = [tf.Variable(w, name=f"w{i}") for i, w in enumerate(initial)]
        self.biases = [tf.Variable(tf.zeros([b]), name=f"b{i}") for i, b in enumerate(sizes[1:])]
        if label_counts is not None:
            self.biases[-1].assign(output_bias_prior(label_counts, np.arange(num_labels)))
        self.num_labels = num_labels

    @classmethod
    def for_data(
        cls,
        train: SparseDataset,
        hidden: Sequence[int],
        init_scale: float | None,
        seed: int,
        output_bias: str = "prior",
        sparse_gradient: bool = False,
    ) -> SparseMLP:
        """The network `dslide train` starts from on `train` (its inputs' norm and label counts)."""
        counts = np.bincount(train.label_indices, minlength=train.num_labels) if output_bias == "prior" else None
        return cls(train.num_features, train.num_labels, hidden, init_scale, seed, sparse_gradient,
                   train.mean_sq_norm(), counts)  # fmt: skip

    @property
    def parameters(self) -> list[tf.Variable]:
        """Every trainable variable, in a fixed order (W0, b0, W1, b1, ...)."""
        return [v for pair in zip(self.weights, self.biases, strict=True) for v in pair]

    def step_sizes(self, lr: float, input_lr: float) -> list[float]:
        """Adam's step size per parameter, as `dslide train` takes them: input_lr for W0's rows, lr for the rest."""
        return [input_lr] + [lr] * (len(self.parameters) - 1)

    def first_layer(self, features: tf.SparseTensor) -> tf.Tensor:
        """x W0 without the bias. By default sparse_dense_matmul: W0's gradient is a dense (features x hidden)
        tensor. With sparse_gradient: gather the rows of W0 the batch touches and sum them per point (the
        same numbers), so W0's gradient is IndexedSlices over those rows only (Horovod then allgathers it)."""
        if not self.sparse_gradient:
            return tf.sparse.sparse_dense_matmul(features, self.weights[0])
        rows, cols = features.indices[:, 0], features.indices[:, 1]
        picked = tf.gather(self.weights[0], cols) * features.values[:, None]
        return tf.math.unsorted_segment_sum(picked, rows, features.dense_shape[0])

    def hidden(self, features: tf.SparseTensor) -> tf.Tensor:
        h = tf.nn.relu(self.first_layer(features) + self.biases[0])
        for w, b in zip(self.weights[1:-1], self.biases[1:-1], strict=True):
            h = tf.nn.relu(h @ w + b)
        return h

    def logits(self, features: tf.SparseTensor) -> tf.Tensor:
        return self.hidden(features) @ self.weights[-1] + self.biases[-1]


def soft_target_loss(
    logits: tf.Tensor, label_rows: tf.Tensor, label_ids: tf.Tensor, normaliser: float | tf.Tensor
) -> tf.Tensor:
    """sum over labelled points of -sum_j (1/|y|) log softmax(z)_j over their labels, divided by `normaliser`."""
    rows = tf.shape(logits)[0]
    counts = tf.math.bincount(label_rows, minlength=rows, maxlength=rows, dtype=tf.float32)
    picked = tf.gather_nd(logits, tf.stack([label_rows, label_ids], axis=1))
    mean_label_logit = tf.math.unsorted_segment_sum(picked / tf.gather(counts, label_rows), label_rows, rows)
    per_point = tf.where(counts > 0, tf.reduce_logsumexp(logits, axis=1) - mean_label_logit, 0.0)
    return tf.reduce_sum(per_point) / tf.cast(normaliser, tf.float32)


class Adam(tf.Module):
    """Dense Adam: m, v per variable; w -= lr * m_hat / (sqrt(v_hat) + eps) with t counted from 1; lr is one step
    size for every variable or one per variable (dslide's larger one for W0's rows: `step_sizes`).

    One fused ResourceApplyAdam per variable (no temporaries of the variable's size). That kernel computes
    w -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps'); eps' = eps sqrt(1 - b2^t) makes it the formula
    above exactly. An IndexedSlices gradient is made dense first (Adam's moments decay on every row anyway).
    """

    def __init__(
        self,
        variables: Sequence[tf.Variable],
        lr: float | Sequence[float],
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
    ) -> None:
        super().__init__(name="adam")
        self.lrs = [float(lr)] * len(variables) if isinstance(lr, int | float) else [float(x) for x in lr]
        if len(self.lrs) != len(variables):
            raise ValueError(f"{len(self.lrs)} step sizes for {len(variables)} variables")
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.step = tf.Variable(0.0, trainable=False, name="t")
        self.m = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        self.v = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]

    def apply(self, grads: Sequence[tf.Tensor], variables: Sequence[tf.Variable]) -> None:
        t = self.step.assign_add(1.0)
        beta1_power, beta2_power = tf.pow(self.beta1, t), tf.pow(self.beta2, t)
        hyper = dict(beta1_power=beta1_power, beta2_power=beta2_power,
                     beta1=tf.constant(self.beta1, tf.float32), beta2=tf.constant(self.beta2, tf.float32),
                     epsilon=self.eps * tf.sqrt(1.0 - beta2_power))  # fmt: skip
        for g, var, m, v, lr in zip(grads, variables, self.m, self.v, self.lrs, strict=True):
            tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, grad=tf.convert_to_tensor(g),
                                         lr=tf.constant(lr, tf.float32), **hyper)  # fmt: skip


def top_k_predictions(model: SparseMLP, data: SparseDataset, k: int = 5, chunk: int = 256) -> np.ndarray:
    """(n, k) label ids of the k largest logits of every point, best first, computed exactly in chunks."""

    @tf.function(input_signature=[BATCH_SIGNATURE[0]])
    def top(features: tf.SparseTensor) -> tf.Tensor:
        return tf.math.top_k(model.logits(features), k=k).indices

    out = [
        top(make_batch(data, np.arange(s, min(s + chunk, len(data)))).features).numpy()
        for s in range(0, len(data), chunk)
    ]
    return np.concatenate(out) if out else np.zeros((0, k), dtype=np.int32)


def evaluate(model: SparseMLP, data: SparseDataset, chunk: int = 256) -> dict[str, float]:
    """P@1, P@3, P@5 over `data` with dslide's precision_at_k."""
    top = top_k_predictions(model, data, k=5, chunk=chunk)
    return {f"p@{k}": precision_at_k(top, data.label_indptr, data.label_indices, k) for k in (1, 3, 5)}
