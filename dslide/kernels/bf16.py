"""bfloat16 storage in uint16 arrays: the top 16 bits of a float32 (its sign, its 8-bit exponent, 7 mantissa bits).

numba has no bfloat16 type, so a value is kept as the uint16 of its top half and converted with bit shifts; the
arithmetic stays float32. Rounding to bfloat16 is stochastic: the lower 16 bits are added to 16 random bits before
they are cut, so a stored value is unbiased. Adam's second moment needs it: v moves by (1 - beta2) = 0.1% of itself
a step, less than half a bfloat16 step (0.2-0.4%), so rounding to nearest would never move it; so do the weights
(`--weights bf16`), whose steps of ~lr = 1e-3 are about half a bfloat16 step at the output layer's scale (0.25).

Kernels read and write either storage through stored_at and store, which numba specialises per array type (a
float32 array compiles to a plain load and store); numpy code turns a block of either into float32 with as_float32.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

# How TrainConfig.moments and TrainConfig.weights store an array: bfloat16 is kept in uint16.
STORAGE_DTYPES = {"fp32": np.float32, "bf16": np.uint16}


@intrinsic
def float32_bits(typingctx, x):  # noqa: ANN001, ARG001 (numba's intrinsic signature)
    """The uint32 whose bits are float32 x's."""
    if x != types.float32:
        return None
    return types.uint32(types.float32), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(32))


@intrinsic
def float32_from_bits(typingctx, u):  # noqa: ANN001, ARG001
    """The float32 whose bits are uint32 u's."""
    if u != types.uint32:
        return None
    return types.float32(types.uint32), lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())


@numba.njit(inline="always", cache=True)
def bf16_to_float32(b: np.uint16) -> np.float32:
    return float32_from_bits(np.uint32(np.uint32(b) << np.uint32(16)))


@numba.njit(inline="always", cache=True)
def float32_to_bf16_nearest(x: np.float32) -> np.uint16:
    """Round to nearest, ties to even (for converting whole arrays; training rounds stochastically)."""
    u = np.uint64(float32_bits(x))
    return np.uint16((u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16))


@numba.njit(inline="always", cache=True)
def float32_to_bf16_stochastic(x: np.float32, noise16: np.uint32) -> np.uint16:
    """Round x up with probability (its lower 16 bits) / 2^16, given 16 random bits noise16."""
    u = np.uint64(float32_bits(x))
    return np.uint16((u + np.uint64(noise16 & np.uint32(0xFFFF))) >> np.uint64(16))


@numba.njit(inline="always", cache=True)
def mix32(x: np.uint32) -> np.uint32:
    """A 32-bit integer hash with good avalanche (Wellons' lowbias32): counter-based noise, so a rounding does not
    depend on the thread that made it."""
    x = np.uint32(x ^ (x >> np.uint32(16)))
    x = np.uint32(x * np.uint32(0x7FEB352D))
    x = np.uint32(x ^ (x >> np.uint32(15)))
    x = np.uint32(x * np.uint32(0x846CA68B))
    return np.uint32(x ^ (x >> np.uint32(16)))


@numba.njit(parallel=True, cache=True)
def to_bf16(x: np.ndarray) -> np.ndarray:
    """A float32 array as bfloat16 (uint16), rounded to nearest."""
    flat = x.ravel()
    out = np.empty(flat.size, dtype=np.uint16)
    for i in numba.prange(flat.size):
        out[i] = float32_to_bf16_nearest(np.float32(flat[i]))
    return out.reshape(x.shape)


@numba.njit(parallel=True, cache=True)
def from_bf16(b: np.ndarray) -> np.ndarray:
    """A bfloat16 (uint16) array as float32, exactly."""
    flat = b.ravel()
    out = np.empty(flat.size, dtype=np.float32)
    for i in numba.prange(flat.size):
        out[i] = bf16_to_float32(flat[i])
    return out.reshape(b.shape)


def as_float32(x: np.ndarray) -> np.ndarray:
    """x as float32: itself if it is float32 already, else (bfloat16 in uint16) a widened copy."""
    return from_bf16(x) if x.dtype == np.uint16 else x


def stored_at(a, i):
    """Entry i of an array as a number: bfloat16 (uint16 arrays) is widened to float32."""
    return a[i]


@overload(stored_at, inline="always")
def _stored_at(a, i):
    if a.dtype == types.uint16:
        return lambda a, i: bf16_to_float32(a[i])
    return lambda a, i: a[i]


def store(a, i, x, noise16) -> None:
    """a[i] = x; into a bfloat16 (uint16) array rounded stochastically with the 16 random bits noise16."""
    a[i] = x


@overload(store, inline="always")
def _store(a, i, x, noise16):
    if a.dtype == types.uint16:

        def to_bf16(a, i, x, noise16):
            a[i] = float32_to_bf16_stochastic(np.float32(x), noise16)

        return to_bf16

    def as_is(a, i, x, noise16):
        a[i] = x

    return as_is
