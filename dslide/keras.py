"""The D-SLIDE output layer as a Keras layer (TensorFlow 2.15, the baseline environment's stack).

    class XC(dslide.keras.Model):
        def __init__(self):
            super().__init__()
            self.encoder = ...                                  # any Keras layers
            self.head = dslide.keras.SparseOutput(670_091, label_counts=counts)

        def call(self, x, labels=None, training=None):
            return self.head(self.encoder(x), labels=labels, training=training)

    model = XC(); model.compile(optimizer="adam"); model.fit(dataset_of_x_and_padded_labels, epochs=2)
    ids, scores = model.predict(x)                              # top-k (k=5 by default)

In training mode with labels the layer returns the loss of every sample; its forward pass runs the engine's step
(the head's own Adam update included) through tf.numpy_function, and tf.custom_gradient hands dL/dh to the layers
below, which train with Keras' optimiser. dslide.keras.Model's train_step minimises the mean of that loss and,
under `mpiexec -n P`, averages the encoder's gradients over the ranks (one replica per rank, as Horovod does;
sparse IndexedSlices by gathering every rank's rows). Its test_step reports the exact loss and P@1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from dslide.sparse_output import SparseOutput as EngineOutput


class SparseOutput(tf.keras.layers.Layer):
    """Training (training=True with labels (B, m) int label ids padded with -1): the loss of every sample, (B,).
    Otherwise: the top-k (ids int64, scores float32), each (B, k), by `mode` ("exact" or "lsh").
    Other keyword arguments go to dslide.sparse_output.SparseOutput (configs, label_counts, comm)."""

    def __init__(self, num_labels: int, *, k: int = 5, mode: str = "exact", name: str | None = None, **engine_args):
        super().__init__(name=name, trainable=False)  # no Keras weights: the engine holds and updates them
        self.num_labels, self.k, self.mode = num_labels, k, mode
        self._engine_args = engine_args
        self.engine: EngineOutput | None = None

    def build(self, input_shape) -> None:
        if self.engine is None:
            self.engine = EngineOutput(int(input_shape[-1]), self.num_labels, **self._engine_args)
        super().build(input_shape)

    def call(self, h, labels=None, training=None):
        h = tf.convert_to_tensor(h, tf.float32)
        if training and labels is not None:
            return self._sampled_softmax(h, tf.cast(labels, tf.int64))
        ids, scores = tf.numpy_function(self._topk, [h], [tf.int64, tf.float32], stateful=True)
        ids.set_shape([h.shape[0], self.k])
        scores.set_shape([h.shape[0], self.k])
        return ids, scores

    def _topk(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scores, ids = self.engine.topk(h, self.k, self.mode)
        return ids.astype(np.int64), scores.astype(np.float32)

    def _train_step(self, h: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        loss, dh = self.engine.train_step(h, labels)
        return loss.astype(np.float32), (dh * np.float32(h.shape[0])).astype(np.float32)  # per sample

    def _sampled_softmax(self, h, labels):
        @tf.custom_gradient
        def sampled_softmax(h):
            loss, dh = tf.numpy_function(self._train_step, [h, labels], [tf.float32, tf.float32], stateful=True)
            loss.set_shape([h.shape[0]])
            dh.set_shape(h.shape)

            def grad(upstream):
                return dh * upstream[:, None]

            return loss, grad

        return sampled_softmax(h)

    def average_gradients(self, grads: list) -> list:
        """The mean of every gradient over the ranks, in one call so every rank runs the collectives in the same
        order (a no-op on one rank). IndexedSlices stay sparse: every rank's rows, values divided by P."""
        if self.engine is None or self.engine.comm.size == 1:
            return grads
        flat, kinds = [], []
        for g in grads:
            if g is None:
                kinds.append("none")
            elif isinstance(g, tf.IndexedSlices):
                kinds.append("rows")
                flat += [tf.cast(g.indices, tf.int64), g.values]
            else:
                kinds.append("dense")
                flat.append(g)
        dtypes = [t.dtype for t in flat]

        def average(*arrays):
            out, i = [], 0
            for kind in kinds:
                if kind == "rows":
                    rows, values = self.engine.average_rows(arrays[i], arrays[i + 1])
                    out += [rows.astype(np.int64), values.astype(np.float32)]
                    i += 2
                elif kind == "dense":
                    out.append(self.engine.average(arrays[i]).astype(arrays[i].dtype))
                    i += 1
            return out

        averaged = tf.numpy_function(average, flat, dtypes, stateful=True)
        result, i = [], 0
        for g, kind in zip(grads, kinds, strict=True):
            if kind == "none":
                result.append(None)
            elif kind == "rows":
                values = tf.reshape(averaged[i + 1], [-1, *g.values.shape[1:]])
                result.append(tf.IndexedSlices(values, averaged[i], g.dense_shape))
                i += 2
            else:
                result.append(tf.reshape(averaged[i], tf.shape(g)))
                i += 1
        return result

    def save(self, directory: str | Path) -> Path:
        """The head's slice on every rank (save the encoder's weights with Keras as usual)."""
        return self.engine.save(directory)

    def restore(self, directory: str | Path) -> bool:
        return self.engine.restore(directory)

    def get_config(self) -> dict:
        return {**super().get_config(), "num_labels": self.num_labels, "k": self.k, "mode": self.mode}


