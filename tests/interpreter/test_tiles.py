"""Shape ops, reductions and scans with combine regions, and dot."""
from __future__ import annotations

import numpy as np
import pytest

from anytile.interpreter import tiles
from anytile.ir import (Block, BroadcastOp, DotOp, ExpandDimsOp, IfOp, PermuteOp, ReduceOp,
                        ReshapeOp, ScanOp, SelectOp)
from anytile.ir.types import TileType, f32, from_numpy, i8, i32
from interp_kit import KernelBuilder, ptr, rng, run


def offsets_2d(kb: KernelBuilder, m: int, n: int):
    """The row-major offsets ``i * n + j`` of an ``m x n`` tile."""
    rows = kb.op(ExpandDimsOp, kb.arange(m), 1).result
    cols = kb.op(ExpandDimsOp, kb.arange(n), 0).result
    rows = kb.binary("mul", rows, kb.op(BroadcastOp, kb.splat(kb.const(n, i32), (1, 1)),
                                        result_types=[TileType((m, 1), i32)]).result)
    shape = TileType((m, n), i32)
    return kb.binary("add", kb.op(BroadcastOp, rows, result_types=[shape]).result,
                     kb.op(BroadcastOp, cols, result_types=[shape]).result)


def load_2d(kb, name, m, n):
    return kb.load(kb.ptrs(kb.arg(name), offsets_2d(kb, m, n)))


def combine_region(kb, elems, fn):
    """A combine block over ``elems`` (lhs..., rhs...) yielding ``fn(kb, lhs, rhs)``."""
    region = Block.with_args(list(elems) * 2)
    n = len(elems)
    with kb.b.at_end_of(region):
        kb.yield_(*fn(kb, region.args[:n], region.args[n:]))
    return region


def reduce_kernel(dtype, shape, axis, fn, n_outputs=1, scan=False, reverse=False):
    """Load an ``m x n`` tile ``x`` (plus its column indices when ``n_outputs == 2``),
    reduce or scan it with ``fn`` and store every result contiguously."""
    elem = from_numpy(dtype)
    m, n = shape
    kb = KernelBuilder([("x", ptr(elem))] + [(f"out{k}", ptr(i32 if k else elem))
                                            for k in range(n_outputs)])
    offs = offsets_2d(kb, m, n)
    srcs = [kb.load(kb.ptrs(kb.arg("x"), offs))]
    if n_outputs == 2:
        col = kb.op(ExpandDimsOp, kb.arange(n), 0).result
        srcs.append(kb.op(BroadcastOp, col, result_types=[TileType(shape, i32)]).result)
    region = combine_region(kb, [elem, i32][:n_outputs], fn)
    if scan:
        op = kb.op(ScanOp, srcs, axis, reverse, region)
        out_offs = offs
    else:
        op = kb.op(ReduceOp, srcs, axis, region)
        out_offs = kb.arange(shape[1 - axis])
    for k, result in enumerate(op.results):
        kb.store(kb.ptrs(kb.arg(f"out{k}"), out_offs), result)
    return kb.module


def add(kb, lhs, rhs):
    return [kb.binary("add", lhs[0], rhs[0])]


@pytest.mark.parametrize("axis", [0, 1])
def test_integer_sum_wraps_exactly(axis):
    x = rng(1).integers(-2**31, 2**31, (8, 32), dtype=np.int64).astype(np.int32)
    out = np.full(x.shape[1 - axis], 7, np.int32)
    run(reduce_kernel(np.int32, x.shape, axis, add), 1, x, out)
    expected = [(int(v) + 2**31) % 2**32 - 2**31 for v in x.astype(np.int64).sum(axis)]
    assert out.tolist() == expected


def test_float_sum_is_close_to_float64():
    x = rng(2).standard_normal((4, 128)).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    run(reduce_kernel(np.float32, x.shape, 1, add), 1, x, out)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


