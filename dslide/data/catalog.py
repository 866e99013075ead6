"""A product catalogue: generated extreme-classification data that behaves like Amazon-670K, not only shaped like it.

The generative model (every parameter is a field of CatalogParams, with the statistic it was set from):

- **Items in a hierarchy.** The labels are items of a catalogue: top categories > mid categories > leaf categories
  > groups of similar items > items. Each node picks its parent at random, with lognormal weights, so categories
  differ in size the way real ones do. An item's popularity is lognormal; that alone sets how many points it
  labels (its expected count is proportional to it, whatever the hierarchy).
- **A point is a product page.** It has a home group (drawn by the group's total popularity). Its labels are
  co-purchased items near it: each label comes from the home group, its leaf, its mid or top category, or from
  anywhere (label noise), by `label_levels`, and within that node by item popularity. So which labels compete for
  a point depends on the point, not on global popularity, and most labels are rare.
- **Features are words.** A point's words are its own (rare words of its description: what a model can only
  memorise), words of its neighbourhood (its home group's, leaf's, mid and top category's vocabularies), words of
  the items it is bought with, and background words (Zipfian over the whole vocabulary); values are tf-idf-like,
  rows L2-normalised, six decimals as in the published files.
- **Every label in both train and test.** Labels are drawn for the whole population (`population_train` and
  `population_test` points: the published Amazon-670K split). As the Extreme Classification Repository's split
  rule has it, every item labels at least one point of each split: an item that no draw placed in a split takes
  the place of the rarest repeated label of a point near it, so the label count per point does not change.
- **Smaller presets are random samples of the full-size one.** A preset of fewer points than its population draws
  the same population's labels and keeps a uniform random sample of its points (then makes their features), as a
  random 100,000-point sample of the real set would: its rare labels are missing from training as they would be.

Deterministic for (params, seed); generated in fixed-size chunks of points, so memory stays bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from dslide.data.dataset import SparseDataset
from dslide.data.documents import concat, document_rows, draw, first_occurrences, zipf_cdf

CHUNK_ROWS = 65536
_STRUCTURE, _TRAIN, _TEST = 10, 11, 12
_LABELS, _SAMPLE, _FEATURES = 0, 1, 2
LEVELS = ("group", "leaf", "mid", "top", "anywhere")  # where a label is drawn: label_levels, level_sharpness
SOURCES = ("own", "co-purchased items", "group", "leaf", "mid", "top", "background")  # feature_sources


@dataclass(frozen=True)
class CatalogParams:
    """A catalogue-shaped multi-label dataset; defaults are the full-size Amazon-670K stand-in."""

    num_features: int = 135_909  # Amazon-670K (XC repository)
    num_labels: int = 670_091  # Amazon-670K
    num_train: int = 490_449  # points kept: population_train for the full-size set, fewer for a random sample
    num_test: int = 153_025
    population_train: int = 490_449  # the population the points are sampled from: Amazon-670K's split
    population_test: int = 153_025
    avg_nnz: float = 75.68  # distinct features per point: nnz(X) / points on Amazon-670K train
    avg_labels: float = 5.45  # labels per point: Amazon-670K; then points per label = 5.45 * 490,449 / 670,091 = 3.99
    # Hierarchy: nodes per level. ~17 items a group, ~335 a leaf: the number of leaves sets how much of a point's
    # neighbourhood a 100,000-point sample can learn (docs/data.md has the trials).
    num_top: int = 25
    num_mid: int = 300
    num_leaf: int = 2_000
    num_group: int = 40_000
    node_size_sigma: float = 0.8  # lognormal spread of how many children a node attracts
    # Item popularity ~ lognormal. sigma, label_levels and level_sharpness were set together: 80-90% of labels with
    # <= 5 training points (0.894 here), the commonest label in well under 5% of points (0.4%), while each leaf's
    # bestsellers carry what a model can predict (the published mean of 3.99 points per label fixes the scale).
    popularity_sigma: float = 0.6
    # Where each label of a point comes from (the order of LEVELS): home group, leaf, mid, top category, anywhere.
    label_levels: tuple[float, ...] = (0.15, 0.70, 0.05, 0.05, 0.05)
    # Within a node, an item is drawn by popularity**sharpness (per level): > 1 at the wider levels makes each
    # category's bestsellers the labels its points share (what makes co-purchases predictable).
    level_sharpness: tuple[float, ...] = (1.0, 5.0, 2.0, 2.0, 1.0)
    # Where each feature draw of a point comes from (the order of SOURCES).
    feature_sources: tuple[float, ...] = (0.10, 0.15, 0.12, 0.18, 0.08, 0.04, 0.33)
    words_per_node: tuple[int, ...] = (3, 8, 8, 30, 120)  # vocabulary of an item, group, leaf, mid, top node
    feature_zipf: float = 1.0  # background word frequency ~ 1 / rank**feature_zipf
    nnz_dispersion: float = 4.0  # gamma shape of the per-point nnz (smaller: more spread)
    kind: str = "catalog"


class Catalogue:
    """The parts shared by train and test: the hierarchy, item popularity, node vocabularies, idf."""

    def __init__(self, p: CatalogParams, seed: int) -> None:
        self.p = p
        rng = np.random.Generator(np.random.PCG64([seed, _STRUCTURE]))
        # Parents by lognormal attraction, then items sorted depth-first, so every node's items are one range.
        mid_top = _attach(rng, p.num_mid, p.num_top, p.node_size_sigma)
        leaf_mid = _attach(rng, p.num_leaf, p.num_mid, p.node_size_sigma)
        group_leaf = _attach(rng, p.num_group, p.num_leaf, p.node_size_sigma)
        item_group = _attach(rng, p.num_labels, p.num_group, p.node_size_sigma)
        g_leaf = group_leaf[item_group]
        g_mid = leaf_mid[g_leaf]
        order = np.lexsort((item_group, g_leaf, g_mid, mid_top[g_mid]))
        # ancestors[level] for every item position, renumbered 0.. in depth-first order
        self.ancestors = np.empty((4, p.num_labels), dtype=np.int64)
        for level, raw in enumerate((item_group, g_leaf, g_mid, mid_top[g_mid])):
            sorted_ids = raw[order]
            self.ancestors[level] = np.concatenate(([0], np.cumsum(sorted_ids[1:] != sorted_ids[:-1])))
        # The item at each position gets a random label id (so label ids carry no structure).
        self.label_of_position = rng.permutation(p.num_labels).astype(np.int64)
        self.position_of_label = np.empty(p.num_labels, dtype=np.int64)
        self.position_of_label[self.label_of_position] = np.arange(p.num_labels)
        self.popularity = rng.lognormal(0.0, p.popularity_sigma, p.num_labels)
        self.cum_popularity = np.concatenate(([0.0], np.cumsum(self.popularity)))
        self.cum_sharpened = [np.concatenate(([0.0], np.cumsum(self.popularity**g))) for g in p.level_sharpness]
        # [start, end) item positions of every node at each level
        self.node_ranges = [_ranges(self.ancestors[level]) for level in range(4)]
        self.num_nodes = [len(r[0]) for r in self.node_ranges]
        # Node vocabularies: distinctive words (never the commonest ones) of every item, group, leaf, mid, top.
        self.feature_of_rank = rng.permutation(p.num_features).astype(np.int64)
        self.feature_cdf = zipf_cdf(p.num_features, p.feature_zipf)
        counts = (p.num_labels, *self.num_nodes)
        floors = (500, 500, 300, 100, 50)
        self.vocab = [
            rng.integers(lo, p.num_features, size=(n, k)).astype(np.int64)
            for n, k, lo in zip(counts, p.words_per_node, floors, strict=True)
        ]
        rank = np.empty(p.num_features, dtype=np.int64)
        rank[self.feature_of_rank] = np.arange(p.num_features)
        self.idf = (1.0 + np.log(p.num_features / (1.0 + rank))).astype(np.float64)

    def population(self, n: int, seed: int, stream: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(home group, label indptr, label ids) of a whole split's population, every item in it."""
        p = self.p
        rng = np.random.Generator(np.random.PCG64([seed, stream, _LABELS]))
        group_start, group_end = self.node_ranges[0]
        group_weight = self.cum_popularity[group_end] - self.cum_popularity[group_start]  # points follow items
        home = draw(rng, np.cumsum(group_weight) / group_weight.sum(), n)
        k = np.minimum(1 + rng.poisson(p.avg_labels - 1.0, n), p.num_labels)
        rows = np.repeat(np.arange(n, dtype=np.int64), k)
        level = draw(rng, np.cumsum(p.label_levels) / np.sum(p.label_levels), len(rows))
        home_position = self.node_ranges[0][0][home]  # any item of the home group names its ancestors
        positions = self._draw_items(rng, home_position[rows], level)
        # A label already in the point is drawn again one level up (a small group has few items); leftovers dropped.
        for _ in range(20):
            dup = ~first_occurrences(rows, positions, p.num_labels)
            if not dup.any():
                break
            level[dup] = np.minimum(level[dup] + 1, 4)
            positions[dup] = self._draw_items(rng, home_position[rows[dup]], level[dup])
        keep = first_occurrences(rows, positions, p.num_labels)
        rows, positions = rows[keep], positions[keep]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        # The split rule: an item no draw placed takes the place of a repeated label in a point near it.
        _place_missing_items(indptr, positions, home, self._item_ancestor_groups(), np.uint64(rng.integers(2**63)))
        ids = self.label_of_position[positions]
        return home, indptr, ids[np.lexsort((ids, rows))]

    def _item_ancestor_groups(self) -> np.ndarray:
        """For every item position and level: the [first, last) group ids under its ancestor at that level."""
        out = np.empty((self.p.num_labels, 5, 2), dtype=np.int64)
        group_of_position = self.ancestors[0]
        for level in range(4):
            start, end = self.node_ranges[level]
            node = self.ancestors[level]
            out[:, level, 0] = group_of_position[start[node]]
            out[:, level, 1] = group_of_position[end[node] - 1] + 1
        out[:, 4, 0], out[:, 4, 1] = 0, self.num_nodes[0]
        return out

    def _draw_items(self, rng: np.random.Generator, home_position: np.ndarray, level: np.ndarray) -> np.ndarray:
        """An item position per draw, by popularity**level_sharpness, under the home item's ancestor at `level`
        (4: anywhere)."""
        lo = np.zeros(len(level), dtype=np.int64)
        hi = np.full(len(level), self.p.num_labels, dtype=np.int64)
        for lv in range(4):
            at = level == lv
            node = self.ancestors[lv][home_position[at]]
            lo[at], hi[at] = self.node_ranges[lv][0][node], self.node_ranges[lv][1][node]
        out = np.empty(len(level), dtype=np.int64)
        u = rng.random(len(level))
        for lv, c in enumerate(self.cum_sharpened):
            at = level == lv
            a, b = lo[at], hi[at]
            out[at] = np.clip(np.searchsorted(c, c[a] + u[at] * (c[b] - c[a]), side="right") - 1, a, b - 1)
        return out

    def points(self, n: int, population: int, seed: int, stream: int) -> SparseDataset:
        """n points sampled uniformly from the split's population, with their features."""
        if n == 0:
            return concat([], self.p.num_features, self.p.num_labels)
        home, indptr, labels = self.population(population, seed, stream)
        rng = np.random.Generator(np.random.PCG64([seed, stream, _SAMPLE]))
        keep = np.sort(rng.choice(population, size=n, replace=False)) if n < population else np.arange(population)
        parts = []
        for c, r0 in enumerate(range(0, n, CHUNK_ROWS)):
            rows = keep[r0 : r0 + CHUNK_ROWS]
            lab_ptr = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum(indptr[rows + 1] - indptr[rows], out=lab_ptr[1:])
            lengths = np.diff(lab_ptr)
            take = np.repeat(indptr[rows], lengths) + (np.arange(lab_ptr[-1]) - np.repeat(lab_ptr[:-1], lengths))
            chunk_rng = np.random.Generator(np.random.PCG64([seed, stream, _FEATURES, c]))
            parts.append(self._features(chunk_rng, home[rows], lab_ptr, labels[take]))
        return concat(parts, self.p.num_features, self.p.num_labels)

    def _features(
        self, rng: np.random.Generator, home: np.ndarray, label_indptr: np.ndarray, labels: np.ndarray
    ) -> SparseDataset:
        p = self.p
        n = len(home)
        label_counts = np.diff(label_indptr)
        lam = rng.gamma(p.nnz_dispersion, (p.avg_nnz - 1.0) / p.nnz_dispersion, n)
        target = np.minimum(1 + rng.poisson(lam), p.num_features // 2)
        cand = np.ceil(2.5 * target).astype(np.int64) + 8
        rows = np.repeat(np.arange(n, dtype=np.int64), cand)
        m = len(rows)
        source = draw(rng, np.cumsum(p.feature_sources) / np.sum(p.feature_sources), m)
        source[(source == 1) & (label_counts[rows] == 0)] = 6
        rank = np.empty(m, dtype=np.int64)
        own = source == 0  # rare words of the point's own description
        rank[own] = rng.integers(p.num_features // 4, p.num_features, int(own.sum()))
        items = source == 1  # a word of one of the items it is bought with
        r = rows[items]
        pick = label_indptr[r] + (rng.random(len(r)) * label_counts[r]).astype(np.int64)
        words = self.vocab[0]
        rank[items] = words[self.position_of_label[labels[pick]], rng.integers(0, words.shape[1], len(r))]
        home_position = self.node_ranges[0][0][home]
        for lv in range(4):  # the vocabulary of its group, leaf, mid and top category
            at = source == 2 + lv
            words = self.vocab[1 + lv]
            node = self.ancestors[lv][home_position[rows[at]]]
            rank[at] = words[node, rng.integers(0, words.shape[1], int(at.sum()))]
        background = source == 6
        rank[background] = draw(rng, self.feature_cdf, int(background.sum()))
        feats = self.feature_of_rank[rank]
        signal = (source >= 1) & (source <= 5)
        feat_indptr, feats, values = document_rows(rng, n, rows, feats, signal, target, self.idf)
        return SparseDataset(
            feat_indptr, feats, values, label_indptr, labels.astype(np.int32), p.num_features, p.num_labels
        )


def generate_catalog(p: CatalogParams, seed: int = 0) -> tuple[SparseDataset, SparseDataset]:
    """(train, test) for the parameters; deterministic for (params, seed)."""
    if not (0 <= p.num_train <= p.population_train and 0 <= p.num_test <= p.population_test):
        raise ValueError(f"a catalogue samples at most its population: {p.num_train}/{p.population_train} train, "
                         f"{p.num_test}/{p.population_test} test")  # fmt: skip
    cat = Catalogue(p, seed)
    return cat.points(p.num_train, p.population_train, seed, _TRAIN), cat.points(
        p.num_test, p.population_test, seed, _TEST
    )


def _attach(rng: np.random.Generator, children: int, parents: int, sigma: float) -> np.ndarray:
    """A parent for every child, parents chosen by lognormal attraction (so sizes vary like real categories)."""
    w = rng.lognormal(0.0, sigma, parents)
    return draw(rng, np.cumsum(w) / w.sum(), children)


def _ranges(sorted_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = int(sorted_ids[-1]) + 1
    return np.searchsorted(sorted_ids, np.arange(n), "left"), np.searchsorted(sorted_ids, np.arange(n), "right")


@numba.njit(cache=True)
def _place_missing_items(indptr, positions, home, ancestor_groups, seed):
    """Put every item no draw placed into a point near it, in place of the rarest label the split holds twice.

    Nearest first: a point of the item's own group, else of its leaf, mid, top category, else anywhere (8 random
    points tried per level). Giving up the rarest repeated label keeps each category's bestsellers, whose repeats
    are what a model can learn. Edits `positions` in place; the number of labels per point does not change.
    """
    np.random.seed(seed % 2**32)
    num_items = ancestor_groups.shape[0]
    count = np.zeros(num_items, dtype=np.int64)
    for x in positions:
        count[x] += 1
    by_home = np.argsort(home, kind="mergesort")
    num_groups = ancestor_groups[:, 4, 1].max()
    group_first_point = np.searchsorted(home[by_home], np.arange(num_groups + 1))
    for item in np.random.permutation(num_items):
        if count[item] > 0:
            continue
        for level in range(5):
            lo = group_first_point[ancestor_groups[item, level, 0]]
            hi = group_first_point[ancestor_groups[item, level, 1]]
            best = -1
            for _ in range(8 if hi > lo else 0):
                point = by_home[lo + np.random.randint(hi - lo)]
                s, e = indptr[point], indptr[point + 1]
                for j in range(s, e):
                    if count[positions[j]] >= 2 and (best < 0 or count[positions[j]] < count[positions[best]]):
                        best = j
                if best >= 0:
                    break
            if best >= 0:
                count[positions[best]] -= 1
                positions[best] = item
                count[item] = 1
                break
