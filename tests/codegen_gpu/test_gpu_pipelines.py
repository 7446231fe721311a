"""The GPU software-pipelining passes (``codegen/gpu/pipeline.py``) as snapshot pairs:
register prefetch of loop loads, and multi-stage ``async_copy`` buffers for dot operands."""
from __future__ import annotations

import re

from anytile.codegen.gpu.pipeline import pipeline_dot_operands, pipeline_loops
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import verify_module

from gpu_kit import MATMUL_LOOP, check, ir

ROWSUM = """
        kernel @rowsum(%x_ptr: ptr<f32> {divisibility = 16}, %out_ptr: ptr<f32> {divisibility = 16}, %n: i32) {
          %offs = arange {start = 0, end = 128} : tile<128xi32>
          %acc = constant {value = 0.0} : tile<128xf32>
          %0 = constant {value = 0} : i32
          %1 = constant {value = 128} : i32
          %acc_1 = for (%0, %n, %1, [%acc]) : tile<128xf32> {
          ^(%i: i32, %acc_2: tile<128xf32>):
            %2 = addptr (%x_ptr, %i) : ptr<f32>
            %3 = splat (%2) : tile<128xptr<f32>>
            %4 = addptr (%3, %offs) : tile<128xptr<f32>>
            %5 = splat (%i) : tile<128xi32>
            %6 = binary {kind = "add"} (%5, %offs) : tile<128xi32>
            %7 = splat (%n) : tile<128xi32>
            %8 = compare {pred = "lt"} (%6, %7) : tile<128xi1>
            %9 = load (%4, %8, %acc) : tile<128xf32>
            %acc_3 = binary {kind = "add"} (%acc_2, %9) : tile<128xf32>
            yield ([%acc_3])
          }
          %10 = splat (%out_ptr) : tile<128xptr<f32>>
          %11 = addptr (%10, %offs) : tile<128xptr<f32>>
          store (%11, %acc_1, none)
        }
"""


ROWSUM_PREFETCHED = """
        kernel @rowsum(%x_ptr: ptr<f32> {divisibility = 16}, %out_ptr: ptr<f32> {divisibility = 16}, %n: i32) {
          %offs = arange {start = 0, end = 128} : tile<128xi32>
          %acc = constant {value = 0.0} : tile<128xf32>
          %0 = constant {value = 0} : i32
          %1 = constant {value = 128} : i32
          %2 = compare {pred = "lt"} (%0, %n) : i1
          %3 = addptr (%x_ptr, %0) : ptr<f32>
          %4 = splat (%3) : tile<128xptr<f32>>
          %5 = addptr (%4, %offs) : tile<128xptr<f32>>
          %6 = splat (%0) : tile<128xi32>
          %7 = binary {kind = "add"} (%6, %offs) : tile<128xi32>
          %8 = splat (%n) : tile<128xi32>
          %9 = compare {pred = "lt"} (%7, %8) : tile<128xi1>
          %10 = splat (%2) : tile<128xi1>
          %11 = binary {kind = "and"} (%9, %10) : tile<128xi1>
          %12 = load (%5, %11, %acc) : tile<128xf32>
          %acc_1, %13 = for (%0, %n, %1, [%acc, %12]) : tile<128xf32>, tile<128xf32> {
          ^(%i: i32, %acc_2: tile<128xf32>, %14: tile<128xf32>):
            %15 = binary {kind = "add"} (%i, %1) : i32
            %16 = compare {pred = "lt"} (%15, %n) : i1
            %17 = addptr (%x_ptr, %15) : ptr<f32>
            %18 = splat (%17) : tile<128xptr<f32>>
            %19 = addptr (%18, %offs) : tile<128xptr<f32>>
            %20 = splat (%15) : tile<128xi32>
            %21 = binary {kind = "add"} (%20, %offs) : tile<128xi32>
            %22 = splat (%n) : tile<128xi32>
            %23 = compare {pred = "lt"} (%21, %22) : tile<128xi1>
            %24 = splat (%16) : tile<128xi1>
            %25 = binary {kind = "and"} (%23, %24) : tile<128xi1>
            %26 = load (%19, %25, %acc) : tile<128xf32>
            %27 = addptr (%x_ptr, %i) : ptr<f32>
            %28 = splat (%27) : tile<128xptr<f32>>
            %29 = addptr (%28, %offs) : tile<128xptr<f32>>
            %30 = splat (%i) : tile<128xi32>
            %31 = binary {kind = "add"} (%30, %offs) : tile<128xi32>
            %32 = splat (%n) : tile<128xi32>
            %33 = compare {pred = "lt"} (%31, %32) : tile<128xi1>
            %acc_3 = binary {kind = "add"} (%acc_2, %14) : tile<128xf32>
            yield ([%acc_3, %26])
          }
          %34 = splat (%out_ptr) : tile<128xptr<f32>>
          %35 = addptr (%34, %offs) : tile<128xptr<f32>>
          store (%35, %acc_1, none)
        }
"""


