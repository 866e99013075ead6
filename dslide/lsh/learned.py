"""Learned hash functions: sign bits of trained projections, sampled into tables (after MONGOOSE, Chen et al. 2021).

Each side has its own m projections (queries h and neurons' weight vectors w come from different distributions:
h is a ReLU output, w is not) and one threshold per bit, the bit's median over that side's vectors, so every
bit splits both populations in half and buckets stay balanced. Table t reads K of the m bits (bit sampling,
Indyk & Motwani's LSH for Hamming distance), so a query and a neuron whose codes differ in a share f of the
bits collide in a table with probability ~(1 - f)^K.

Until the first fit both sides share one Gaussian matrix with thresholds 0 (SimHash with bit sampling).
fit() trains the projections on (query, neuron) pairs: for every sample query, the neurons giving it the
largest logits (positives) and random neurons (negatives). With soft bits s = tanh(u / tau) of the
standardised projections u, it maximises the positives' mean bit agreement <s_q, s_w>/m, pushes the
negatives' agreement to 0 (chance) and keeps the neurons' bits uncorrelated; plain Adam, numpy, a seeded
generator picks the pairs, so a fit is deterministic for its seed. The sampler (dslide/sampler.py) decides
when to fit: never per step, only at its refresh moments.
"""

from __future__ import annotations

import numpy as np

from dslide.adam import Adam
from dslide.kernels.hashing import sampled_bit_codes
from dslide.lsh._params import as_rows, check_shape, rng


