"""Loads of loops that ask for ``num_stages`` (``tl.range(..., num_stages=N)``) staged in shared
memory N - 1 iterations ahead, stores in the loop or not (``pipeline.py``): what is staged,
what is not, and the results on the host simulator (tails, masks, several rows a program,
programs with no row at all)."""
from __future__ import annotations

import copy
import re

import numpy as np
import pytest

import anytile as at
from anytile.codegen.gpu.pipeline import pipeline_loops
from anytile.codegen.gpu.pointer_roots import PointerRoots
from anytile.codegen.gpu.simulator import simulate_kernel
from anytile.ir import ops
from anytile.ir.nodes import walk
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import verify_module

from gpu_kit import ir
from kernels_for_staging import block_rows_shift, in_place_row_scale, strided_row_softmax

ASYNC_SIZES = (4, 8, 16)


def compiled(fn, signature, constexprs, num_warps=4):
    return at.compile(fn, target="nvidia:sm_80", signature=signature, constexprs=constexprs,
                      num_warps=num_warps, num_stages=3)


def poisoned(shape):
    return np.full(shape, np.nan, np.float32)


def softmax_of(x):
    w = x.astype(np.float64)
    e = np.exp(w - w.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax_signature(aligned: bool) -> dict:
    ints = "i32:16" if aligned else "i32"
    return {"out_ptr": "*fp32:16", "src_ptr": "*fp32:16", "src_stride": ints, "out_stride": ints,
            "n_rows": "i32", "n_cols": ints}


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("rows,cols,block,programs,aligned", [
    (37, 781, 1024, 8, False),     # ragged rows: 4-byte copies, masked tails
    (21, 256, 256, 4, True),       # 16-byte copies, several rows a program
    (3, 64, 64, 8, True),          # programs with no row: every copy masked off
])
def test_row_softmax_staged_through_shared_slots(rng, stages, rows, cols, block, programs, aligned):
    """The row load moves to ``stages - 1`` shared slots (the store writes another parameter);
    the softmax is right on every row, and the columns past ``n_cols`` are left alone."""
    c = compiled(strided_row_softmax, _softmax_signature(aligned),
                 {"BLOCK": block, "STAGES": stages})
    assert c.metadata["prefetched_loads"] == 1
    laid = c.asm["laid-out ir"]
    assert re.search(rf"shared_alloc : shared<{stages - 1}x{block}xf32", laid)
    assert "shared_read" in laid and "= load" not in laid
    pad = 16 if aligned else 19
    src = rng.standard_normal((rows, cols + pad)).astype(np.float32)
    out = poisoned((rows, cols + pad))
    simulate_kernel(c.module, (programs,), [out, src, cols + pad, cols + pad, rows, cols])
    np.testing.assert_allclose(out[:, :cols], softmax_of(src[:, :cols]), rtol=1e-5, atol=1e-7)
    assert np.isnan(out[:, cols:]).all()


def test_tutorial_shaped_softmax_copies_rows_asynchronously():
    """4096 floats a row, four stages, eight warps (the tutorial's H200 launch): three 16 KiB
    slots (what the launch's occupancy arithmetic reads from ``metadata.shared``), four 16-byte
    asynchronous copies a thread a row, the slot read back in 16-byte vectors."""
    c = at.compile(strided_row_softmax, target="nvidia:sm_80", signature=_softmax_signature(True),
                   constexprs={"BLOCK": 4096, "STAGES": 4}, num_warps=8, num_stages=4)
    ptx = c.asm["ptx"]
    assert len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 16", ptx)) == 4 * 4
    assert len(re.findall(r"ld\.shared\.v4\.(?:b32|f32)", ptx)) >= 4
    assert 3 * 16384 <= c.metadata["shared"] < 3 * 16384 + 1024
    assert "ld.global" not in ptx.split("cp.async.commit_group")[-1].split("st.global")[0]


def test_loads_through_a_stored_parameter_stay():
    """The loop writes through the parameter it reads: a copy made iterations ahead could
    miss a write, so nothing moves (and the rows come out right)."""
    c = compiled(in_place_row_scale, {"x_ptr": "*fp32:16", "stride": "i32:16", "n_rows": "i32",
                                      "n_cols": "i32:16"}, {"BLOCK": 64, "STAGES": 3})
    assert c.metadata["prefetched_loads"] == 0
    assert "shared_alloc" not in c.asm["laid-out ir"]
    x = np.random.default_rng(5).standard_normal((9, 64)).astype(np.float32)
    expected = x * 0.5
    simulate_kernel(c.module, (4,), [x, 64, 9, 64])
    np.testing.assert_array_equal(x, expected)


@pytest.mark.parametrize("stages", [2, 3])
def test_two_dimensional_tiles_through_an_advanced_pointer_tile(rng, stages):
    """A 2-D tile read through a carried pointer tile (``ptrs += step``) and a row vector
    through pointers computed from the induction variable both move; blocks ragged on both
    edges, several a program."""
    sig = {"out_ptr": "*fp32:16", "src_ptr": "*fp32:16", "shift_ptr": "*fp32:16", "M": "i32",
           "N": "i32", "stride": "i32"}
    c = compiled(block_rows_shift, sig, {"BM": 8, "BN": 64, "STAGES": stages})
    assert c.metadata["prefetched_loads"] == 2
    M, N, stride = 45, 50, 53
    src = rng.standard_normal((M, stride)).astype(np.float32)
    shift = rng.standard_normal(M).astype(np.float32)
    out = poisoned((M, N))
    simulate_kernel(c.module, (2,), [out, src, shift, M, N, stride])
    np.testing.assert_allclose(out, src[:, :N] - shift[:, None], rtol=0, atol=0)


def test_narrow_copies_the_target_lacks_stay():
    """2-byte elements at addresses proven no wider than one element: no asynchronous copy
    moves 2 bytes, so the load stays; a target without asynchronous copies stages nothing."""
    sig = {"out_ptr": "*fp16", "src_ptr": "*fp16", "src_stride": "i32", "out_stride": "i32",
           "n_rows": "i32", "n_cols": "i32"}
    c = compiled(strided_row_softmax, sig, {"BLOCK": 128, "STAGES": 3})
    assert c.metadata["prefetched_loads"] == 0
    plain = compiled(strided_row_softmax, _softmax_signature(True), {"BLOCK": 128, "STAGES": 3})
    module = copy.deepcopy(plain.module)
    assert pipeline_loops(module.kernel, 1 << 16, (), 128) == 0
    assert pipeline_loops(copy.deepcopy(plain.module).kernel, 1 << 16, ASYNC_SIZES, 128) == 1


def test_slots_shrink_to_fit_shared_memory():
    """16 KiB slots, 16 KiB kept for the scratch space (the row, were it to change layouts): a
    limit of 48 KiB holds two of the three slots four stages ask for; 31 KiB not even one (the
    loop then stays as it was)."""
    c = compiled(strided_row_softmax, _softmax_signature(True), {"BLOCK": 4096, "STAGES": 4},
                 num_warps=8)
    module = copy.deepcopy(c.module)
    assert pipeline_loops(module.kernel, 48 * 1024, ASYNC_SIZES, 256) == 1
    assert re.findall(r"shared<(\d)x4096xf32", str(module)) == ["2"]
    verify_module(module)
    text = print_module(module)
    assert "shared_read" in text
    assert print_module(parse_module(text)) == text       # the staged loop's text round-trips
    module = copy.deepcopy(c.module)
    assert pipeline_loops(module.kernel, 31 * 1024, ASYNC_SIZES, 256) == 0
    assert "shared_alloc" not in str(module)


ROOTS = """
    kernel @k(%a: ptr<f32>, %b: ptr<f32>, %table: ptr<i64>, %n: i32) {
      %0 = constant {value = 0} : i32
      %1 = constant {value = 1} : i32
      %offs = arange {start = 0, end = 16} : tile<16xi32>
      %2 = addptr (%a, %n) : ptr<f32>
      %3 = splat (%2) : tile<16xptr<f32>>
      %4 = addptr (%3, %offs) : tile<16xptr<f32>>
      %5 = compare {pred = "lt"} (%n, %1) : i1
      %6 = select (%5, %a, %b) : ptr<f32>
      %7 = load (%table, none, none) : i64
      %8 = cast (%7) : ptr<f32>
      %p = for (%0, %n, %1, [%4]) : tile<16xptr<f32>> {
      ^(%i: i32, %q: tile<16xptr<f32>>):
        %9 = addptr (%q, %offs) : tile<16xptr<f32>>
        yield ([%9])
      }
    }
"""


def test_pointer_roots_follow_offsets_selects_and_carried_values():
    module = parse_module(ir(ROOTS))
    fn = module.kernel
    a, b = fn.body.args[:2]
    roots = PointerRoots(fn)
    by_name = {r.name: r for op in walk(fn.body) for r in op.results}
    select = next(op for op in walk(fn.body) if isinstance(op, ops.SelectOp))
    cast = next(op for op in walk(fn.body) if isinstance(op, ops.CastOp))
    loop = next(op for op in walk(fn.body) if isinstance(op, ops.ForOp))
    assert roots.of(by_name["p"]) == {a}
    assert roots.of(loop.body.args[1]) == {a}
    assert roots.of(select.result) == {a, b}
    assert roots.of(cast.result) is None           # an integer loaded from memory
