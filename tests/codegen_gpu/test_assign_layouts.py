"""``assign_layouts`` (the ``laid-out ir`` stage of GPU backends) as snapshot pairs: device-
independent IR in, the same IR with a layout on every tile value out."""
from __future__ import annotations

import pytest

from anytile.codegen.gpu import BlockedLayout, assign_layouts
from anytile.codegen.gpu.dot import DotSelector
from anytile.codegen.gpu.simulator import SimulatedGpuTarget

from gpu_kit import MATMUL_LOOP, check


def lay_out(module, target=None, num_warps=4):
    """``assign_layouts`` as a 32-lane target without matrix instructions (or ``target``)
    plans it."""
    target = target or SimulatedGpuTarget(32, ())
    return assign_layouts(module, num_warps, target.warp_size, DotSelector(target, num_warps).plan)

ADD = """
        kernel @add(%x: ptr<f32> {divisibility = 16}, %y: ptr<f32> {divisibility = 16}, %out: ptr<f32> {divisibility = 16}, %n: i32 {divisibility = 16}) {
          %pid = program_id {axis = 0} : i32
          %0 = constant {value = 512} : i32
          %1 = binary {kind = "mul"} (%pid, %0) : i32
          %2 = arange {start = 0, end = 512} : tile<512xi32>
          %3 = splat (%1) : tile<512xi32>
          %offs = binary {kind = "add"} (%3, %2) : tile<512xi32>
          %4 = splat (%n) : tile<512xi32>
          %mask = compare {pred = "lt"} (%offs, %4) : tile<512xi1>
          %5 = splat (%x) : tile<512xptr<f32>>
          %6 = addptr (%5, %offs) : tile<512xptr<f32>>
          %a = load (%6, %mask, none) : tile<512xf32>
          %7 = splat (%y) : tile<512xptr<f32>>
          %8 = addptr (%7, %offs) : tile<512xptr<f32>>
          %b = load (%8, %mask, none) : tile<512xf32>
          %sum = binary {kind = "add"} (%a, %b) : tile<512xf32>
          %9 = splat (%out) : tile<512xptr<f32>>
          %10 = addptr (%9, %offs) : tile<512xptr<f32>>
          store (%10, %sum, %mask)
        }
"""


ADD_LAID_OUT = """
        kernel @add(%x: ptr<f32> {divisibility = 16}, %y: ptr<f32> {divisibility = 16}, %out: ptr<f32> {divisibility = 16}, %n: i32 {divisibility = 16}) {
          %pid = program_id {axis = 0} : i32
          %0 = constant {value = 512} : i32
          %1 = binary {kind = "mul"} (%pid, %0) : i32
          %2 = arange {start = 0, end = 512} : tile<512xi32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %3 = splat (%1) : tile<512xi32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %offs = binary {kind = "add"} (%3, %2) : tile<512xi32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %4 = splat (%n) : tile<512xi32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %mask = compare {pred = "lt"} (%offs, %4) : tile<512xi1, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %5 = splat (%x) : tile<512xptr<f32>, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %6 = addptr (%5, %offs) : tile<512xptr<f32>, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %a = load (%6, %mask, none) : tile<512xf32, #blocked<spt=[4], tpw=[32], wpc=[4], order=[0]>>
          %7 = splat (%y) : tile<512xptr<f32>, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %8 = addptr (%7, %offs) : tile<512xptr<f32>, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %b = load (%8, %mask, none) : tile<512xf32, #blocked<spt=[4], tpw=[32], wpc=[4], order=[0]>>
          %sum = binary {kind = "add"} (%a, %b) : tile<512xf32, #blocked<spt=[4], tpw=[32], wpc=[4], order=[0]>>
          %9 = splat (%out) : tile<512xptr<f32>, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %10 = addptr (%9, %offs) : tile<512xptr<f32>, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          store (%10, %sum, %mask)
        }
"""