class LearnedHash:
    """L tables of K bits each, read from m learned sign bits; hash() for neurons, hash_queries() for inputs."""

    # fitted on the latest fit_queries training inputs (the first queries_per_step of every batch), paired with
    # the neurons of largest logit for each (fit_uses_positives): the index (dslide/lsh/index.py) keeps them
    fit_queries = 256
    queries_per_step = 8
    fit_uses_positives = True
    fit_iters = (200, 50)  # Adam steps of the first fit and of later ones (which start from the last)

    def __init__(
        self, dim: int, bits_per_table: int, num_tables: int, range_pow: int, num_bits: int = 128, seed: int = 0
    ) -> None:
        check_shape(num_tables, range_pow, bits_per_table)
        if not bits_per_table <= min(num_bits, range_pow):
            raise ValueError(
                f"learned hash: bits per table ({bits_per_table}) must be <= the learned bits ({num_bits}) "
                f"and <= range_pow ({range_pow})"
            )
        self.dim = dim
        self.bits_per_table = bits_per_table
        self.num_tables = num_tables
        self.range_pow = range_pow
        self.num_bits = num_bits
        self.redraw(seed)

    def redraw(self, seed: int) -> None:
        """Random (unfitted) functions: one Gaussian matrix for both sides, thresholds 0, new bit choices."""
        gen = rng(seed)
        # scaled to unit expected row norm: fit()'s Adam steps (lr) are then relative to the entries
        proj = (gen.standard_normal((self.num_bits, self.dim)) / np.sqrt(self.dim)).astype(np.float32)
        self.proj_query, self.proj_neuron = proj, proj.copy()
        self.thr_query = np.zeros(self.num_bits, dtype=np.float32)
        self.thr_neuron = np.zeros(self.num_bits, dtype=np.float32)
        self.select = np.stack(
            [np.sort(gen.choice(self.num_bits, self.bits_per_table, replace=False)) for _ in range(self.num_tables)]
        ).astype(np.int32)
        self.fits = 0

    def hash(self, x: np.ndarray) -> np.ndarray:
        """Bucket ids of neurons' weight vectors."""
        return self._codes(x, self.proj_neuron, self.thr_neuron)

    def hash_queries(self, x: np.ndarray) -> np.ndarray:
        """Bucket ids of a layer's inputs (the vectors the tables are queried with)."""
        return self._codes(x, self.proj_query, self.thr_query)

    def _codes(self, x: np.ndarray, proj: np.ndarray, thr: np.ndarray) -> np.ndarray:
        x = as_rows(x, self.dim)
        out = np.empty((x.shape[0], self.num_tables), dtype=np.int32)
        sampled_bit_codes(x @ proj.T, thr, self.select, out)
        return out

    def fit(
        self,
        queries: np.ndarray,
        positives: np.ndarray,
        weights: np.ndarray,
        seed: int,
        iters: int = 200,
        batch: int = 512,
        lr: float = 0.01,
        tau: float = 0.3,
        neg_weight: float = 1.0,
        decorrelation: float = 0.1,
        threshold_rows: int = 16384,
        holdout: float = 0.25,
        check_every: int = 25,
    ) -> dict[str, float]:
        """Train on queries (n, dim) and positives (n, k) (rows of weights with large logits for each query), then
        reset both sides' thresholds to their medians. Warm-starts from the current projections.

        The last `holdout` share of the queries is not trained on. Every `check_every` steps the functions so far
        are scored on them (lift(): how much likelier a query shares a bucket with its positives than with a
        random neuron), and the fit ends with the best-scoring functions, the current ones (balanced the same
        way) included: a fit can overshoot or overfit a few hundred queries and make the tables worse than its
        start. Returns the positives' and negatives' mean soft agreement after the last step (both in [-1, 1];
        chance is 0), the lift before and after, the step kept (0: the current functions) and whether the fit
        changed them."""
        queries = as_rows(queries, self.dim)
        positives = np.asarray(positives, dtype=np.int64)
        if positives.ndim != 2 or positives.shape[0] != queries.shape[0]:
            raise ValueError(f"positives must have shape ({queries.shape[0]}, k), got {positives.shape}")
        gen = rng(seed)
        n_check = int(len(queries) * holdout)
        sample = weights[:: max(1, len(weights) // threshold_rows)]  # neurons for the thresholds and lift()
        check = (queries[len(queries) - n_check :], positives[len(queries) - n_check :], sample, weights)
        queries, positives = queries[: len(queries) - n_check], positives[: len(queries) - n_check]

        def candidate(pq: np.ndarray, pw: np.ndarray) -> tuple[float, tuple[np.ndarray, ...]]:
            self.proj_query, self.proj_neuron = pq.astype(np.float32), pw.astype(np.float32)
            self.set_thresholds(queries, sample)
            functions = (self.proj_query, self.proj_neuron, self.thr_query, self.thr_neuron)
            return (self.lift(*check) if n_check else 0.0), functions

        lift_before, best = candidate(self.proj_query, self.proj_neuron)
        best_lift, best_step = lift_before, 0
        pq, pw = self.proj_query.copy(), self.proj_neuron.copy()
        moments = [np.zeros_like(pq), np.zeros_like(pq), np.zeros_like(pw), np.zeros_like(pw)]
        adam = Adam(lr)
        agree_pos = agree_neg = 0.0
        for it in range(1, iters + 1):
            qi = gen.integers(0, len(queries), batch)
            q = queries[qi]
            wp = weights[positives[qi, gen.integers(0, positives.shape[1], batch)]]
            wn = weights[gen.integers(0, len(weights), batch)]
            zq, zn = q @ pq.T, wn @ pw.T
            centres = (zq.mean(axis=0), zn.mean(axis=0))
            scales = (zq.std(axis=0) + 1e-6, zn.std(axis=0) + 1e-6)
            _, grad_q, grad_w, a_pos, a_neg = soft_bit_loss(
                pq, pw, q, wp, wn, centres, scales, tau, neg_weight, decorrelation
            )
            adam.dense(pq, moments[0], moments[1], grad_q, it)
            adam.dense(pw, moments[2], moments[3], grad_w, it)
            agree_pos, agree_neg = a_pos, a_neg
            if (n_check and it % check_every == 0) or it == iters:  # without held-out inputs: the last step only
                score, functions = candidate(pq, pw)
                if score > best_lift or not n_check:
                    best_lift, best_step, best = score, it, functions
        self.proj_query, self.proj_neuron, self.thr_query, self.thr_neuron = best
        self.fits += 1
        return {"agree_pos": agree_pos, "agree_neg": agree_neg, "lift_before": lift_before, "lift_after": best_lift,
                "step_kept": best_step, "kept": best_step > 0}  # fmt: skip

    def lift(self, queries: np.ndarray, positives: np.ndarray, neurons: np.ndarray, weights: np.ndarray) -> float:
        """How much likelier a query shares a table's bucket with one of its positives (rows of weights) than with
        one of the given neurons (a sample of all): the ratio of the two per-table collision rates, the second
        counted over every (query, neuron) pair. Both rates are what retrieval's recall and cost grow with."""
        q = self.hash_queries(queries)  # (n, L)
        pos = self.hash(weights[positives.reshape(-1)]).reshape(*positives.shape, -1)  # (n, k, L)
        pos_rate = float((pos == q[:, None, :]).mean())
        other = self.hash(neurons)  # (m, L)
        hits = sum(int(np.bincount(other[:, t], minlength=2**self.bits_per_table)[q[:, t]].sum())
                   for t in range(self.num_tables))  # fmt: skip
        return pos_rate / max(hits / (len(q) * other.size), 1e-12)

    def set_thresholds(self, queries: np.ndarray, neurons: np.ndarray) -> None:
        """Each bit's threshold = its median over the given queries / neuron weight vectors."""
        self.thr_query = np.median(as_rows(queries, self.dim) @ self.proj_query.T, axis=0).astype(np.float32)
        self.thr_neuron = np.median(as_rows(neurons, self.dim) @ self.proj_neuron.T, axis=0).astype(np.float32)

    def state(self) -> dict[str, np.ndarray]:
        return {
            "proj_query": self.proj_query,
            "proj_neuron": self.proj_neuron,
            "thr_query": self.thr_query,
            "thr_neuron": self.thr_neuron,
            "select": self.select,
            "fits": np.array(self.fits),
        }

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.proj_query = np.ascontiguousarray(state["proj_query"], dtype=np.float32)
        self.proj_neuron = np.ascontiguousarray(state["proj_neuron"], dtype=np.float32)
        self.thr_query = np.ascontiguousarray(state["thr_query"], dtype=np.float32)
        self.thr_neuron = np.ascontiguousarray(state["thr_neuron"], dtype=np.float32)
        self.select = np.ascontiguousarray(state["select"], dtype=np.int32)
        self.fits = int(state["fits"])


def soft_bit_loss(
    pq: np.ndarray,
    pw: np.ndarray,
    q: np.ndarray,
    wp: np.ndarray,
    wn: np.ndarray,
    centres: tuple[np.ndarray, np.ndarray],
    scales: tuple[np.ndarray, np.ndarray],
    tau: float,
    neg_weight: float,
    decorrelation: float,
) -> tuple[float, np.ndarray, np.ndarray, float, float]:
    """fit()'s objective on one batch of queries q with positive neurons wp and random neurons wn (rows pair up)
    and its gradients with respect to the query and neuron projections pq, pw.

    Projections are standardised per bit with the given (query, neuron) centres and scales (held constant);
    soft bits s = tanh(u / tau); agreement a = mean over bits of s_q * s_w;
    loss = -mean(a_pos) + neg_weight * mean(a_neg^2) + decorrelation * mean(corr^2), corr being the neurons'
    bit correlations (diagonal left out). Returns (loss, d/dpq, d/dpw, mean a_pos, mean a_neg)."""
    B, m = q.shape[0], pq.shape[0]
    (cq, cw), (sdq, sdw) = centres, scales
    sq = np.tanh((q @ pq.T - cq) / sdq / tau)
    sp = np.tanh((wp @ pw.T - cw) / sdw / tau)
    sn = np.tanh((wn @ pw.T - cw) / sdw / tau)
    a_pos = (sq * sp).mean(axis=1)
    a_neg = (sq * sn).mean(axis=1)
    corr = sn.T @ sn / B
    np.fill_diagonal(corr, 0.0)
    loss = -a_pos.mean() + neg_weight * (a_neg**2).mean() + decorrelation * (corr**2).mean()
    g_sq = (-sp + 2 * neg_weight * a_neg[:, None] * sn) / (B * m)
    g_sp = -sq / (B * m)
    g_sn = 2 * neg_weight * a_neg[:, None] * sq / (B * m) + decorrelation * 4 * (sn @ corr) / (B * m * m)
    g_uq, g_up, g_un = (g * (1 - s * s) / tau for g, s in ((g_sq, sq), (g_sp, sp), (g_sn, sn)))
    grad_q = (g_uq / sdq).T @ q
    grad_w = (g_up / sdw).T @ wp + (g_un / sdw).T @ wn
    return float(loss), grad_q, grad_w, float(a_pos.mean()), float(a_neg.mean())
