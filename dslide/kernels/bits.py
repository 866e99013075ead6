"""Bit counts numba does not expose, as the single instructions LLVM has for them (popcnt, tzcnt on x86-64)."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def set_bits(typingctx, x):  # noqa: ANN001, ARG001 (numba's intrinsic signature)
    """How many bits of uint64 x are set (an int64, so sums with other integers stay integers)."""
    if x != types.uint64:
        return None
    return types.int64(types.uint64), lambda context, builder, sig, args: builder.ctpop(args[0])


@intrinsic
def lowest_set_bit(typingctx, x):  # noqa: ANN001, ARG001
    """The index of the lowest set bit of uint64 x (64 for x == 0), an int64."""
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):  # noqa: ANN001, ANN202, ARG001
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

    return types.int64(types.uint64), codegen