ROWS = """
        kernel @row_max(%x: ptr<f32> {divisibility = 16}, %out: ptr<f32> {divisibility = 16}) {
          %r = arange {start = 0, end = 8} : tile<8xi32>
          %c = arange {start = 0, end = 64} : tile<64xi32>
          %0 = expand_dims {axis = 1} (%r) : tile<8x1xi32>
          %1 = constant {value = 64} : tile<8x1xi32>
          %2 = binary {kind = "mul"} (%0, %1) : tile<8x1xi32>
          %3 = expand_dims {axis = 0} (%c) : tile<1x64xi32>
          %4 = broadcast (%2) : tile<8x64xi32>
          %5 = broadcast (%3) : tile<8x64xi32>
          %offs = binary {kind = "add"} (%4, %5) : tile<8x64xi32>
          %6 = splat (%x) : tile<8x64xptr<f32>>
          %7 = addptr (%6, %offs) : tile<8x64xptr<f32>>
          %v = load (%7, none, none) : tile<8x64xf32>
          %m = reduce {axis = 1} ([%v]) : tile<8xf32> {
          ^(%a: f32, %b: f32):
            %8 = binary {kind = "max"} (%a, %b) : f32
            yield ([%8])
          }
          %9 = expand_dims {axis = 1} (%m) : tile<8x1xf32>
          %10 = broadcast (%9) : tile<8x64xf32>
          %d = binary {kind = "sub"} (%v, %10) : tile<8x64xf32>
          %t = permute {order = (1, 0)} (%d) : tile<64x8xf32>
          %11 = splat (%out) : tile<8x64xptr<f32>>
          %12 = addptr (%11, %offs) : tile<8x64xptr<f32>>
          store (%12, %d, none)
        }
"""


ROWS_LAID_OUT = """
        kernel @row_max(%x: ptr<f32> {divisibility = 16}, %out: ptr<f32> {divisibility = 16}) {
          %r = arange {start = 0, end = 8} : tile<8xi32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %c = arange {start = 0, end = 64} : tile<64xi32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %0 = expand_dims {axis = 1} (%r) : tile<8x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %1 = constant {value = 64} : tile<8x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %2 = binary {kind = "mul"} (%0, %1) : tile<8x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %3 = expand_dims {axis = 0} (%c) : tile<1x64xi32, #blocked<spt=[1,1], tpw=[1,32], wpc=[2,2], order=[1,0]>>
          %4 = broadcast (%2) : tile<8x64xi32, #blocked<spt=[1,1], tpw=[1,32], wpc=[2,2], order=[1,0]>>
          %5 = broadcast (%3) : tile<8x64xi32, #blocked<spt=[1,1], tpw=[1,32], wpc=[2,2], order=[1,0]>>
          %offs = binary {kind = "add"} (%4, %5) : tile<8x64xi32, #blocked<spt=[1,1], tpw=[1,32], wpc=[2,2], order=[1,0]>>
          %6 = splat (%x) : tile<8x64xptr<f32>, #blocked<spt=[1,1], tpw=[1,32], wpc=[2,2], order=[1,0]>>
          %7 = addptr (%6, %offs) : tile<8x64xptr<f32>, #blocked<spt=[1,1], tpw=[1,32], wpc=[2,2], order=[1,0]>>
          %v = load (%7, none, none) : tile<8x64xf32, #blocked<spt=[1,4], tpw=[2,16], wpc=[4,1], order=[1,0]>>
          %m = reduce {axis = 1} ([%v]) : tile<8xf32, #slice<dim=1, parent=#blocked<spt=[1,4], tpw=[2,16], wpc=[4,1], order=[1,0]>>> {
          ^(%a: f32, %b: f32):
            %8 = binary {kind = "max"} (%a, %b) : f32
            yield ([%8])
          }
          %9 = expand_dims {axis = 1} (%m) : tile<8x1xf32, #blocked<spt=[1,4], tpw=[2,16], wpc=[4,1], order=[1,0]>>
          %10 = broadcast (%9) : tile<8x64xf32, #blocked<spt=[1,4], tpw=[2,16], wpc=[4,1], order=[1,0]>>
          %d = binary {kind = "sub"} (%v, %10) : tile<8x64xf32, #blocked<spt=[1,4], tpw=[2,16], wpc=[4,1], order=[1,0]>>
          %t = permute {order = (1, 0)} (%d) : tile<64x8xf32, #blocked<spt=[4,1], tpw=[16,2], wpc=[1,4], order=[0,1]>>
          %11 = splat (%out) : tile<8x64xptr<f32>, #blocked<spt=[1,1], tpw=[1,32], wpc=[2,2], order=[1,0]>>
          %12 = addptr (%11, %offs) : tile<8x64xptr<f32>, #blocked<spt=[1,1], tpw=[1,32], wpc=[2,2], order=[1,0]>>
          store (%12, %d, none)
        }
"""


