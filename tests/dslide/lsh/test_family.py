"""The HashFamily protocol (dslide/lsh/family.py): what satisfies it, and that the tables accept any family that does
(the point of it)."""

from __future__ import annotations

import numpy as np
import pytest

import dslide.lsh.family as family_module
from dslide.config import LSHConfig
from dslide.lsh import HashFamily, make_family
from dslide.lsh.tables import LSHTables


class SignFamily:
    """A toy family: table t's bucket is the sign pattern of coordinates (t, t + 1)."""

    num_tables = 3
    range_pow = 2

    def hash(self, x):
        x = np.asarray(x, dtype=np.float32)
        return np.stack([(x[:, t] > 0) * 2 + (x[:, t + 1] > 0) for t in range(3)], axis=1).astype(np.int32)

    def hash_queries(self, x):
        return self.hash(x)

    def redraw(self, seed):
        pass

    def state(self):
        return {}

    def load_state(self, state):
        pass


class NoQueries:
    num_tables = 1
    range_pow = 1

    def hash(self, x):
        return np.zeros((len(x), 1), np.int32)


def test_a_class_with_the_methods_is_a_family_and_one_without_is_not():
    """isinstance checks the protocol's methods: a duck-typed family passes, one lacking hash_queries does not."""
    assert isinstance(SignFamily(), HashFamily)
    assert not isinstance(NoQueries(), HashFamily)


def test_tables_rebuild_from_any_family_as_if_grouped_by_hand():
    """LSHTables.rebuild(family, vectors) puts neuron n into bucket family.hash(vectors)[n, t] of table t: the
    buckets equal grouping the neurons by their sign patterns, computed here directly."""
    x = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    tables = LSHTables(3, 2, capacity=50)
    tables.rebuild(SignFamily(), x, chunk_rows=16)
    for t in range(3):
        for b in range(4):
            hi, lo = b >> 1, b & 1
            want = [n for n in range(50) if (x[n, t] > 0) == hi and (x[n, t + 1] > 0) == lo]
            assert tables.bucket(t, b).tolist() == want


@pytest.mark.parametrize("name", ["srp", "wta", "dwta"])
def test_symmetric_families_hash_queries_like_neurons(name):
    """For the built-in data-independent families hash_queries(x) is hash(x), as the protocol states."""
    fam = make_family(LSHConfig(family=name, bits_per_table=3, num_tables=6, range_pow=8), 24, seed=1)
    x = np.abs(np.random.default_rng(1).normal(size=(40, 24))).astype(np.float32)
    np.testing.assert_array_equal(fam.hash_queries(x), fam.hash(x))
    assert fam.num_tables == 6 and fam.range_pow == 8
    codes = fam.hash(x)
    assert codes.shape == (40, 6) and codes.dtype == np.int32 and codes.min() >= 0 and codes.max() < 2**8


# What the protocol's documentation (dslide/lsh/family.py, docs/lsh.md) says a family has: L, R and five methods.
MEMBERS = ("num_tables", "range_pow", "hash", "hash_queries", "redraw", "state", "load_state")


@pytest.mark.parametrize("missing", MEMBERS)
def test_a_class_lacking_any_one_member_is_not_a_family(missing):
    """The runtime check asks for every member the protocol documents, not only some: a copy of SignFamily without
    one of them (attribute or method) fails isinstance, the full copy passes."""
    members = {name: getattr(SignFamily, name) for name in MEMBERS}
    assert isinstance(type("Full", (), members)(), family_module.HashFamily)
    del members[missing]
    assert not isinstance(type("Partial", (), members)(), family_module.HashFamily)


@pytest.mark.parametrize("name", ["srp", "wta", "dwta", "learned"])
def test_every_built_in_family_satisfies_the_protocol(name):
    """Each family make_family builds is a HashFamily (the protocol the package re-exports, the same object), with
    the L and R it was configured with."""
    assert HashFamily is family_module.HashFamily
    fam = make_family(LSHConfig(family=name, bits_per_table=4, num_tables=5, range_pow=9), 16, seed=2)
    assert isinstance(fam, family_module.HashFamily)
    assert (fam.num_tables, fam.range_pow) == (5, 9)
