"""The loop-address split (``codegen/gpu/addresses.py``) as snapshot pairs: addresses computed
from the loop index each step become a tile built once before the loop plus one scalar a step,
both in 64 bits (so neither part can wrap where the whole offset does not)."""
from __future__ import annotations

from anytile.codegen.gpu.addresses import split_loop_addresses
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module

from gpu_kit import check, ir

#: Triton's persistent-matmul addressing: ``a_ptr + rm[:, None] * K + (k + rk)[None, :]`` and
#: ``b_ptr + (k + rk)[:, None] * sbk + rn[None, :]``, every term rebuilt each step
INDEXED_MATMUL = """
    kernel @mm(%a_ptr: ptr<f16> {divisibility = 16}, %b_ptr: ptr<f16> {divisibility = 16}, %c_ptr: ptr<f32> {divisibility = 16}, %K: i32 {divisibility = 16}, %sbk: i32) {
      %rm = arange {start = 0, end = 32} : tile<32xi32>
      %rk = arange {start = 0, end = 16} : tile<16xi32>
      %acc = constant {value = 0.0} : tile<32x32xf32>
      %0 = constant {value = 0} : i32
      %1 = constant {value = 16} : i32
      %acc_1 = for (%0, %K, %1, [%acc]) : tile<32x32xf32> {
      ^(%k: i32, %acc_2: tile<32x32xf32>):
        %2 = expand_dims {axis = 1} (%rm) : tile<32x1xi32>
        %3 = splat (%K) : tile<32x1xi32>
        %4 = binary {kind = "mul"} (%2, %3) : tile<32x1xi32>
        %5 = splat (%a_ptr) : tile<32x1xptr<f16>>
        %6 = addptr (%5, %4) : tile<32x1xptr<f16>>
        %7 = splat (%k) : tile<16xi32>
        %8 = binary {kind = "add"} (%7, %rk) : tile<16xi32>
        %9 = expand_dims {axis = 0} (%8) : tile<1x16xi32>
        %10 = broadcast (%6) : tile<32x16xptr<f16>>
        %11 = broadcast (%9) : tile<32x16xi32>
        %12 = addptr (%10, %11) : tile<32x16xptr<f16>>
        %a = load (%12, none, none) : tile<32x16xf16>
        %13 = expand_dims {axis = 1} (%8) : tile<16x1xi32>
        %14 = splat (%sbk) : tile<16x1xi32>
        %15 = binary {kind = "mul"} (%13, %14) : tile<16x1xi32>
        %16 = splat (%b_ptr) : tile<16x1xptr<f16>>
        %17 = addptr (%16, %15) : tile<16x1xptr<f16>>
        %18 = expand_dims {axis = 0} (%rm) : tile<1x32xi32>
        %19 = broadcast (%17) : tile<16x32xptr<f16>>
        %20 = broadcast (%18) : tile<16x32xi32>
        %21 = addptr (%19, %20) : tile<16x32xptr<f16>>
        %b = load (%21, none, none) : tile<16x32xf16>
        %acc_3 = dot (%a, %b, %acc_2) : tile<32x32xf32>
        yield ([%acc_3])
      }
      %22 = expand_dims {axis = 1} (%rm) : tile<32x1xi32>
      %23 = constant {value = 32} : tile<32x1xi32>
      %24 = binary {kind = "mul"} (%22, %23) : tile<32x1xi32>
      %25 = splat (%c_ptr) : tile<32x1xptr<f32>>
      %26 = addptr (%25, %24) : tile<32x1xptr<f32>>
      %27 = expand_dims {axis = 0} (%rm) : tile<1x32xi32>
      %28 = broadcast (%26) : tile<32x32xptr<f32>>
      %29 = broadcast (%27) : tile<32x32xi32>
      %30 = addptr (%28, %29) : tile<32x32xptr<f32>>
      store (%30, %acc_1, none)
    }
"""

