"""Program ids and grids (every program of a 1-3 axis grid runs exactly once and sees its
ids; callable grids), and constexpr specialisation (one kernel compiled for several constant
values, integer arguments equal to 1 or multiples of 16, defaults, dtype constants)."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from ..case import family
from ..tolerances import EXACT
from .common import cdiv


@at.jit
def ids_kernel(out_ptr):
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    p2 = tl.program_id(2)
    n0 = tl.num_programs(0)
    n1 = tl.num_programs(1)
    n2 = tl.num_programs(2)
    linear = p0 + n0 * (p1 + n1 * p2)
    base = out_ptr + linear * 6
    tl.store(base, p0)
    tl.store(base + 1, p1)
    tl.store(base + 2, p2)
    tl.store(base + 3, n0)
    tl.store(base + 4, n1)
    tl.store(base + 5, n2)


GRIDS = [(1,), (7,), (3, 5), (2, 3, 4), (1, 1, 5), (4, 1, 2), (33, 2), (5, 2, 7)]


@family("programs", quick=dict(grid=GRIDS[:5]), full=dict(grid=GRIDS + [(1000,), (2, 300)]))
def program_ids(ctx, grid):
    """Each program of the grid writes its ids and the grid's size: all must be written once."""
    full = tuple(grid) + (1,) * (3 - len(grid))
    count = full[0] * full[1] * full[2]
    out = ctx.output((count, 6), "i32")
    ctx.launch(ids_kernel, grid, out)
    p2, p1, p0 = np.meshgrid(np.arange(full[2]), np.arange(full[1]), np.arange(full[0]), indexing="ij")
    expected = np.stack([p0.ravel(), p1.ravel(), p2.ravel()] +
                        [np.full(count, g) for g in full], axis=1)
    ctx.check("ids", out, expected, "i32", EXACT)


@at.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


@family("programs", quick=dict(block=[32]), full=dict(block=[16, 32, 128]))
def callable_grid(ctx, block):
    """A grid given as ``lambda meta: ...`` sees the launch's constexprs."""
    n = 100
    x = ctx.random((n,), "i32", -1000, 1000)
    out = ctx.output((n,), "i32")
    ctx.launch(scale_kernel, lambda meta: (cdiv(n, meta["BLOCK"]),), ctx.input(x), out, n, 3,
               BLOCK=block)
    ctx.check("x * 3", out, x * 3, "i32", EXACT)


@family("constexpr", quick=dict(sizes=[(16, 17, 1, 32)]), full=dict(sizes=[(16, 17, 1, 32), (1, 2, 48, 3)]))
def integer_specialisation(ctx, sizes):
    """One kernel launched with sizes that are 1, multiples of 16 and neither: each launch must
    use code valid for its own arguments (a cache keyed wrongly reuses the wrong one)."""
    for i, n in enumerate(sizes):
        x = ctx.random((n,), "i32", -1000, 1000)
        out = ctx.output((n,), "i32")
        factor = [1, 16, 7, 3][i % 4]
        ctx.launch(scale_kernel, (cdiv(n, 16),), ctx.input(x), out, n, factor, BLOCK=16)
        ctx.check(f"launch {i} (n={n}, factor={factor})", out, x * factor, "i32", EXACT)


@at.jit
def flags_kernel(x_ptr, out_ptr, SCALE: tl.constexpr, NEGATE: tl.constexpr,
                 OUT: tl.constexpr, BLOCK: tl.constexpr, OFFSET: tl.constexpr = 5):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs) * SCALE + OFFSET
    if NEGATE:
        x = -x
    tl.store(out_ptr + offs, x.to(OUT))


@family("constexpr", quick=dict(scale=[2, 3]), full=dict(scale=[1, 2, 3, 16]))
def constexpr_values(ctx, scale):
    """Constexpr ints, bools and dtypes, and a constexpr default, each combination compiled
    separately; launching them in turn must not mix them up."""
    block = 16
    x = ctx.random((block,), "i32", -100, 100)
    for negate in (False, True):
        for out_dtype, np_type in (("i32", np.int32), ("f32", np.float32)):
            out = ctx.output((block,), out_dtype)
            ctx.launch(flags_kernel, (1,), ctx.input(x), out, SCALE=scale, NEGATE=negate,
                       OUT=ctx.tl_dtype(out_dtype), BLOCK=block)
            expected = (x.astype(np.int64) * scale + 5) * (-1 if negate else 1)
            ctx.check(f"SCALE={scale} NEGATE={negate} OUT={out_dtype}", out,
                      expected.astype(np_type), out_dtype, EXACT)
    out = ctx.output((block,), "i32")
    ctx.launch(flags_kernel, (1,), ctx.input(x), out, SCALE=scale, NEGATE=False,
               OUT=ctx.tl_dtype("i32"), BLOCK=block, OFFSET=-9)
    ctx.check("OFFSET=-9 overrides the default", out, x * scale - 9, "i32", EXACT)


@at.jit
def block_size_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    total = tl.sum(x, axis=0)
    tl.store(out_ptr + offs, x * BLOCK + total, mask=mask)


@family("constexpr", quick=dict(blocks=[(1, 8, 64)]), full=dict(blocks=[(1, 8, 64), (2, 4, 256, 1024)]))
def block_sizes(ctx, blocks):
    """The same kernel specialised for several block sizes, including a 1-element block."""
    n = 70
    x = ctx.random((n,), "i32", -100, 100)
    for block in blocks:
        out = ctx.output((n,), "i32")
        ctx.launch(block_size_kernel, (cdiv(n, block),), ctx.input(x), out, n, BLOCK=block)
        padded = np.concatenate([x, np.zeros(cdiv(n, block) * block - n, dtype=np.int32)])
        sums = np.repeat(padded.reshape(-1, block).sum(axis=1), block)[:n]
        ctx.check(f"BLOCK={block}", out, x * block + sums, "i32", EXACT)
