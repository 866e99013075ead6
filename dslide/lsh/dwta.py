"""Densified winner-take-all hashing, SLIDE's default family for sparse (ReLU) activations.

A bin's hash is the argmax position among its nonzero coordinates. A bin whose coordinates are all zero
borrows the hash of another bin along a fixed pseudo-random probe sequence (densification, Shrivastava
2017), so sparse vectors still get L meaningful codes instead of an "empty" sentinel. The algorithm is
spelled out in dslide.kernels.hashing (block_argmax, densify).
"""

from __future__ import annotations

from dslide.lsh.wta import WTA


class DWTA(WTA):
    """L tables of K densified WTA hashes, log2(bin_size) bits each (Amazon-670K: K=6, bins of 8 -> 18 bits).

    Same parameters, state and bins as WTA for the same seed; only zeros are treated as missing.
    """

    densified = True
