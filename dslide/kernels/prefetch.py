"""Software prefetch of weight rows the kernels will visit a few rows later.

The kernels that update rows (sampled_output.py's backward, adam.py's adam_rows) visit the touched rows of
matrices of hundreds of MB in increasing but scattered order, and each visit's work depends on the row it has just
loaded, so the CPU waits for one row's memory at a time. Asking for the lines of a row a few rows ahead
(llvm.prefetch, with intent to write, since the kernels update the rows they read) overlaps those waits. numba has
no prefetch of its own, hence the intrinsic.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# How many rows ahead of the one being worked on to ask for (results/roofline/arithmetic/: 2, 4 and 8 do alike).
ROWS_AHEAD = 4

LINE_BYTES = 64


@intrinsic
def prefetch_for_write(typingctx, a, r, k):  # noqa: ANN001, ARG001 (numba's intrinsic signature)
    """Ask for the cache line holding a[r, k] of a 2-D array, to be written soon: a hint, it changes no value."""
    if not isinstance(a, types.Array) or a.ndim != 2:
        return None

    def codegen(context, builder, sig, args):  # noqa: ANN001, ANN202
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        index = [context.cast(builder, args[i], sig.args[i], types.intp) for i in (1, 2)]
        address = builder.bitcast(
            cgutils.get_item_pointer(context, builder, sig.args[0], ary, index), ir.IntType(8).as_pointer()
        )
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32]), "llvm.prefetch.p0"
        )
        # (address, 1: for writing, 3: keep in every cache level, 1: data cache)
        builder.call(fn, [address, ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(a, r, k), codegen


@numba.njit(inline="always", cache=True)
def prefetch_row(a, r) -> None:  # noqa: ANN001
    """Ask for every cache line of row r of the C-contiguous 2-D array a (float32 or bfloat16 rows alike)."""
    step = LINE_BYTES // a.itemsize
    for k in range(0, a.shape[1], step):
        prefetch_for_write(a, r, k)
    # a row need not start on a line boundary, so its last element may sit on one more line
    prefetch_for_write(a, r, a.shape[1] - 1)


@numba.njit(inline="always", cache=True)
def prefetch_update(W, m, v, rows, u, stride) -> None:  # noqa: ANN001
    """Ask for the rows of W and of its Adam moments m, v that a thread walking rows[u], rows[u + stride], ... will
    update ROWS_AHEAD turns from now."""
    ahead = u + ROWS_AHEAD * stride
    if ahead < len(rows):
        prefetch_row(W, rows[ahead])
        prefetch_row(m, rows[ahead])
        prefetch_row(v, rows[ahead])