def test_max_reduce():
    x = rng(3).standard_normal((16, 8)).astype(np.float32)
    out = np.full(8, np.nan, np.float32)
    run(reduce_kernel(np.float32, x.shape, 0, lambda kb, l, r: [kb.binary("max", l[0], r[0])]),
        1, x, out)
    assert np.array_equal(out, x.max(0))


def argmax_combine(kb, lhs, rhs):
    (lv, li), (rv, ri) = lhs, rhs
    right_wins = kb.binary("or", kb.compare("gt", rv, lv),
                           kb.binary("and", kb.compare("eq", rv, lv), kb.compare("lt", ri, li)))
    return [kb.op(SelectOp, right_wins, rv, lv).result, kb.op(SelectOp, right_wins, ri, li).result]


def test_argmax_with_two_value_combine_takes_first_of_ties():
    x = rng(4).integers(0, 6, (8, 64)).astype(np.int32)     # many ties
    values, index = np.full(8, -1, np.int32), np.full(8, -1, np.int32)
    run(reduce_kernel(np.int32, x.shape, 1, argmax_combine, n_outputs=2), 1, x, values, index)
    assert np.array_equal(index, x.argmax(1))
    assert np.array_equal(values, x.max(1))


@pytest.mark.parametrize("axis,reverse", [(1, False), (0, False), (1, True)])
def test_cumulative_sum_scan(axis, reverse):
    x = rng(5).integers(-1000, 1000, (8, 16)).astype(np.int32)
    out = np.full(x.shape, -7, np.int32)
    run(reduce_kernel(np.int32, x.shape, axis, add, scan=True, reverse=reverse), 1, x, out)
    flipped = np.flip(x, axis) if reverse else x
    expected = np.cumsum(flipped, axis)
    assert np.array_equal(out, np.flip(expected, axis) if reverse else expected)


def test_non_commutative_combines_see_index_order():
    x = rng(6).integers(-50, 50, (4, 16)).astype(np.int32)
    first = lambda kb, l, r: [l[0]]                         # noqa: E731
    last = lambda kb, l, r: [r[0]]                          # noqa: E731
    out = np.zeros(4, np.int32)
    run(reduce_kernel(np.int32, x.shape, 1, first), 1, x, out)
    assert np.array_equal(out, x[:, 0])
    run(reduce_kernel(np.int32, x.shape, 1, last), 1, x, out)
    assert np.array_equal(out, x[:, -1])
    scanned = np.zeros_like(x)
    run(reduce_kernel(np.int32, x.shape, 1, first, scan=True), 1, x, scanned)
    assert np.array_equal(scanned, np.repeat(x[:, :1], 16, 1))
    run(reduce_kernel(np.int32, x.shape, 1, first, scan=True, reverse=True), 1, x, scanned)
    assert np.array_equal(scanned, np.repeat(x[:, -1:], 16, 1))   # reverse: left = later


def test_combine_with_control_flow_runs_element_by_element():
    def max_by_if(kb, lhs, rhs):
        then_body, else_body = Block(), Block()
        op = kb.op(IfOp, kb.compare("gt", lhs[0], rhs[0]), then_body, else_body,
                   result_types=[lhs[0].type])
        with kb.b.at_end_of(then_body):
            kb.yield_(lhs[0])
        with kb.b.at_end_of(else_body):
            kb.yield_(rhs[0])
        return [op.result]

    x = rng(7).integers(-100, 100, (4, 8)).astype(np.int32)
    out = np.zeros(4, np.int32)
    run(reduce_kernel(np.int32, x.shape, 1, max_by_if), 1, x, out)
    assert np.array_equal(out, x.max(1))
    scanned = np.zeros_like(x)
    run(reduce_kernel(np.int32, x.shape, 1, max_by_if, scan=True), 1, x, scanned)
    assert np.array_equal(scanned, np.maximum.accumulate(x, 1))


