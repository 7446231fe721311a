"""Memory: masks, ``other``, strides, pointer arithmetic, 2-D pointer tiles, unaligned sizes.
All exact: what is loaded is what is stored, bit for bit, and masked-off stores leave the
poison in place."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from ..case import family
from ..numerics import ALL_DTYPES, poison
from ..tolerances import EXACT
from .common import FULL_WARPS, QUICK_WARPS, cdiv, grid_of_rank, programs_in


@at.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, x, mask=mask)


@family("memory",
        quick=dict(dtype=["f32", "i8", "f16"], n=[37, 300], warps=QUICK_WARPS, grid_rank=[1, 3],
                   block=[64]),
        full=dict(dtype=ALL_DTYPES, n=[1, 37, 300, 4099], warps=FULL_WARPS, grid_rank=[1, 2, 3],
                  block=[16, 64, 512]))
def masked_copy(ctx, dtype, n, warps, grid_rank, block):
    """Masked load and store over a size that is not a multiple of the block; the padding of
    the output beyond ``n`` must stay unwritten."""
    grid = grid_of_rank(cdiv(n, block), grid_rank)
    size = programs_in(grid) * block
    src = ctx.random((n,), dtype)
    dst = ctx.output((size,), dtype)
    ctx.launch(copy_kernel, grid, ctx.input(src), dst, n, BLOCK=block, num_warps=warps)
    expected = np.concatenate([src, poison((size - n,), dtype)])
    ctx.check("dst", dst, expected, dtype, EXACT, unwritten=np.arange(size) >= n)


@at.jit
def load_other_kernel(src, dst, n, OTHER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n, other=OTHER)
    tl.store(dst + offs, x)


@family("memory",
        quick=dict(dtype=["f32", "i32"], n=[5, 77], other=[-3]),
        full=dict(dtype=ALL_DTYPES, n=[1, 5, 77, 129], other=[-3, 7]),
        where=lambda dtype, n, other: not (dtype.startswith("u") and other < 0))
def load_other(ctx, dtype, n, other):
    """Masked-off lanes of a load take ``other`` (converted to the pointee type)."""
    block = 32
    programs = cdiv(n, block)
    src = ctx.random((n,), dtype)
    dst = ctx.output((programs * block,), dtype)
    ctx.launch(load_other_kernel, (programs,), ctx.input(src), dst, n, OTHER=other, BLOCK=block)
    expected = np.concatenate([src, np.full(programs * block - n, other).astype(src.dtype)])
    ctx.check("dst", dst, expected, dtype, EXACT)


@at.jit
def tile2d_kernel(src, dst, m, n, stride_sm, stride_sn, stride_dm,
                  BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < m) & (rn[None, :] < n)
    x = tl.load(src + rm[:, None] * stride_sm + rn[None, :] * stride_sn, mask=mask)
    tl.store(dst + rm[:, None] * stride_dm + rn[None, :], x, mask=mask)


@family("memory",
        quick=dict(dtype=["f32", "u8"], shape=[(13, 21)], transposed=[False, True]),
        full=dict(dtype=ALL_DTYPES, shape=[(1, 1), (13, 21), (64, 32), (70, 9)],
                  transposed=[False, True]))
def strided_2d_tile(ctx, dtype, shape, transposed):
    """2-D pointer tiles built from row and column strides, from a padded (row stride larger
    than the width) or transposed source, masked at both edges."""
    m, n = shape
    bm, bn = 16, 16
    padded_src = ctx.random((n + 3, m + 5) if transposed else (m + 3, n + 5), dtype)
    if transposed:
        view = padded_src[:n, :m].T
        stride_sm, stride_sn = 1, padded_src.shape[1]
    else:
        view = padded_src[:m, :n]
        stride_sm, stride_sn = padded_src.shape[1], 1
    dst = ctx.output((m, n), dtype)
    ctx.launch(tile2d_kernel, (cdiv(m, bm), cdiv(n, bn)), ctx.input(padded_src), dst, m, n,
               stride_sm, stride_sn, n, BM=bm, BN=bn)
    ctx.check("dst", dst, view, dtype, EXACT)


@at.jit
def pointer_walk_kernel(src, dst, steps, row_stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = src + tl.program_id(0) * BLOCK
    acc = tl.load(p + offs)
    for _ in range(1, steps):
        p += row_stride
        acc = tl.maximum(acc, tl.load(p + offs))
    tl.store(dst + tl.program_id(0) * BLOCK + offs, acc)


@family("memory",
        quick=dict(dtype=["f32", "i16"], steps=[1, 5]),
        full=dict(dtype=ALL_DTYPES, steps=[1, 2, 5, 17]))
def pointer_walk(ctx, dtype, steps):
    """A pointer carried through a loop and advanced by a runtime stride each iteration."""
    block, programs = 16, 3
    src = ctx.random((steps, programs * block), dtype)
    dst = ctx.output((programs * block,), dtype)
    ctx.launch(pointer_walk_kernel, (programs,), ctx.input(src), dst, steps, programs * block,
               BLOCK=block)
    ctx.check("dst", dst, src.max(axis=0), dtype, EXACT)


@at.jit
def scalar_access_kernel(src, dst, offset):
    pid = tl.program_id(0)
    x = tl.load(src + offset + pid)
    tl.store(dst + pid, x)


@family("memory",
        quick=dict(dtype=["f64", "i64"], offset=[3]),
        full=dict(dtype=ALL_DTYPES, offset=[0, 1, 3]))
def scalar_pointer_access(ctx, dtype, offset):
    """Scalar loads and stores through a pointer moved by an odd (unaligned) element offset."""
    programs = 9
    src = ctx.random((programs + offset,), dtype)
    dst = ctx.output((programs,), dtype)
    ctx.launch(scalar_access_kernel, (programs,), ctx.input(src), dst, offset)
    ctx.check("dst", dst, src[offset:], dtype, EXACT)


@at.jit
def gather_kernel(src, idx, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i = tl.load(idx + offs, mask=mask, other=0)
    tl.store(dst + offs, tl.load(src + i, mask=mask), mask=mask)


@family("memory",
        quick=dict(dtype=["f32"], index_dtype=["i32", "i64"]),
        full=dict(dtype=["f32", "i8", "f16", "u64"], index_dtype=["i32", "i64", "u16"]))
def gather(ctx, dtype, index_dtype):
    """Loads through a tile of data-dependent pointers (indices of several integer types)."""
    n, block = 50, 16
    src = ctx.random((40,), dtype)
    idx = ctx.rng.integers(0, 40, size=n).astype(_np_index(index_dtype))
    dst = ctx.output((n,), dtype)
    ctx.launch(gather_kernel, (cdiv(n, block),), ctx.input(src), ctx.input(idx), dst, n, BLOCK=block)
    ctx.check("dst", dst, src[idx.astype(np.int64)], dtype, EXACT)


def _np_index(name: str) -> str:
    return {"i32": "int32", "i64": "int64", "u16": "uint16"}[name]


@at.jit
def bool_memory_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, b == 0, mask=mask)


@family("memory", quick=dict(n=[45]))
def bool_memory(ctx, n):
    """``i1`` tiles loaded from and stored to boolean arrays (one byte per element)."""
    src = ctx.rng.integers(0, 2, size=n).astype(np.bool_)
    dst = ctx.input(src.copy())  # a bool cannot hold a poison: start from the complement
    ctx.launch(bool_memory_kernel, (cdiv(n, 16),), ctx.input(src), dst, n, BLOCK=16)
    ctx.check("dst", dst, ~src, "i1", EXACT)



@at.jit
def unmasked_kernel(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(src + offs)
    tl.store(dst + offs, x)


@family("memory", quick=dict(n=[5]), full=dict(n=[1, 5, 31]), needs=["bounds_check"])
def out_of_bounds_reported(ctx, n):
    """An unmasked load past the end of an array, and an unmasked store past the end of
    another, launched with ``debug=True``, raise ``OutOfBoundsError`` naming the kernel's
    file and the line of the offending op, where the backend declares ``bounds_check``."""
    block = 32
    short = ctx.input(ctx.random((n,), "f32"))
    _expect_out_of_bounds(ctx, "tl.load", f"loading {block} elements from an array of {n}",
                          short, ctx.output((block,), "f32"), block)
    _expect_out_of_bounds(ctx, "tl.store", f"storing {block} elements into an array of {n}",
                          ctx.input(ctx.random((block,), "f32")), short, block)


def _expect_out_of_bounds(ctx, op_text, what, src, dst, block):
    import linecache
    from anytile.errors import OutOfBoundsError
    from ..case import CaseFailure
    try:
        ctx.launch(unmasked_kernel, (1,), src, dst, BLOCK=block, debug=True)
    except OutOfBoundsError as exc:
        loc = exc.loc
        line = linecache.getline(loc.file, loc.line) if loc is not None else ""
        if loc is None or "memory.py" not in loc.file or op_text not in line:
            raise CaseFailure(f"{what}: OutOfBoundsError does not name the {op_text} line of "
                              f"the kernel's file: {exc}") from None
        return
    raise CaseFailure(f"{what} raised no OutOfBoundsError")