MATMUL_PIPELINED = """
        kernel @mm(%a_ptr: ptr<f16> {divisibility = 16}, %b_ptr: ptr<f16> {divisibility = 16}, %c_ptr: ptr<f32> {divisibility = 16}, %K: i32 {divisibility = 16}) {
          %rm = arange {start = 0, end = 32} : tile<32xi32>
          %rk = arange {start = 0, end = 16} : tile<16xi32>
          %0 = expand_dims {axis = 1} (%rm) : tile<32x1xi32>
          %1 = constant {value = 16} : i32
          %2 = constant {value = 16} : tile<32x1xi32>
          %3 = binary {kind = "mul"} (%0, %2) : tile<32x1xi32>
          %4 = splat (%a_ptr) : tile<32x1xptr<f16>>
          %5 = addptr (%4, %3) : tile<32x1xptr<f16>>
          %6 = expand_dims {axis = 0} (%rk) : tile<1x16xi32>
          %7 = broadcast (%5) : tile<32x16xptr<f16>>
          %8 = broadcast (%6) : tile<32x16xi32>
          %a_ptrs = addptr (%7, %8) : tile<32x16xptr<f16>>
          %9 = expand_dims {axis = 1} (%rk) : tile<16x1xi32>
          %10 = constant {value = 32} : tile<16x1xi32>
          %11 = binary {kind = "mul"} (%9, %10) : tile<16x1xi32>
          %12 = splat (%b_ptr) : tile<16x1xptr<f16>>
          %13 = addptr (%12, %11) : tile<16x1xptr<f16>>
          %14 = expand_dims {axis = 0} (%rm) : tile<1x32xi32>
          %15 = broadcast (%13) : tile<16x32xptr<f16>>
          %16 = broadcast (%14) : tile<16x32xi32>
          %b_ptrs = addptr (%15, %16) : tile<16x32xptr<f16>>
          %acc = constant {value = 0.0} : tile<32x32xf32>
          %17 = constant {value = 0} : i32
          %18 = shared_alloc : shared<3x32x16xf16, row 24>
          %19 = shared_alloc : shared<3x16x32xf16, row 40>
          %20 = constant {value = 0} : i32
          %21 = binary {kind = "mul"} (%20, %1) : i32
          %22 = binary {kind = "add"} (%17, %21) : i32
          %23 = compare {pred = "lt"} (%22, %K) : i1
          %24 = constant {value = 0} : i32
          %25 = splat (%23) : tile<32x16xi1>
          async_copy (%18, %24, %a_ptrs, %25)
          %26 = splat (%23) : tile<16x32xi1>
          async_copy (%19, %24, %b_ptrs, %26)
          async_commit
          %27 = constant {value = 1} : i32
          %28 = binary {kind = "mul"} (%27, %1) : i32
          %29 = binary {kind = "add"} (%17, %28) : i32
          %30 = compare {pred = "lt"} (%29, %K) : i1
          %31 = constant {value = 16} : tile<32x16xi32>
          %32 = constant {value = 1} : tile<32x16xi32>
          %33 = binary {kind = "mul"} (%32, %31) : tile<32x16xi32>
          %34 = addptr (%a_ptrs, %33) : tile<32x16xptr<f16>>
          %35 = constant {value = 512} : tile<16x32xi32>
          %36 = constant {value = 1} : tile<16x32xi32>
          %37 = binary {kind = "mul"} (%36, %35) : tile<16x32xi32>
          %38 = addptr (%b_ptrs, %37) : tile<16x32xptr<f16>>
          %39 = constant {value = 1} : i32
          %40 = splat (%30) : tile<32x16xi1>
          async_copy (%18, %39, %34, %40)
          %41 = splat (%30) : tile<16x32xi1>
          async_copy (%19, %39, %38, %41)
          async_commit
          %42 = constant {value = 0} : i32
          %43 = constant {value = 2} : i32
          %acc_1, %a_ptrs_1, %b_ptrs_1, %44, %45 = for (%17, %K, %1, [%acc, %a_ptrs, %b_ptrs, %42, %43]) : tile<32x32xf32>, tile<32x16xptr<f16>>, tile<16x32xptr<f16>>, i32, i32 {
          ^(%k: i32, %acc_2: tile<32x32xf32>, %a_ptrs_2: tile<32x16xptr<f16>>, %b_ptrs_2: tile<16x32xptr<f16>>, %slot: i32, %next_slot: i32):
            async_wait {pending = 1}
            %46 = constant {value = 2} : i32
            %47 = binary {kind = "mul"} (%46, %1) : i32
            %48 = binary {kind = "add"} (%k, %47) : i32
            %49 = compare {pred = "lt"} (%48, %K) : i1
            %50 = constant {value = 16} : tile<32x16xi32>
            %51 = constant {value = 2} : tile<32x16xi32>
            %52 = binary {kind = "mul"} (%51, %50) : tile<32x16xi32>
            %53 = addptr (%a_ptrs_2, %52) : tile<32x16xptr<f16>>
            %54 = constant {value = 512} : tile<16x32xi32>
            %55 = constant {value = 2} : tile<16x32xi32>
            %56 = binary {kind = "mul"} (%55, %54) : tile<16x32xi32>
            %57 = addptr (%b_ptrs_2, %56) : tile<16x32xptr<f16>>
            %58 = splat (%49) : tile<32x16xi1>
            async_copy (%18, %next_slot, %53, %58)
            %59 = splat (%49) : tile<16x32xi1>
            async_copy (%19, %next_slot, %57, %59)
            async_commit
            %60 = shared_load (%18, %slot) : tile<32x16xf16>
            %61 = shared_load (%19, %slot) : tile<16x32xf16>
            %62 = dot (%60, %61, %acc) : tile<32x32xf32>
            %acc_3 = binary {kind = "add"} (%acc_2, %62) : tile<32x32xf32>
            %63 = constant {value = 16} : tile<32x16xi32>
            %a_ptrs_3 = addptr (%a_ptrs_2, %63) : tile<32x16xptr<f16>>
            %64 = constant {value = 512} : tile<16x32xi32>
            %b_ptrs_3 = addptr (%b_ptrs_2, %64) : tile<16x32xptr<f16>>
            %65 = constant {value = 1} : i32
            %66 = constant {value = 3} : i32
            %67 = constant {value = 0} : i32
            %68 = binary {kind = "add"} (%slot, %65) : i32
            %69 = compare {pred = "eq"} (%68, %66) : i1
            %70 = select (%69, %67, %68) : i32
            %71 = binary {kind = "add"} (%next_slot, %65) : i32
            %72 = compare {pred = "eq"} (%71, %66) : i1
            %73 = select (%72, %67, %71) : i32
            yield ([%acc_3, %a_ptrs_3, %b_ptrs_3, %70, %73])
          }
          async_wait
          %74 = constant {value = 32} : tile<32x1xi32>
          %75 = binary {kind = "mul"} (%0, %74) : tile<32x1xi32>
          %76 = splat (%c_ptr) : tile<32x1xptr<f32>>
          %77 = addptr (%76, %75) : tile<32x1xptr<f32>>
          %78 = broadcast (%77) : tile<32x32xptr<f32>>
          %79 = broadcast (%14) : tile<32x32xi32>
          %80 = addptr (%78, %79) : tile<32x32xptr<f32>>
          store (%80, %acc_1, none)
        }
"""