MM_LAID_OUT = """
        kernel @mm(%a_ptr: ptr<f16> {divisibility = 16}, %b_ptr: ptr<f16> {divisibility = 16}, %c_ptr: ptr<f32> {divisibility = 16}, %K: i32 {divisibility = 16}) {
          %rm = arange {start = 0, end = 32} : tile<32xi32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %rk = arange {start = 0, end = 16} : tile<16xi32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>
          %0 = expand_dims {axis = 1} (%rm) : tile<32x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %1 = constant {value = 16} : i32
          %2 = constant {value = 16} : tile<32x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %3 = binary {kind = "mul"} (%0, %2) : tile<32x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %4 = splat (%a_ptr) : tile<32x1xptr<f16>, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %5 = addptr (%4, %3) : tile<32x1xptr<f16>, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %6 = expand_dims {axis = 0} (%rk) : tile<1x16xi32, #blocked<spt=[1,1], tpw=[2,16], wpc=[4,1], order=[1,0]>>
          %7 = broadcast (%5) : tile<32x16xptr<f16>, #blocked<spt=[1,1], tpw=[2,16], wpc=[4,1], order=[1,0]>>
          %8 = broadcast (%6) : tile<32x16xi32, #blocked<spt=[1,1], tpw=[2,16], wpc=[4,1], order=[1,0]>>
          %a_ptrs = addptr (%7, %8) : tile<32x16xptr<f16>, #blocked<spt=[1,1], tpw=[2,16], wpc=[4,1], order=[1,0]>>
          %9 = expand_dims {axis = 1} (%rk) : tile<16x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %10 = constant {value = 32} : tile<16x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %11 = binary {kind = "mul"} (%9, %10) : tile<16x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %12 = splat (%b_ptr) : tile<16x1xptr<f16>, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %13 = addptr (%12, %11) : tile<16x1xptr<f16>, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %14 = expand_dims {axis = 0} (%rm) : tile<1x32xi32, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
          %15 = broadcast (%13) : tile<16x32xptr<f16>, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
          %16 = broadcast (%14) : tile<16x32xi32, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
          %b_ptrs = addptr (%15, %16) : tile<16x32xptr<f16>, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
          %acc = constant {value = 0.0} : tile<32x32xf32, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
          %17 = constant {value = 0} : i32
          %acc_1, %a_ptrs_1, %b_ptrs_1 = for (%17, %K, %1, [%acc, %a_ptrs, %b_ptrs]) : tile<32x32xf32, #blocked<spt=[1,2], tpw=[8,4], wpc=[2,2], order=[1,0]>>, tile<32x16xptr<f16>, #blocked<spt=[1,4], tpw=[8,4], wpc=[4,1], order=[1,0]>>, tile<16x32xptr<f16>, #blocked<spt=[1,4], tpw=[4,8], wpc=[4,1], order=[1,0]>> {
          ^(%k: i32, %acc_2: tile<32x32xf32, #blocked<spt=[1,2], tpw=[8,4], wpc=[2,2], order=[1,0]>>, %a_ptrs_2: tile<32x16xptr<f16>, #blocked<spt=[1,4], tpw=[8,4], wpc=[4,1], order=[1,0]>>, %b_ptrs_2: tile<16x32xptr<f16>, #blocked<spt=[1,4], tpw=[4,8], wpc=[4,1], order=[1,0]>>):
            %18 = load (%a_ptrs_2, none, none) : tile<32x16xf16, #blocked<spt=[1,4], tpw=[8,4], wpc=[4,1], order=[1,0]>>
            %19 = load (%b_ptrs_2, none, none) : tile<16x32xf16, #blocked<spt=[1,4], tpw=[4,8], wpc=[4,1], order=[1,0]>>
            %20 = dot (%18, %19, %acc) : tile<32x32xf32, #blocked<spt=[1,2], tpw=[8,4], wpc=[2,2], order=[1,0]>>
            %acc_3 = binary {kind = "add"} (%acc_2, %20) : tile<32x32xf32, #blocked<spt=[1,2], tpw=[8,4], wpc=[2,2], order=[1,0]>>
            %21 = constant {value = 16} : tile<32x16xi32, #blocked<spt=[1,1], tpw=[2,16], wpc=[4,1], order=[1,0]>>
            %a_ptrs_3 = addptr (%a_ptrs_2, %21) : tile<32x16xptr<f16>, #blocked<spt=[1,4], tpw=[8,4], wpc=[4,1], order=[1,0]>>
            %22 = constant {value = 512} : tile<16x32xi32, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
            %b_ptrs_3 = addptr (%b_ptrs_2, %22) : tile<16x32xptr<f16>, #blocked<spt=[1,4], tpw=[4,8], wpc=[4,1], order=[1,0]>>
            yield ([%acc_3, %a_ptrs_3, %b_ptrs_3])
          }
          %23 = constant {value = 32} : tile<32x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %24 = binary {kind = "mul"} (%0, %23) : tile<32x1xi32, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %25 = splat (%c_ptr) : tile<32x1xptr<f32>, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %26 = addptr (%25, %24) : tile<32x1xptr<f32>, #blocked<spt=[1,1], tpw=[32,1], wpc=[4,1], order=[1,0]>>
          %27 = broadcast (%26) : tile<32x32xptr<f32>, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
          %28 = broadcast (%14) : tile<32x32xi32, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
          %29 = addptr (%27, %28) : tile<32x32xptr<f32>, #blocked<spt=[1,1], tpw=[1,32], wpc=[4,1], order=[1,0]>>
          store (%29, %acc_1, none)
        }
"""


