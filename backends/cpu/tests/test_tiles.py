"""Tile-shaped ops on the cpu backend: masked memory at odd sizes, 2-D tiles and shape ops,
reductions and scans along every axis (simple and general combine regions)."""
import numpy as np
import pytest

from anytile.ir import (BroadcastOp, ExpandDimsOp, PermuteOp, ReshapeOp, SelectOp)
from anytile.ir.types import TileType, f32, i1, i32, f64

from cpu_kit import KernelBuilder, poisoned, ptr, run_both, run_cpu


@pytest.mark.parametrize("n", [1, 7, 33, 100, 1000])
def test_masked_copy_at_unaligned_sizes_never_touches_masked_lanes(rng, n):
    """out[i] = x[i] + 1 for i < n; the elements after ``n`` keep their poison."""
    block = 128
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(f32)), ("n", i32)])
    base = kb.binary("mul", kb.pid(0), kb.const(block, i32))
    offs = kb.binary("add", kb.splat(base, (block,)), kb.arange(block))
    mask = kb.compare("lt", offs, kb.splat(kb.arg("n"), (block,)))
    x = kb.load(kb.ptrs(kb.arg("x"), offs), mask, kb.splat(kb.const(-5.0, f32), (block,)))
    kb.store(kb.ptrs(kb.arg("out"), offs), kb.binary("add", x, kb.splat(kb.const(1.0, f32), (block,))), mask)
    x = rng.standard_normal(n + 50).astype(np.float32)
    out = poisoned(n + 50, np.float32)
    run_cpu(kb.module, (n + block - 1) // block, x, out, n)
    np.testing.assert_array_equal(out[:n], x[:n] + np.float32(1))
    assert np.isnan(out[n:]).all()


def _load_2d(kb, name, rows, cols, elem=f32):
    offs = kb.offsets_2d(rows, cols, kb.const(cols, i32))
    return kb.load(kb.ptrs(kb.arg(name), offs)), offs


@pytest.mark.parametrize("rows,cols", [(4, 32), (16, 8), (8, 1), (1, 64), (32, 16)])
def test_shape_ops_match_interpreter(rng, rows, cols):
    """transpose (permute), reshape, broadcast of a column and expand_dims, fused into
    arithmetic and stored."""
    kb = KernelBuilder([("x", ptr(f32)), ("t", ptr(f32)), ("r", ptr(f32)), ("b", ptr(f32))])
    x, offs = _load_2d(kb, "x", rows, cols)
    xt = kb.v(PermuteOp, x, (1, 0))
    t_offs = kb.offsets_2d(cols, rows, kb.const(rows, i32))
    kb.store(kb.ptrs(kb.arg("t"), t_offs), kb.binary("mul", xt, xt))
    flat = kb.v(ReshapeOp, x, result_types=[TileType((rows * cols,), f32)])
    kb.store(kb.ptrs(kb.arg("r"), kb.arange(rows * cols)), kb.unary("neg", flat))
    first_col = kb.reduce([x], 1, lambda a, b: [kb.binary("max", a, b)])[0]
    col = kb.v(ExpandDimsOp, first_col, 1)
    wide = kb.v(BroadcastOp, col, result_types=[TileType((rows, cols), f32)])
    kb.store(kb.ptrs(kb.arg("b"), offs), kb.binary("sub", x, wide))
    x_np = rng.standard_normal((rows, cols)).astype(np.float32)
    outs = [poisoned((cols, rows), np.float32), poisoned(rows * cols, np.float32),
            poisoned((rows, cols), np.float32)]
    mine, ref = run_both(kb.module, 1, x_np, *outs)
    for m, r in zip(mine[1:], ref[1:]):
        np.testing.assert_array_equal(m, r)
    np.testing.assert_array_equal(mine[1], (x_np * x_np).T)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind", ["add", "max", "min", "mul"])
def test_reduce_2d_simple_combines(rng, axis, kind):
    rows, cols = 16, 64
    kb = KernelBuilder([("x", ptr(f64)), ("out", ptr(f64))])
    offs = kb.offsets_2d(rows, cols, kb.const(cols, i32))
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    r = kb.reduce([x], axis, lambda a, b: [kb.binary(kind, a, b)])[0]
    n_out = cols if axis == 0 else rows
    kb.store(kb.ptrs(kb.arg("out"), kb.arange(n_out)), r)
    x_np = rng.uniform(0.5, 1.5, (rows, cols))
    out = poisoned(n_out, np.float64)
    run_cpu(kb.module, 1, x_np, out)
    want = {"add": np.sum, "max": np.max, "min": np.min, "mul": np.prod}[kind](x_np, axis=axis)
    np.testing.assert_allclose(out, want, rtol=1e-12)


@pytest.mark.parametrize("axis", [0, 1])
def test_argmax_two_value_combine_in_index_order(rng, axis):
    """A general (two-source, compare+select) combine: first index of the maximum."""
    rows, cols = 8, 32
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(i32))])
    offs = kb.offsets_2d(rows, cols, kb.const(cols, i32))
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    index = kb.v(BroadcastOp, kb.v(ExpandDimsOp, kb.arange(rows if axis == 0 else cols), 1 - axis),
                 result_types=[TileType((rows, cols), i32)])

    def combine(va, ia, vb, ib):
        take_b = kb.binary("or", kb.compare("gt", vb, va),
                           kb.binary("and", kb.compare("eq", vb, va), kb.compare("lt", ib, ia)))
        return [kb.v(SelectOp, take_b, vb, va), kb.v(SelectOp, take_b, ib, ia)]
    _, idx = kb.reduce([x, index], axis, combine)
    n_out = cols if axis == 0 else rows
    kb.store(kb.ptrs(kb.arg("out"), kb.arange(n_out)), idx)
    x_np = rng.integers(0, 5, (rows, cols)).astype(np.float32)   # many ties
    out = poisoned(n_out, np.int32)
    run_cpu(kb.module, 1, x_np, out)
    np.testing.assert_array_equal(out, np.argmax(x_np, axis=axis))