class LazyAdam(tf.keras.optimizers.Adam):
    """Keras' Adam, except that a sparse gradient (tf.IndexedSlices: an embedding lookup) updates only the rows it
    has, moments included: the lazy Adam of `dslide train`'s sparse input layer and of torch.optim.SparseAdam.
    Keras' own Adam decays the moments of every row at every step, which for a 135,909 x 128 embedding is several
    dense passes over 70 MB per step. (TensorFlow Addons' LazyAdam did this; Addons has reached its end of life.)
    Dense gradients take Keras' Adam unchanged. sparse_learning_rate (default: learning_rate) is the rows' step size,
    as `dslide train --input-lr` is its sparse input rows' (a rare feature's row moves only in the batches that hold
    it, docs/engine.md)."""

    def __init__(self, learning_rate: float = 0.001, *args, sparse_learning_rate: float | None = None, **kwargs):
        super().__init__(learning_rate, *args, **kwargs)
        self.sparse_learning_rate = learning_rate if sparse_learning_rate is None else sparse_learning_rate

    def get_config(self) -> dict:
        return {**super().get_config(), "sparse_learning_rate": self.sparse_learning_rate}

    def update_step(self, gradient, variable):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        b1, b2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        alpha = tf.cast(self.sparse_learning_rate, dtype) * tf.sqrt(1 - tf.pow(b2, step)) / (1 - tf.pow(b1, step))
        key = self._index_dict[self._var_key(variable)]
        m, v = self._momentums[key], self._velocities[key]
        rows, position = tf.unique(gradient.indices)  # a row looked up twice in the batch gets its summed gradient
        g = tf.math.unsorted_segment_sum(gradient.values, position, tf.shape(rows)[0])
        m_rows = b1 * tf.gather(m, rows) + (1 - b1) * g
        v_rows = b2 * tf.gather(v, rows) + (1 - b2) * tf.square(g)
        m.scatter_update(tf.IndexedSlices(m_rows, rows))
        v.scatter_update(tf.IndexedSlices(v_rows, rows))
        variable.scatter_sub(tf.IndexedSlices(alpha * m_rows / (tf.sqrt(v_rows) + self.epsilon), rows))


class Model(tf.keras.Model):
    """A Keras model whose call(x, labels=None, training=None) ends in a SparseOutput layer: fit() minimises the
    mean sampled-softmax loss (data: (x, padded labels)), evaluate() reports P@1 (exact top-1), predict()
    returns the top-k (ids, scores)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.loss_tracker = tf.keras.metrics.Mean(name="loss")
        self.p_at_1 = tf.keras.metrics.Mean(name="p_at_1")

    @property
    def metrics(self):
        return [self.loss_tracker, self.p_at_1]

    def sparse_output(self) -> SparseOutput:
        heads = [m for m in self.submodules if isinstance(m, SparseOutput)]
        if len(heads) != 1:
            raise ValueError(f"a dslide.keras.Model needs exactly one SparseOutput layer, found {len(heads)}")
        return heads[0]

    def train_step(self, data):
        x, y = data[0], data[1]
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(self(x, labels=y, training=True))
        variables = self.trainable_variables
        grads = self.sparse_output().average_gradients(tape.gradient(loss, variables))
        self.optimizer.apply_gradients([(g, v) for g, v in zip(grads, variables, strict=True) if g is not None])
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result(), "batch_loss": loss}

    def test_step(self, data):
        x, y = data[0], tf.cast(data[1], tf.int64)
        ids, _ = self(x, training=False)
        hit = tf.reduce_any(tf.equal(y, ids[:, :1]), axis=1)
        self.p_at_1.update_state(tf.cast(hit, tf.float32))
        return {"p_at_1": self.p_at_1.result()}