def test_loop_loads_are_prefetched_one_iteration_ahead():
    """Iteration 0's load moves before the loop (masked off when the loop runs zero times),
    the body loads iteration i + 1's tile first and carries it to the next iteration."""
    count = check(lambda m: pipeline_loops(m.kernel), ROWSUM, ROWSUM_PREFETCHED)
    assert count == 1


def test_a_loop_with_a_store_is_left_alone():
    """A prefetched read could miss a store of the same iteration."""
    with_store = ir(ROWSUM).replace("    yield ([%acc_3])",
                                    "    store (%4, %acc_3, %8)\n    yield ([%acc_3])")
    assert with_store != ir(ROWSUM)
    assert check(lambda m: pipeline_loops(m.kernel), with_store, with_store) == 0


def test_a_power_of_two_of_slots_takes_remainders_of_one_counter():
    """Four slots: both slot indices are remainders (masks) of one carried iteration counter,
    not slots carried and wrapped one by one (measured faster there; the wrapped form pays
    where a remainder would be a multiply-high chain)."""
    module = parse_module(ir(MATMUL_LOOP))
    assert pipeline_dot_operands(module.kernel, 4, lambda dot: True, 1 << 20) == 2
    verify_module(module)
    text = print_module(module)
    assert "%stage: i32" in text and "%next_slot" not in text and "select" not in text
    assert re.search(r'%(\d+) = constant \{value = 4\} : i32\n\s*%\d+ = binary \{kind = "rem"\} \(%stage, %\1\)',
                     text)