def test_reduce_1d_to_scalar_feeds_scalar_code(rng):
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(f32))])
    x = kb.load(kb.ptrs(kb.arg("x"), kb.arange(1024)))
    s = kb.reduce([x], 0, lambda a, b: [kb.binary("add", a, b)])[0]
    m = kb.reduce([x], 0, lambda a, b: [kb.binary("max", a, b)])[0]
    kb.store(kb.arg("out"), kb.binary("fdiv", s, m))
    x_np = rng.uniform(1, 2, 1024).astype(np.float32)
    out = poisoned(1, np.float32)
    run_cpu(kb.module, 1, x_np, out)
    np.testing.assert_allclose(out[0], x_np.astype(np.float64).sum() / x_np.max(), rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_interpreter(rng, axis, reverse):
    rows, cols = 8, 16
    kb = KernelBuilder([("x", ptr(i32)), ("s", ptr(i32)), ("d", ptr(i32))])
    offs = kb.offsets_2d(rows, cols, kb.const(cols, i32))
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    s = kb.reduce([x], axis, lambda a, b: [kb.binary("add", a, b)], scan=True, reverse=reverse)[0]
    # associative, non-commutative combine ("the last non-zero"): catches operand order
    d = kb.reduce([x], axis, lambda a, b: [kb.v(SelectOp, kb.compare("ne", b, kb.const(0, i32)), b, a)],
                  scan=True, reverse=reverse)[0]
    kb.store(kb.ptrs(kb.arg("s"), offs), s)
    kb.store(kb.ptrs(kb.arg("d"), offs), d)
    x_np = rng.integers(-50, 50, (rows, cols)).astype(np.int32)
    x_np[rng.random((rows, cols)) < 0.5] = 0
    outs = [poisoned((rows, cols), np.int32) for _ in range(2)]
    mine, ref = run_both(kb.module, 1, x_np, *outs)
    np.testing.assert_array_equal(mine[1], ref[1])
    np.testing.assert_array_equal(mine[2], ref[2])
    want = np.flip(np.cumsum(np.flip(x_np, axis), axis), axis) if reverse else np.cumsum(x_np, axis)
    np.testing.assert_array_equal(mine[1], want)


def test_many_programs_spread_over_threads(rng):
    """A 3-D grid of programs, each writing its own linear id and grid size."""
    kb = KernelBuilder([("out", ptr(i32))])
    from anytile.ir import NumProgramsOp
    x, y, z = kb.pid(0), kb.pid(1), kb.pid(2)
    nx, ny = kb.v(NumProgramsOp, 0), kb.v(NumProgramsOp, 1)
    linear = kb.binary("add", x, kb.binary("mul", nx, kb.binary("add", y, kb.binary("mul", ny, z))))
    kb.store(kb.ptrs(kb.arg("out"), kb.binary("add", kb.splat(kb.binary("mul", linear, kb.const(2, i32)), (2,)),
                                              kb.arange(2))),
             kb.binary("add", kb.splat(linear, (2,)), kb.arange(2)))
    grid = (13, 5, 3)
    out = poisoned(2 * 13 * 5 * 3, np.int32)
    run_cpu(kb.module, grid, out)
    ids = np.arange(13 * 5 * 3)
    np.testing.assert_array_equal(out[0::2], ids)
    np.testing.assert_array_equal(out[1::2], ids + 1)


def test_bool_tiles_in_memory(rng):
    kb = KernelBuilder([("x", ptr(i1)), ("y", ptr(f32)), ("out", ptr(i1))])
    offs = kb.arange(64)
    m = kb.load(kb.ptrs(kb.arg("x"), offs))
    y = kb.load(kb.ptrs(kb.arg("y"), offs))
    both = kb.binary("xor", m, kb.compare("gt", y, kb.splat(kb.const(0.0, f32), (64,))))
    kb.store(kb.ptrs(kb.arg("out"), offs), both)
    x_np = rng.integers(0, 2, 64).astype(bool)
    y_np = rng.standard_normal(64).astype(np.float32)
    out = np.zeros(64, bool)
    run_cpu(kb.module, 1, x_np, y_np, out)
    np.testing.assert_array_equal(out, x_np ^ (y_np > 0))


def test_pointer_casts_and_compares(rng):
    """ptr -> i64 (a bitcast: ``cast`` converts numbers only) gives the byte address;
    pointers compare as addresses."""
    from anytile.ir import BitcastOp
    from anytile.ir.types import i64
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(i64)), ("flags", ptr(i1))])
    offs = kb.arange(32)
    p = kb.ptrs(kb.arg("x"), offs)
    addr = kb.binary("sub", kb.v(BitcastOp, p, result_types=[TileType((32,), i64)]),
                     kb.splat(kb.v(BitcastOp, kb.arg("x"), result_types=[i64]), (32,)))
    kb.store(kb.ptrs(kb.arg("out"), offs), addr)
    limit = kb.ptrs(kb.arg("x"), kb.splat(kb.const(10, i32), (32,)))
    kb.store(kb.ptrs(kb.arg("flags"), offs), kb.compare("lt", p, limit))
    x = np.zeros(32, np.float32)
    out = poisoned(32, np.int64)
    flags = np.zeros(32, bool)
    run_cpu(kb.module, 1, x, out, flags)
    np.testing.assert_array_equal(out, np.arange(32) * 4)
    np.testing.assert_array_equal(flags, np.arange(32) < 10)


