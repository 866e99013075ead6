"""The catalogue generator (the Amazon-670K stand-in): coverage, statistics, samples, and input-specific labels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dslide.data.catalog import CatalogParams, Catalogue, generate_catalog
from dslide.data.synthetic import PRESETS
from dslide.metrics import precision_at_k
from harness.study.realism import popularity_p1, xc_statistics
from tests.dslide.data.test_synthetic import check_well_formed, cooccurrence_top1, row_ids

# A catalogue of 3,000 items: every size scaled down from the full-size defaults, points per label kept (3.99).
SMALL = CatalogParams(
    num_features=4_000, num_labels=3_000, num_train=2_196, num_test=688, population_train=2_196,
    population_test=688, num_top=4, num_mid=20, num_leaf=100, num_group=600,
)  # fmt: skip


@pytest.fixture(scope="module")
def small():
    return generate_catalog(SMALL, seed=1)


def test_points_are_well_formed_and_every_label_is_in_both_splits(small):
    train, test = small
    check_well_formed(train)
    check_well_formed(test)
    assert (len(train), len(test)) == (2_196, 688)
    s = xc_statistics(train, test)
    assert s["labels_in_train"] == 1.0 and s["test_unseen"] == 0.0
    assert set(np.unique(test.label_indices)) == set(range(SMALL.num_labels))
    assert s["labels_per_point"] == pytest.approx(5.45, abs=0.15)
    assert s["nnz_per_point"] == pytest.approx(75.68, rel=0.05)
    norms = np.sqrt(np.bincount(row_ids(train.feat_indptr), weights=train.feat_values.astype(np.float64) ** 2))
    assert np.allclose(norms, 1.0, atol=1e-5)


def test_deterministic_for_a_seed():
    a, b = generate_catalog(SMALL, seed=4)[0], generate_catalog(SMALL, seed=4)[0]
    c = generate_catalog(SMALL, seed=5)[0]
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_a_smaller_preset_is_a_random_sample_of_the_population():
    sample = dataclasses.replace(SMALL, num_train=500, num_test=100)
    train, _ = generate_catalog(sample, seed=1)
    _, indptr, labels = Catalogue(SMALL, 1).population(SMALL.population_train, 1, 11)
    population_rows = {tuple(labels[indptr[i] : indptr[i + 1]]) for i in range(SMALL.population_train)}
    sampled_rows = [tuple(train.label_indices[train.label_indptr[i] : train.label_indptr[i + 1]]) for i in range(500)]
    assert all(r in population_rows for r in sampled_rows)  # every sampled point is a point of the population
    # ... so a sample misses rare labels, as a random sample of the real set would
    assert len(np.unique(train.label_indices)) < 0.7 * SMALL.num_labels


def test_labels_are_input_specific_not_popular(small):
    train, test = small
    top1 = cooccurrence_top1(train, test)
    p1 = precision_at_k(top1[:, None], test.label_indptr, test.label_indices, 1)
    pop = popularity_p1(train, test)
    # Words predict labels (a co-occurrence table, 0.12 here) far better than the commonest label does (0.035) ...
    assert pop < 0.06 and p1 > 2.5 * pop
    # ... and the predictions spread over many labels, not the popular few.
    assert len(np.unique(top1)) > 0.2 * len(test)


def test_a_point_s_labels_are_near_each_other_in_the_hierarchy():
    cat = Catalogue(SMALL, 2)
    home, indptr, labels = cat.population(SMALL.population_train, 2, 11)
    position = np.empty(SMALL.num_labels, dtype=np.int64)
    position[cat.label_of_position] = np.arange(SMALL.num_labels)
    leaf_of_label = cat.ancestors[1][position[labels]]
    home_leaf = cat.ancestors[1][cat.node_ranges[0][0][home]]
    same_leaf = (leaf_of_label == np.repeat(home_leaf, np.diff(indptr))).mean()
    # A label lands in the point's leaf when drawn at the group or leaf level (75% of draws), or by chance.
    chance = 1 / cat.num_nodes[1]
    assert same_leaf > 0.5 > 10 * chance


def test_the_full_size_label_population_has_the_published_statistics():
    """The labels of the full-size stand-in's 490,449 training points (features are not needed for these)."""
    p = PRESETS["amazon670k"]
    cat = Catalogue(p, 0)
    _, indptr, labels = cat.population(p.population_train, 0, 11)
    counts = np.bincount(labels, minlength=p.num_labels)
    assert (counts > 0).mean() >= 0.99
    assert np.diff(indptr).mean() == pytest.approx(5.45, abs=0.1)
    assert counts.mean() == pytest.approx(3.99, abs=0.1)
    assert 0.80 <= (counts <= 5).mean() <= 0.90
    assert counts.max() / p.population_train <= 0.05
    assert np.sort(counts)[-300:].sum() / counts.sum() <= 0.12


def test_a_catalogue_cannot_sample_more_points_than_its_population():
    with pytest.raises(ValueError, match="at most its population"):
        generate_catalog(dataclasses.replace(SMALL, num_train=SMALL.population_train + 1))
