"""The layout math of ``anytile.codegen.gpu.layouts`` (pure Python, no LLVM)."""
import itertools

import pytest

from anytile.codegen.gpu.axis_info import AxisInfo, vector_width_of_access
from anytile.codegen.gpu.layouts import (BlockedLayout, SliceLayout, coordinates, default_blocked,
                                         element_owners, register_count)


def all_elements(shape):
    return set(itertools.product(*(range(s) for s in shape)))


@pytest.mark.parametrize("shape,num_warps,vector", [
    ((1024,), 4, 4), ((16,), 4, 1), ((64, 64), 4, 4), ((16, 32), 4, 1), ((2, 2), 8, 1),
    ((128, 16), 2, 8), ((1, 256), 4, 4), ((8, 1), 4, 1)])
def test_default_blocked_covers_every_element(shape, num_warps, vector):
    layout = default_blocked(shape, num_warps, 32, vector)
    assert layout.num_warps == num_warps and layout.warp_size == 32
    owners = element_owners(layout, shape)
    assert set(owners) == all_elements(shape)
    threads = num_warps * 32
    numel = 1
    for s in shape:
        numel *= s
    if numel >= threads * layout.size_per_thread[-1]:  # big enough: no replication at all
        assert all(len(v) == 1 for v in owners.values())


def test_vector_layout_gives_each_thread_consecutive_runs():
    layout = default_blocked((1024,), 4, 32, 4)
    assert layout.size_per_thread == (4,)
    assert coordinates(layout, (1024,), lane=1, warp=0)[:4] == [(4,), (5,), (6,), (7,)]
    # the second repetition starts one whole program-tile later
    assert coordinates(layout, (1024,), lane=0, warp=0)[4] == (512,)


def test_slice_layout_holds_each_row_result_in_every_thread_of_the_row():
    parent = BlockedLayout((1, 4), (4, 8), (2, 2), (1, 0))
    shape = (16, 64)
    sliced = SliceLayout(parent, 1)
    # the parent over a 16x1 tile repeats the element along dim 1; the slice does not
    assert register_count(sliced, (16,)) * 4 == register_count(parent, (16, 1))
    for warp in range(4):
        for lane in range(32):
            rows_parent = {c[0] for c in coordinates(parent, shape, lane, warp)}
            rows_slice = {c[0] for c in coordinates(sliced, (16,), lane, warp)}
            assert rows_parent == rows_slice


def test_permuted_layout_is_the_transpose():
    layout = BlockedLayout((1, 4), (4, 8), (4, 1), (1, 0))
    shape = (16, 32)
    transposed = layout.permuted((1, 0))
    for lane, warp in [(0, 0), (5, 1), (31, 3)]:
        original = coordinates(layout, shape, lane, warp)
        swapped = coordinates(transposed, (32, 16), lane, warp)
        assert sorted((c[1], c[0]) for c in original) == sorted(swapped)


def test_vector_width_needs_contiguity_alignment_and_uniform_mask():
    aligned = AxisInfo((1024,), (4096,), (1,))
    assert vector_width_of_access(aligned, None, 4) == 4
    assert vector_width_of_access(aligned, None, 2) == 8
    assert vector_width_of_access(AxisInfo((1024,), (4,), (1,)), None, 4) == 1
    assert vector_width_of_access(AxisInfo((2,), (4096,), (1,)), None, 4) == 2
    assert vector_width_of_access(aligned, AxisInfo((1,), (1,), (1,)), 4) == 1
    assert vector_width_of_access(aligned, AxisInfo((1,), (1,), (16,)), 4) == 4