INDEXED_MATMUL_SPLIT = """
    kernel @mm(%a_ptr: ptr<f16> {divisibility = 16}, %b_ptr: ptr<f16> {divisibility = 16}, %c_ptr: ptr<f32> {divisibility = 16}, %K: i32 {divisibility = 16}, %sbk: i32) {
      %rm = arange {start = 0, end = 32} : tile<32xi32>
      %rk = arange {start = 0, end = 16} : tile<16xi32>
      %acc = constant {value = 0.0} : tile<32x32xf32>
      %0 = constant {value = 0} : i32
      %1 = constant {value = 16} : i32
      %2 = splat (%a_ptr) : tile<32x1xptr<f16>>
      %3 = expand_dims {axis = 1} (%rm) : tile<32x1xi32>
      %4 = splat (%K) : tile<32x1xi32>
      %5 = binary {kind = "mul"} (%3, %4) : tile<32x1xi32>
      %6 = addptr (%2, %5) : tile<32x1xptr<f16>>
      %7 = broadcast (%6) : tile<32x16xptr<f16>>
      %8 = cast (%rk) : tile<16xi64>
      %9 = expand_dims {axis = 0} (%8) : tile<1x16xi64>
      %10 = broadcast (%9) : tile<32x16xi64>
      %11 = addptr (%7, %10) : tile<32x16xptr<f16>>
      %12 = splat (%b_ptr) : tile<16x1xptr<f16>>
      %13 = cast (%sbk) : i64
      %14 = cast (%rk) : tile<16xi64>
      %15 = expand_dims {axis = 1} (%14) : tile<16x1xi64>
      %16 = splat (%sbk) : tile<16x1xi32>
      %17 = cast (%16) : tile<16x1xi64>
      %18 = binary {kind = "mul"} (%15, %17) : tile<16x1xi64>
      %19 = addptr (%12, %18) : tile<16x1xptr<f16>>
      %20 = broadcast (%19) : tile<16x32xptr<f16>>
      %21 = expand_dims {axis = 0} (%rm) : tile<1x32xi32>
      %22 = broadcast (%21) : tile<16x32xi32>
      %23 = cast (%22) : tile<16x32xi64>
      %24 = addptr (%20, %23) : tile<16x32xptr<f16>>
      %acc_1 = for (%0, %K, %1, [%acc]) : tile<32x32xf32> {
      ^(%k: i32, %acc_2: tile<32x32xf32>):
        %25 = cast (%k) : i64
        %26 = splat (%25) : tile<32x16xi64>
        %27 = addptr (%11, %26) : tile<32x16xptr<f16>>
        %a = load (%27, none, none) : tile<32x16xf16>
        %28 = cast (%k) : i64
        %29 = binary {kind = "mul"} (%28, %13) : i64
        %30 = splat (%29) : tile<16x32xi64>
        %31 = addptr (%24, %30) : tile<16x32xptr<f16>>
        %b = load (%31, none, none) : tile<16x32xf16>
        %acc_3 = dot (%a, %b, %acc_2) : tile<32x32xf32>
        yield ([%acc_3])
      }
      %32 = expand_dims {axis = 1} (%rm) : tile<32x1xi32>
      %33 = constant {value = 32} : tile<32x1xi32>
      %34 = binary {kind = "mul"} (%32, %33) : tile<32x1xi32>
      %35 = splat (%c_ptr) : tile<32x1xptr<f32>>
      %36 = addptr (%35, %34) : tile<32x1xptr<f32>>
      %37 = expand_dims {axis = 0} (%rm) : tile<1x32xi32>
      %38 = broadcast (%36) : tile<32x32xptr<f32>>
      %39 = broadcast (%37) : tile<32x32xi32>
      %40 = addptr (%38, %39) : tile<32x32xptr<f32>>
      store (%40, %acc_1, none)
    }
"""

#: ``(rk - k) * 2``: a difference and a constant factor
SCALED_DIFFERENCE = """
    kernel @k(%x_ptr: ptr<f32> {divisibility = 16}, %n: i32) {
      %rk = arange {start = 0, end = 16} : tile<16xi32>
      %acc = constant {value = 0.0} : tile<16xf32>
      %0 = constant {value = 0} : i32
      %1 = constant {value = 1} : i32
      %acc_1 = for (%0, %n, %1, [%acc]) : tile<16xf32> {
      ^(%k: i32, %acc_2: tile<16xf32>):
        %2 = splat (%k) : tile<16xi32>
        %3 = binary {kind = "sub"} (%rk, %2) : tile<16xi32>
        %4 = constant {value = 2} : tile<16xi32>
        %5 = binary {kind = "mul"} (%3, %4) : tile<16xi32>
        %6 = splat (%x_ptr) : tile<16xptr<f32>>
        %7 = addptr (%6, %5) : tile<16xptr<f32>>
        %8 = load (%7, none, none) : tile<16xf32>
        %acc_3 = binary {kind = "add"} (%acc_2, %8) : tile<16xf32>
        yield ([%acc_3])
      }
      %9 = splat (%x_ptr) : tile<16xptr<f32>>
      %10 = addptr (%9, %rk) : tile<16xptr<f32>>
      store (%10, %acc_1, none)
    }
"""