def test_dot_operands_go_through_three_stage_shared_buffers():
    """Two iterations' copies are in flight before the loop; each iteration waits for its
    own slot (``slot``, carried from 0 and wrapped at 3), starts the copies of iteration
    k + 2 into ``next_slot`` (carried from 2) from pointers advanced twice, and the dot reads
    its operands in place; everything is drained after the loop."""
    count = check(lambda m: pipeline_dot_operands(m.kernel, 3, lambda dot: True, 1 << 20),
                  MATMUL_LOOP, MATMUL_PIPELINED)
    assert count == 2


def test_stages_shrink_to_fit_shared_memory():
    """32x16 and 16x32 f16 slots (rows padded to 24 and 40 elements) take 2,816 bytes a
    stage: under 3 stages' worth, the pipeline keeps 2."""
    module = parse_module(ir(MATMUL_LOOP))
    assert pipeline_dot_operands(module.kernel, 3, lambda dot: True, 3 * 2816 - 1) == 2
    assert re.findall(r"shared<(\d)x", str(module)) == ["2", "2"]
    assert "async_wait {pending = 0}" not in str(module)   # the printer omits the default
    assert str(module).count("async_wait") == 2


def test_a_transposed_load_reaches_the_pipeline_as_a_read_along_columns():
    """``tl.trans(tl.load(k_rows))`` feeding a dot (attention's K as Triton's tutorial reads
    it): ``load_transposed`` turns it into a load of the transposed pointers, which the
    pipeline copies into a column-major slot instead of transposing it in registers every
    iteration; the result is the same on the simulator."""
    import numpy as np

    import anytile as at
    from anytile.codegen.gpu.simulator import simulate_kernel
    from kernels_for_pipelines import rows_transposed_matmul

    sig = {"a_ptr": "*fp16:16", "bt_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32:16"}
    compiled = at.compile(rows_transposed_matmul, target="nvidia:sm_80", signature=sig,
                          constexprs={"BM": 32, "BN": 32, "BK": 32}, num_stages=3)
    assert compiled.metadata["pipelined_dot_operands"] == 2
    assert re.search(r"shared<3x32x32xf16, col \d+>", compiled.asm["laid-out ir"])
    assert not re.search(r"permute .*xf16,", compiled.asm["laid-out ir"])    # pointers only
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 96)).astype(np.float16)
    bt = rng.standard_normal((32, 96)).astype(np.float16)          # B^T: N rows of K
    c = np.zeros((32, 32), np.float32)
    simulate_kernel(compiled.module, (1,), [a, bt, c, 96], num_warps=4)
    np.testing.assert_allclose(c, a.astype(np.float64) @ bt.astype(np.float64).T, rtol=1e-2, atol=1e-2)


def test_block_pointers_advanced_each_step_are_pipelined():
    """``tl.advance`` carries a block pointer's offsets through the loop as integers moved
    by a constant each step (and its base, shape and strides unchanged): the pipeline
    computes them iterations ahead, as it does pointer tiles advanced in place."""
    import numpy as np

    import anytile as at
    from anytile.codegen.gpu.simulator import simulate_kernel
    from kernels_for_pipelines import block_pointer_matmul

    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "M": "i32", "N": "i32",
           "K": "i32"}
    compiled = at.compile(block_pointer_matmul, target="nvidia:sm_80", signature=sig,
                          constexprs={"BM": 32, "BN": 32, "BK": 16}, num_stages=3)
    assert compiled.metadata["pipelined_dot_operands"] == 2
    rng = np.random.default_rng(1)
    M, N, K = 40, 48, 72                  # partial blocks on every edge
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    simulate_kernel(compiled.module, (2, 2), [a, b, c, M, N, K], num_warps=4)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2, atol=1e-2)
