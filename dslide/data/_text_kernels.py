"""Numba kernel: split a byte stream into whitespace-separated words and hash each one."""

from __future__ import annotations

import numba
import numpy as np

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_H2_OFFSET = np.uint64(0x9E3779B97F4A7C15)
_H2_PRIME = np.uint64(0xBF58476D1CE4E5B9)


@numba.njit(cache=True)
def count_words(buf):
    n = 0
    inword = False
    for c in buf:
        space = c == 32 or c == 10 or c == 13 or c == 9 or c == 11 or c == 12
        if not space and not inword:
            n += 1
        inword = not space
    return n


@numba.njit(cache=True)
def hash_words(buf, starts, lengths, h1, h2):
    """Fill word start offsets, lengths and two independent 64-bit hashes (FNV-1a and a second mix).

    Two hashes let the caller check that no two distinct words share the first one.
    """
    k = -1
    inword = False
    a = _FNV_OFFSET
    b = _H2_OFFSET
    for i in range(buf.shape[0]):
        c = buf[i]
        space = c == 32 or c == 10 or c == 13 or c == 9 or c == 11 or c == 12
        if not space:
            if not inword:
                k += 1
                starts[k] = i
                a = _FNV_OFFSET
                b = _H2_OFFSET
            a = (a ^ np.uint64(c)) * _FNV_PRIME
            b = (b + np.uint64(c) + np.uint64(1)) * _H2_PRIME
            b ^= b >> np.uint64(29)
            lengths[k] = i - starts[k] + 1
            h1[k] = a
            h2[k] = b
        inword = not space
    return k + 1