@pytest.mark.parametrize("shift", [1, -1, 17])
def test_in_place_shift_reads_the_whole_tile_before_writing(rng, shift):
    """x[i + shift] = x[i] * 2 within one tile: every element is read before any is written."""
    n, pad = 256, 32
    kb = KernelBuilder([("x", ptr(f32))])
    offs = kb.binary("add", kb.arange(n), kb.splat(kb.const(pad, i32), (n,)))
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    dst = kb.binary("add", offs, kb.splat(kb.const(shift, i32), (n,)))
    kb.store(kb.ptrs(kb.arg("x"), dst), kb.binary("mul", x, kb.splat(kb.const(2.0, f32), (n,))))
    data = rng.standard_normal(n + 2 * pad).astype(np.float32)
    want = data.copy()
    want[pad + shift:pad + shift + n] = data[pad:pad + n] * 2
    run_cpu(kb.module, 1, data, )
    np.testing.assert_array_equal(data, want)


def test_big_tiles_run_on_worker_stacks(rng):
    """A 1024x1024 f32 tile (4 MiB of stack buffer) runs off the caller's stack."""
    rows = cols = 1024
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(f32))])
    offs = kb.offsets_2d(rows, cols, kb.const(cols, i32))
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    kb.store(kb.ptrs(kb.arg("out"), offs), kb.binary("add", kb.binary("mul", x, x), x))
    x_np = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poisoned((rows, cols), np.float32)
    compiled = run_cpu(kb.module, 1, x_np, out)
    assert compiled.metadata["stack_bytes"] >= rows * cols * 4
    np.testing.assert_array_equal(out, x_np * x_np + x_np)