SCALED_DIFFERENCE_SPLIT = """
    kernel @k(%x_ptr: ptr<f32> {divisibility = 16}, %n: i32) {
      %rk = arange {start = 0, end = 16} : tile<16xi32>
      %acc = constant {value = 0.0} : tile<16xf32>
      %0 = constant {value = 0} : i32
      %1 = constant {value = 1} : i32
      %2 = splat (%x_ptr) : tile<16xptr<f32>>
      %3 = cast (%rk) : tile<16xi64>
      %4 = constant {value = 2} : tile<16xi32>
      %5 = cast (%4) : tile<16xi64>
      %6 = binary {kind = "mul"} (%3, %5) : tile<16xi64>
      %7 = addptr (%2, %6) : tile<16xptr<f32>>
      %acc_1 = for (%0, %n, %1, [%acc]) : tile<16xf32> {
      ^(%k: i32, %acc_2: tile<16xf32>):
        %8 = constant {value = 2} : i64
        %9 = cast (%k) : i64
        %10 = constant {value = 0} : i64
        %11 = binary {kind = "sub"} (%10, %9) : i64
        %12 = binary {kind = "mul"} (%11, %8) : i64
        %13 = splat (%12) : tile<16xi64>
        %14 = addptr (%7, %13) : tile<16xptr<f32>>
        %15 = load (%14, none, none) : tile<16xf32>
        %acc_3 = binary {kind = "add"} (%acc_2, %15) : tile<16xf32>
        yield ([%acc_3])
      }
      %16 = splat (%x_ptr) : tile<16xptr<f32>>
      %17 = addptr (%16, %rk) : tile<16xptr<f32>>
      store (%17, %acc_1, none)
    }
"""

#: a carried pointer tile, and an offset chosen by ``select`` per element: neither splits
NOT_SPLIT = """
    kernel @k(%x_ptr: ptr<f32> {divisibility = 16}, %n: i32) {
      %rk = arange {start = 0, end = 16} : tile<16xi32>
      %acc = constant {value = 0.0} : tile<16xf32>
      %0 = constant {value = 0} : i32
      %1 = constant {value = 1} : i32
      %2 = splat (%x_ptr) : tile<16xptr<f32>>
      %ptrs = addptr (%2, %rk) : tile<16xptr<f32>>
      %step = constant {value = 16} : tile<16xi32>
      %acc_1, %ptrs_1 = for (%0, %n, %1, [%acc, %ptrs]) : tile<16xf32>, tile<16xptr<f32>> {
      ^(%k: i32, %acc_2: tile<16xf32>, %ptrs_2: tile<16xptr<f32>>):
        %3 = load (%ptrs_2, none, none) : tile<16xf32>
        %4 = splat (%k) : tile<16xi32>
        %5 = binary {kind = "add"} (%4, %rk) : tile<16xi32>
        %6 = splat (%n) : tile<16xi32>
        %7 = compare {pred = "lt"} (%5, %6) : tile<16xi1>
        %8 = select (%7, %5, %rk) : tile<16xi32>
        %9 = splat (%x_ptr) : tile<16xptr<f32>>
        %10 = addptr (%9, %rk) : tile<16xptr<f32>>
        %11 = addptr (%10, %8) : tile<16xptr<f32>>
        %12 = load (%11, none, none) : tile<16xf32>
        %13 = binary {kind = "add"} (%3, %12) : tile<16xf32>
        %acc_3 = binary {kind = "add"} (%acc_2, %13) : tile<16xf32>
        %ptrs_3 = addptr (%ptrs_2, %step) : tile<16xptr<f32>>
        yield ([%acc_3, %ptrs_3])
      }
      store (%ptrs, %acc_1, none)
    }
"""


def test_addresses_from_the_loop_index_become_a_base_and_a_scalar_step():
    assert check(lambda m: split_loop_addresses(m.kernel), INDEXED_MATMUL, INDEXED_MATMUL_SPLIT) == 2


def test_differences_and_constant_factors_split_too():
    assert check(lambda m: split_loop_addresses(m.kernel), SCALED_DIFFERENCE, SCALED_DIFFERENCE_SPLIT) == 1


def test_carried_pointers_and_per_element_choices_are_left_alone():
    assert check(lambda m: split_loop_addresses(m.kernel), NOT_SPLIT, NOT_SPLIT) == 0


def test_a_failed_split_leaves_nothing_before_the_loop():
    # the select load's split fails after its base (computed in the body from outside values)
    # was cloned for the place before the loop: the clones must go again
    module = parse_module(ir(NOT_SPLIT))
    split_loop_addresses(module.kernel)
    assert print_module(module) == ir(NOT_SPLIT)