def test_loads_get_the_widest_access_the_axis_facts_prove():
    """16-byte aligned, 16-divisible accesses: the loads hold 4 consecutive f32 per thread
    (``ld.global.v4``); the index arithmetic keeps the default layout (it is recomputed in
    whatever layout a use wants); the sum follows its loaded operands."""
    laid = check(lay_out, ADD, ADD_LAID_OUT)
    assert sorted(laid.vector.values()) == [4, 4, 4]
    (store_layout,) = laid.store_layout.values()
    assert store_layout == BlockedLayout((4,), (32,), (4,), (0,))


def test_reduction_results_are_slices_of_their_operand():
    """The row maximum lives in a slice of the loaded tile's layout; expanding it back along
    the reduced axis gives that layout again, broadcast keeps it, and permute permutes it.
    The row offsets (8x1, every lane on the rows) are broadcast into the 8x64 tile's default
    layout instead: kept, theirs would give each thread 64 of the 512 elements, not 4."""
    check(lay_out, ROWS, ROWS_LAID_OUT)


def test_loop_carried_accumulator_takes_the_mma_layout():
    """With tensor cores the dot gets the m16n8k16 accumulator layout (2 x 2 warps for a
    32 x 32 tile), and the loop-carried accumulator takes it from what the body yields
    (its start value, a constant, is recomputed in it); carried pointer tiles are laid out
    for their loads' widest access."""
    nvidia = pytest.importorskip("anytile_nvidia.simulated")
    check(lambda m: lay_out(m, nvidia.simulated_nvidia_target()), MATMUL_LOOP, MM_LAID_OUT)


