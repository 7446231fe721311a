"""Helpers shared by the catalogue's case families (host side only)."""
from __future__ import annotations

import numpy as np

from ..numerics import FLOAT_DTYPES, np_dtype, wide_float

QUICK_WARPS = (4,)
FULL_WARPS = (1, 2, 4, 8)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def grid_of_rank(programs: int, rank: int) -> tuple[int, ...]:
    """A grid of ``rank`` axes with at least ``programs`` programs; kernels linearise the
    program id as ``p0 + n0 * (p1 + n1 * p2)`` (see ``LINEAR_PID`` kernels)."""
    if rank == 1:
        return (programs,)
    if rank == 2:
        return (2, cdiv(programs, 2))
    return (2, 2, cdiv(programs, 4))


def programs_in(grid: tuple[int, ...]) -> int:
    total = 1
    for g in grid:
        total *= g
    return total


def wide(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` as the wide float type references of ``dtype`` are computed in."""
    return np.asarray(array).astype(wide_float(dtype) if dtype in FLOAT_DTYPES else np.float64)


def padded(values: np.ndarray, size: int, fill, dtype: str) -> np.ndarray:
    """``values`` followed by ``fill`` up to ``size`` elements."""
    out = np.full(size, fill, dtype=np_dtype(dtype))
    out[: values.size] = values
    return out
