"""Initial weights that depend only on (seed, layer, global neuron id), never on how many ranks there are."""

from __future__ import annotations

import math

import numpy as np

BLOCK = 1024  # rows drawn per random stream


def init_rows(seed: int, layer: int, rows: np.ndarray, width: int, scale: float) -> np.ndarray:
    """float32 (len(rows), width) ~ N(0, scale^2); row r is the same whichever ranks ask for it."""
    out = np.empty((len(rows), width), dtype=np.float32)
    if len(rows) == 0:
        return out
    blocks = rows // BLOCK
    for blk in np.unique(blocks):
        rng = np.random.Generator(np.random.PCG64([seed, layer, int(blk)]))
        drawn = rng.standard_normal((BLOCK, width), dtype=np.float32)
        sel = blocks == blk
        out[sel] = drawn[rows[sel] - blk * BLOCK] * np.float32(scale)
    return out


def init_columns(seed: int, layer: int, num_rows: int, width: int, columns: np.ndarray, scale: float) -> np.ndarray:
    """float32 (num_rows, len(columns)): the given columns of the full (num_rows, width) initial matrix."""
    out = np.empty((num_rows, len(columns)), dtype=np.float32)
    for start in range(0, num_rows, BLOCK):
        rows = np.arange(start, min(start + BLOCK, num_rows))
        out[start : start + len(rows)] = init_rows(seed, layer, rows, width, scale)[:, columns]
    return out


INPUT_PREACT_STD = 0.1  # the sparse layer's pre-activation std at init, whatever the inputs' norm
OUTPUT_GAIN = 8.0  # output weights ~ N(0, OUTPUT_GAIN / width): 0.25 at width 128


def layer_scales(in_widths: list[int], init_scale: float | None, input_sq_norm: float) -> list[float]:
    """Initial weight std of every layer (hidden layers, then the output layer), given each layer's input width.

    Fan-in aware (init_scale None), chosen by measurement (docs/engine.md): the sparse input layer's
    pre-activations start with std 0.1 whatever the inputs' norm (its fan-in is the mean squared norm of an
    input: the pre-activation variance is std^2 * |x|^2, whatever the number of features); middle layers He,
    sqrt(2 / fan-in); the output layer sqrt(8 / fan-in). Small first-layer activations keep the initial logits
    at the output bias prior, while output weights well above 0.01 pass the loss's gradient back to the hidden
    layers from the first step (with 0.01 everywhere, the hidden layer barely moves before the output has
    learned label popularity, and at lr 1e-4 every input ends with the same top-1).
    """
    if init_scale is not None:
        return [init_scale] * len(in_widths)
    first = INPUT_PREACT_STD / math.sqrt(max(input_sq_norm, 1e-12))
    hidden = [math.sqrt(2.0 / w) for w in in_widths[1:-1]]
    return [first, *hidden, math.sqrt(OUTPUT_GAIN / in_widths[-1])]


def output_bias_prior(label_counts: np.ndarray, owned: np.ndarray) -> np.ndarray:
    """log((count + 1) / (max count + 1)) of the owned neurons: at step 0 the network predicts label popularity,
    so no training step is spent learning it (and the softmax's rare labels start where they end up)."""
    counts = np.asarray(label_counts, dtype=np.float64)
    return np.log((counts[owned] + 1.0) / (counts.max() + 1.0)).astype(np.float32)