def _module(fn, signature, constexprs):
    import anytile as at
    return at.compile(fn, target="interpreter:reference", signature=signature,
                      constexprs=constexprs).module


def _transposed_load_kernel():
    import anytile as at
    import anytile.language as tl

    @at.jit
    def transposed(k_ptr, out_ptr, stride, BN: tl.constexpr, D: tl.constexpr):
        n, d = tl.arange(0, BN), tl.arange(0, D)
        kt = tl.load(k_ptr + n[None, :] * stride + d[:, None])       # D x BN, runs along D
        tl.store(out_ptr + d[:, None] * BN + n[None, :], kt)
    return transposed


def test_a_transposed_load_lays_its_lanes_along_the_contiguous_dimension():
    """Addresses that run along the first dimension (attention's K read as D x BN): lanes go
    fastest along it (order [0, 1]) so a warp's accesses coalesce, instead of each lane
    reading a different row."""
    module = _module(_transposed_load_kernel(), {"k_ptr": "*fp16:16", "out_ptr": "*fp16:16",
                                                 "stride": "i32:16"}, {"BN": 64, "D": 64})
    laid = lay_out(module)
    (load,) = [op for op in laid.kernel.walk() if op.NAME == "load"]
    assert load.result.type.layout.order == (0, 1)


def _online_max_kernel():
    import anytile as at
    import anytile.language as tl

    @at.jit
    def online_max(x_ptr, out_ptr, n, BM: tl.constexpr, BN: tl.constexpr):
        rows, cols = tl.arange(0, BM), tl.arange(0, BN)
        m = tl.zeros((BM,), tl.float32) - float("inf")
        for start in range(0, n, BN):
            x = tl.load(x_ptr + rows[:, None] * n + (start + cols)[None, :])
            m = tl.maximum(m, tl.max(x, 1))
        tl.store(out_ptr + rows, m)
    return online_max


def test_loop_carried_row_statistics_take_the_reductions_layout():
    """``m = max(m, max(x, 1))`` carried from a constant start: the carried value takes the
    reduction's slice layout (the constant start anchors nothing), so no iteration converts
    it through shared memory."""
    module = _module(_online_max_kernel(), {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16",
                                            "n": "i32:16"}, {"BM": 64, "BN": 64})
    laid = lay_out(module)
    (loop,) = [op for op in laid.kernel.walk() if op.NAME == "for"]
    (carried,) = [a for a in loop.body.args[1:] if hasattr(a.type, "layout")]
    assert type(carried.type.layout).__name__ == "SliceLayout"


def laid_out_values(text):
    """The laid-out kernel of IR ``text`` and its top-level values by name."""
    import textwrap
    from anytile.ir.parser import parse_module
    laid = lay_out(parse_module(textwrap.dedent(text)))
    return laid, {op.results[0].name: op.results[0] for op in laid.kernel.body.ops if op.results}


GATHER = """
        kernel @scale_by_channel(%x: ptr<f32> {divisibility = 16}, %w: ptr<f32> {divisibility = 16}, %out: ptr<f32> {divisibility = 16}, %per_channel: i32) {
          %0 = arange {start = 0, end = 2048} : tile<2048xi32>
          %1 = splat (%x) : tile<2048xptr<f32>>
          %2 = addptr (%1, %0) : tile<2048xptr<f32>>
          %xs = load (%2, none, none) : tile<2048xf32>
          %3 = splat (%per_channel) : tile<2048xi32>
          %channel = binary {kind = "div"} (%0, %3) : tile<2048xi32>
          %4 = splat (%w) : tile<2048xptr<f32>>
          %5 = addptr (%4, %channel) : tile<2048xptr<f32>>
          %ws = load (%5, none, none) : tile<2048xf32>
          %y = binary {kind = "mul"} (%xs, %ws) : tile<2048xf32>
          %6 = splat (%out) : tile<2048xptr<f32>>
          %7 = addptr (%6, %0) : tile<2048xptr<f32>>
          store (%7, %y, none)
        }
"""