@pytest.mark.parametrize("n", [1, 5, 7, 12])
def test_tree_algorithms_handle_any_length_with_an_affine_combine(n):
    # (a, b) stands for x -> a*x + b; composing maps is associative but not commutative
    def compose(lhs, rhs):
        (a1, b1), (a2, b2) = lhs, rhs
        return [a1 * a2, b1 * a2 + b2]

    a = rng(8).integers(-3, 4, (3, n)).astype(np.int64)
    b = rng(9).integers(-3, 4, (3, n)).astype(np.int64)
    expected_a, expected_b = [], []
    for row_a, row_b in zip(a, b):
        acc = (1, 0)
        for x, y in zip(row_a, row_b):
            acc = (acc[0] * x, acc[1] * x + y)
        expected_a.append(acc[0])
        expected_b.append(acc[1])
    with np.errstate(all="ignore"):
        for algorithm in (tiles.tree_reduce, tiles.sequential_reduce):
            got = algorithm([a, b], 1, compose)
            assert got[0].tolist() == expected_a and got[1].tolist() == expected_b
        tree = tiles.tree_scan([a, b], 1, False, compose)
        seq = tiles.sequential_scan([a, b], 1, False, compose)
        assert np.array_equal(tree[0], seq[0]) and np.array_equal(tree[1], seq[1])
        assert tree[1][:, -1].tolist() == expected_b


# -- shapes and dot ----------------------------------------------------------------------------
def test_shape_ops_follow_row_major_order():
    kb = KernelBuilder([("x", ptr(i32)), ("out", ptr(i32))])
    tile = load_2d(kb, "x", 4, 8)
    flat = kb.op(ReshapeOp, tile, result_types=[TileType((2, 16), i32)]).result
    back = kb.op(ReshapeOp, flat, result_types=[TileType((4, 8), i32)]).result
    transposed = kb.op(PermuteOp, back, (1, 0)).result            # 8 x 4
    kb.store(kb.ptrs(kb.arg("out"), offsets_2d(kb, 8, 4)), transposed)
    x = rng(10).integers(-99, 99, (4, 8)).astype(np.int32)
    out = np.zeros((8, 4), np.int32)
    run(kb.module, 1, x, out)
    assert np.array_equal(out, x.T)


def dot_kernel(a_elem, acc_elem, m, k, n):
    kb = KernelBuilder([("a", ptr(a_elem)), ("b", ptr(a_elem)), ("c", ptr(acc_elem)),
                        ("out", ptr(acc_elem))])
    a, b, c = load_2d(kb, "a", m, k), load_2d(kb, "b", k, n), load_2d(kb, "c", m, n)
    kb.store(kb.ptrs(kb.arg("out"), offsets_2d(kb, m, n)), kb.op(DotOp, a, b, c).result)
    return kb.module


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_float_dot_sums_in_f64_and_rounds_once(dtype):
    a = rng(11).standard_normal((16, 32)).astype(dtype)
    b = rng(12).standard_normal((32, 8)).astype(dtype)
    c = rng(13).standard_normal((16, 8)).astype(np.float32)
    out = np.full((16, 8), np.nan, np.float32)
    run(dot_kernel(from_numpy(dtype), f32, 16, 32, 8), 1, a, b, c, out)
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    assert np.array_equal(out, exact.astype(np.float32))


def test_int8_dot_accumulates_exactly_and_wraps_in_int32():
    a = rng(14).integers(-128, 128, (16, 64)).astype(np.int8)
    b = rng(15).integers(-128, 128, (64, 16)).astype(np.int8)
    c = np.full((16, 16), 2**31 - 100, np.int32)
    out = np.zeros((16, 16), np.int32)
    run(dot_kernel(i8, i32, 16, 64, 16), 1, a, b, c, out)
    exact = a.astype(np.int64) @ b.astype(np.int64) + c.astype(np.int64)
    assert out.tolist() == [[(int(v) + 2**31) % 2**32 - 2**31 for v in row] for row in exact]
