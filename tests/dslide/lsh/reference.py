"""Slow pure-Python WTA / DWTA, written from the algorithm's description, to check the kernels bit for bit."""

from __future__ import annotations

import math

import numpy as np

MASK64 = (1 << 64) - 1
MAX_PROBES = 64


def mix64(x: int) -> int:
    """splitmix64's finaliser on Python ints (the same function as dslide.kernels.rng.mix64)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def bin_winners(x: np.ndarray, bin_coords: np.ndarray, skip_zeros: bool) -> list[int | None]:
    """Per bin: the position of its largest coordinate (first on ties); None if skip_zeros and all are 0."""
    winners: list[int | None] = []
    for coords in bin_coords:
        values = [(float(x[c]), j) for j, c in enumerate(coords) if not (skip_zeros and x[c] == 0)]
        if not values:
            winners.append(None)
            continue
        top = max(v for v, _ in values)
        winners.append(min(j for v, j in values if v == top))
    return winners


def densified(winners: list[int | None], key: int) -> list[int]:
    H = len(winners)
    if all(w is None for w in winners):
        return [0] * H
    out = []
    for h, w in enumerate(winners):
        attempt = 1
        while w is None and attempt <= MAX_PROBES:
            w = winners[mix64(mix64(key ^ h) ^ attempt) % H]
            attempt += 1
        j = h
        while w is None:
            j = (j + 1) % H
            w = winners[j]
        out.append(w)
    return out


def table_codes(hashes: list[int], K: int, bits: int, R: int, mul: np.ndarray, add: np.ndarray) -> list[int]:
    codes = []
    for t in range(len(hashes) // K):
        code = 0
        for h in hashes[t * K : (t + 1) * K]:
            code = (code << bits) | h
        if K * bits > R:
            code = ((code * int(mul[t]) + int(add[t])) & MASK64) >> (64 - R)
        codes.append(code)
    return codes


def slide_table_codes(hashes: list[int], K: int, bits: int, R: int) -> list[int]:
    """SLIDE's LSH::hashesToIndex for WTA/DWTA: shift by floor(ln(2**bits)) per hash, add, keep R bits."""
    shift = int(math.floor(math.log(2**bits)))
    codes = []
    for t in range(len(hashes) // K):
        code = 0
        for k, h in enumerate(hashes[t * K : (t + 1) * K]):
            code += h << (shift * (K - 1 - k))
        codes.append(code & ((1 << R) - 1))
    return codes


def wta_reference(fam, x: np.ndarray) -> np.ndarray:
    """Codes of the rows of x under fam (a WTA or DWTA instance), computed one Python loop at a time."""
    out = []
    for row in x:
        winners = bin_winners(row, fam.bin_coords, skip_zeros=fam.densified)
        if fam.densified:
            hashes = densified(winners, int(fam.probe_key[0]))
        else:
            hashes = [w if w is not None else 0 for w in winners]
        if getattr(fam, "slide_layout", False):
            out.append(slide_table_codes(hashes, fam.bits_per_table, fam.bits, fam.range_pow))
        else:
            out.append(table_codes(hashes, fam.bits_per_table, fam.bits, fam.range_pow, fam.fold_mul, fam.fold_add))
    return np.array(out, dtype=np.int64)


def hash4(a: int, b: int, c: int, d: int) -> int:
    """dslide.kernels.rng.hash4 on Python ints."""
    h = mix64(a)
    h = mix64(h ^ b)
    h = mix64(h ^ c)
    return mix64(h ^ d)


def table_buckets(codes: np.ndarray, t: int, capacity: int, insertion: str, seed: int) -> dict[int, list[int]]:
    """Table t as {bucket: neuron ids}, inserting neurons 0..N-1 one by one into capacity-bounded buckets."""
    buckets: dict[int, list[int]] = {}
    arrivals: dict[int, int] = {}
    for n, b in enumerate(codes[:, t].tolist()):
        slots = buckets.setdefault(b, [])
        i = arrivals.get(b, 0)
        arrivals[b] = i + 1
        if len(slots) < capacity:
            slots.append(n)
        elif insertion == "fifo":
            slots.pop(0)
            slots.append(n)
        else:  # reservoir (Algorithm R): arrival i replaces slot j if the draw j in [0, i] is < capacity
            j = hash4(seed, t, b, i) % (i + 1)
            if j < capacity:
                slots[j] = n
    return buckets