def test_a_gather_takes_the_layout_of_its_readers():
    """``w[offs // per_channel]`` is read one element at a time whatever its layout: it takes
    the layout of the product it feeds (four consecutive floats a thread, as ``x`` is read),
    so the product needs no exchange of the gathered tile through shared memory."""
    laid, values = laid_out_values(GATHER)
    wide = BlockedLayout((4,), (32,), (4,), (0,))
    assert values["xs"].type.layout == wide and values["y"].type.layout == wide
    assert values["ws"].type.layout == wide, laid
    assert sorted(laid.vector.values()) == [1, 4, 4]


ROW_GATHER = """
        kernel @rows_plus_transposed(%w: ptr<f32>, %b: ptr<f32> {divisibility = 16}, %out: ptr<f32> {divisibility = 16}, %d: i32) {
          %r = arange {start = 0, end = 64} : tile<64xi32>
          %c = arange {start = 0, end = 64} : tile<64xi32>
          %0 = expand_dims {axis = 1} (%r) : tile<64x1xi32>
          %1 = expand_dims {axis = 0} (%c) : tile<1x64xi32>
          %2 = splat (%d) : tile<64x1xi32>
          %3 = binary {kind = "mul"} (%0, %2) : tile<64x1xi32>
          %4 = broadcast (%3) : tile<64x64xi32>
          %5 = broadcast (%1) : tile<64x64xi32>
          %6 = binary {kind = "add"} (%4, %5) : tile<64x64xi32>
          %7 = splat (%w) : tile<64x64xptr<f32>>
          %8 = addptr (%7, %6) : tile<64x64xptr<f32>>
          %9 = constant {value = 64} : tile<1x64xi32>
          %10 = binary {kind = "mul"} (%1, %9) : tile<1x64xi32>
          %11 = broadcast (%10) : tile<64x64xi32>
          %12 = broadcast (%0) : tile<64x64xi32>
          %13 = binary {kind = "add"} (%11, %12) : tile<64x64xi32>
          %14 = splat (%b) : tile<64x64xptr<f32>>
          %15 = addptr (%14, %13) : tile<64x64xptr<f32>>
          %bt = load (%15, none, none) : tile<64x64xf32>
          %ws = load (%8, none, none) : tile<64x64xf32>
          %y = binary {kind = "add"} (%bt, %ws) : tile<64x64xf32>
          %16 = constant {value = 64} : tile<64x1xi32>
          %17 = binary {kind = "mul"} (%0, %16) : tile<64x1xi32>
          %18 = broadcast (%17) : tile<64x64xi32>
          %19 = binary {kind = "add"} (%18, %5) : tile<64x64xi32>
          %20 = splat (%out) : tile<64x64xptr<f32>>
          %21 = addptr (%20, %19) : tile<64x64xptr<f32>>
          store (%21, %y, none)
        }
"""


def test_a_gather_keeps_its_lanes_along_the_dimension_it_reads():
    """A row gather of unaligned rows (``w[rows[:, None] * d + cols[None, :]]``, one element
    wide since ``d`` has no known divisor) read beside a transposed tile: taking that tile's
    layout would put a warp's lanes down the columns, so the gather keeps its own."""
    laid, values = laid_out_values(ROW_GATHER)
    assert values["bt"].type.layout.order == (0, 1), laid
    assert values["ws"].type.layout.order == (1, 0), laid
