"""Software prefetch: the machine code asks the memory system for the row, and asking changes no value."""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest

from dslide.kernels.prefetch import prefetch_row


@numba.njit  # not cached: numba can show the machine code of fresh compilations only
def prefetch_rows(a: np.ndarray, rows: np.ndarray) -> None:
    for r in rows:
        prefetch_row(a, r)


@pytest.mark.parametrize("dtype", [np.float32, np.uint16])
@pytest.mark.parametrize("width", [3, 128, 200])
def test_prefetch_row_emits_prefetch_instructions_and_changes_nothing(dtype, width):
    a = np.arange(50 * width).astype(dtype).reshape(50, width)
    before = a.copy()
    prefetch_rows(a, np.array([0, 7, 49]))
    np.testing.assert_array_equal(a, before)
    asm = "\n".join(prefetch_rows.inspect_asm().values())
    # x86 names them prefetcht0/prefetchw, AArch64 prfm: any of them shows the hint survived compilation
    assert re.search(r"\b(prefetch\w*|prfm)\b", asm), "no prefetch instruction in the compiled kernel"