#: ``x_ptr + (rk // d + k)``: the division by ``d`` is not moved before the loop (a loop of no
#: iteration must not divide by a zero ``d``), so the load keeps its addresses
DIVIDED = """
    kernel @k(%x_ptr: ptr<f32> {divisibility = 16}, %n: i32, %d: i32) {
      %rk = arange {start = 0, end = 16} : tile<16xi32>
      %acc = constant {value = 0.0} : tile<16xf32>
      %0 = constant {value = 0} : i32
      %1 = constant {value = 1} : i32
      %acc_1 = for (%0, %n, %1, [%acc]) : tile<16xf32> {
      ^(%k: i32, %acc_2: tile<16xf32>):
        %2 = splat (%d) : tile<16xi32>
        %3 = binary {kind = "div"} (%rk, %2) : tile<16xi32>
        %4 = splat (%k) : tile<16xi32>
        %5 = binary {kind = "add"} (%3, %4) : tile<16xi32>
        %6 = splat (%x_ptr) : tile<16xptr<f32>>
        %7 = addptr (%6, %5) : tile<16xptr<f32>>
        %8 = load (%7, none, none) : tile<16xf32>
        %acc_3 = binary {kind = "add"} (%acc_2, %8) : tile<16xf32>
        yield ([%acc_3])
      }
      %9 = splat (%x_ptr) : tile<16xptr<f32>>
      %10 = addptr (%9, %rk) : tile<16xptr<f32>>
      store (%10, %acc_1, none)
    }
"""


def test_divisions_stay_in_the_loop():
    assert check(lambda m: split_loop_addresses(m.kernel), DIVIDED, DIVIDED) == 0


def test_a_second_run_changes_nothing():
    module = parse_module(ir(INDEXED_MATMUL))
    assert split_loop_addresses(module.kernel) == 2
    once = print_module(module)
    assert split_loop_addresses(module.kernel) == 0
    assert print_module(module) == once


UNSIGNED = """
    kernel @k(%x_ptr: ptr<f32> {divisibility = 16}, %n: u32) {
      %rk = arange {start = 0, end = 16} : tile<16xi32>
      %ru = cast (%rk) : tile<16xu32>
      %acc = constant {value = 0.0} : tile<16xf32>
      %0 = constant {value = 0} : u32
      %1 = constant {value = 1} : u32
      %acc_1 = for (%0, %n, %1, [%acc]) : tile<16xf32> {
      ^(%k: u32, %acc_2: tile<16xf32>):
        %2 = splat (%k) : tile<16xu32>
        %3 = binary {kind = "add"} (%ru, %2) : tile<16xu32>
        %4 = splat (%x_ptr) : tile<16xptr<f32>>
        %5 = addptr (%4, %3) : tile<16xptr<f32>>
        %6 = load (%5, none, none) : tile<16xf32>
        %acc_3 = binary {kind = "add"} (%acc_2, %6) : tile<16xf32>
        yield ([%acc_3])
      }
      %7 = splat (%x_ptr) : tile<16xptr<f32>>
      %8 = addptr (%7, %rk) : tile<16xptr<f32>>
      store (%8, %acc_1, none)
    }
"""


def test_unsigned_offsets_are_left_alone():
    # u32 offsets are zero-extended: the 64-bit regrouping (sign-extending) would not hold
    assert check(lambda m: split_loop_addresses(m.kernel), UNSIGNED, UNSIGNED) == 0


def test_only_innermost_loops_are_split():
    # a persistent kernel's loop over tiles: the inner loop's loads are split, the outer
    # loop's are not (their base would stay in registers through the inner loop)
    inner = ir(SCALED_DIFFERENCE).split("\n")
    body = [line for line in inner[5:-5]]
    outer = "\n".join(inner[:5] + [
        "  %o = for (%0, %n, %1, [%acc]) : tile<16xf32> {",
        "  ^(%t: i32, %acc_o: tile<16xf32>):",
        "    %t1 = splat (%t) : tile<16xi32>",
        "    %t2 = binary {kind = \"add\"} (%rk, %t1) : tile<16xi32>",
        "    %t3 = splat (%x_ptr) : tile<16xptr<f32>>",
        "    %t4 = addptr (%t3, %t2) : tile<16xptr<f32>>",
        "    %t5 = load (%t4, none, none) : tile<16xf32>",
    ] + ["  " + line for line in body] + [
        "    %t6 = binary {kind = \"add\"} (%acc_1, %t5) : tile<16xf32>",
        "    yield ([%t6])",
        "  }",
    ] + inner[-5:]).replace("store (%10, %acc_1, none)", "store (%10, %o, none)")
    module = parse_module(outer)
    assert split_loop_addresses(module.kernel) == 1
    text = print_module(module)
    assert "%t4 = addptr (%t3, %t2)" in text and "load (%t4" in text
