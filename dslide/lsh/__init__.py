"""Locality-sensitive hashing: one module per hash family, plus the tables and their rebuild schedule.

The tables (tables.py) only ever see int32 codes, so a new family needs just the HashFamily protocol
(family.py) and a branch in make_family. index.py holds a rank's tables and decides when they are rebuilt,
redrawn or (learned.py, data-dependent) refitted.
"""

from __future__ import annotations

from dslide.config import LSHConfig
from dslide.lsh.centroids import QueryCentroids
from dslide.lsh.dwta import DWTA
from dslide.lsh.family import HashFamily
from dslide.lsh.learned import LearnedHash
from dslide.lsh.srp import SimHash
from dslide.lsh.wta import WTA

__all__ = ["DWTA", "WTA", "HashFamily", "LearnedHash", "QueryCentroids", "SimHash", "make_family"]
FAMILIES = ("srp", "wta", "dwta", "learned", "centroids")


def make_family(cfg: LSHConfig, dim: int, seed: int) -> HashFamily:
    """The hash family cfg.family (one of FAMILIES) for dim-dimensional vectors; centroids fills buckets of
    cfg.bucket_capacity neurons."""
    if cfg.family not in FAMILIES:
        raise ValueError(f"unknown hash family {cfg.family!r} (expected one of {', '.join(FAMILIES)})")
    K, L, R = cfg.bits_per_table, cfg.num_tables, cfg.range_pow
    if cfg.adaptive_buckets and cfg.family != "centroids":
        raise ValueError(f"adaptive buckets are a feature of the centroids family, not of {cfg.family!r}")
    if K is None:
        raise ValueError("bits_per_table is None: choose K first (dslide.config.auto_bits, as the sampler does)")
    if cfg.family == "srp":
        return SimHash(dim, K, L, R, density=cfg.srp_density, seed=seed)
    slide = cfg.code_layout == "slide"
    if cfg.family == "wta":
        return WTA(dim, K, L, R, bin_size=cfg.bin_size, seed=seed, slide_layout=slide)
    if cfg.family == "dwta":
        return DWTA(dim, K, L, R, bin_size=cfg.bin_size, seed=seed, slide_layout=slide)
    if cfg.family == "learned":
        return LearnedHash(dim, K, L, R, num_bits=cfg.learned_bits, seed=seed)
    return QueryCentroids(dim, K, L, R, bucket_size=cfg.bucket_capacity, seed=seed, adaptive=cfg.adaptive_buckets)
