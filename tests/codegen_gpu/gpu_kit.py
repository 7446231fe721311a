"""Snapshot pairs for the GPU passes: IR text in, expected IR text out (layouts and the
shared-memory dialect included), verified before and after, the expected text parsing back."""
from __future__ import annotations

import textwrap
from typing import Any, Callable

import anytile.codegen.gpu  # noqa: F401 -- registers the GPU layouts' and types' text forms
from anytile.ir.nodes import Module
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import verify_module


def ir(text: str) -> str:
    """``text`` dedented, without the leading newline, ending in one newline."""
    return textwrap.dedent(text).strip("\n") + "\n"


def check(run: Callable[[Module], Any], before: str, after: str) -> Any:
    """``run(module)`` rewrites the module parsed from ``before`` (in place) into exactly
    ``after``; returns what ``run`` returned."""
    module = parse_module(ir(before))
    verify_module(module)
    out = run(module)
    verify_module(module)
    assert print_module(module) == ir(after)
    again = parse_module(ir(after))
    verify_module(again)
    assert print_module(again) == ir(after)
    return out


#: ``acc += dot(load(a_ptrs), load(b_ptrs))`` over K in 16-wide steps, pointers advanced in the
#: loop: 32x16 and 16x32 f16 tiles, f32 accumulator (the input of the layout and the
#: pipelining snapshots)
MATMUL_LOOP = """
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
      %acc_1, %a_ptrs_1, %b_ptrs_1 = for (%17, %K, %1, [%acc, %a_ptrs, %b_ptrs]) : tile<32x32xf32>, tile<32x16xptr<f16>>, tile<16x32xptr<f16>> {
      ^(%k: i32, %acc_2: tile<32x32xf32>, %a_ptrs_2: tile<32x16xptr<f16>>, %b_ptrs_2: tile<16x32xptr<f16>>):
        %18 = load (%a_ptrs_2, none, none) : tile<32x16xf16>
        %19 = load (%b_ptrs_2, none, none) : tile<16x32xf16>
        %20 = dot (%18, %19, %acc) : tile<32x32xf32>
        %acc_3 = binary {kind = "add"} (%acc_2, %20) : tile<32x32xf32>
        %21 = constant {value = 16} : tile<32x16xi32>
        %a_ptrs_3 = addptr (%a_ptrs_2, %21) : tile<32x16xptr<f16>>
        %22 = constant {value = 512} : tile<16x32xi32>
        %b_ptrs_3 = addptr (%b_ptrs_2, %22) : tile<16x32xptr<f16>>
        yield ([%acc_3, %a_ptrs_3, %b_ptrs_3])
      }
      %23 = constant {value = 32} : tile<32x1xi32>
      %24 = binary {kind = "mul"} (%0, %23) : tile<32x1xi32>
      %25 = splat (%c_ptr) : tile<32x1xptr<f32>>
      %26 = addptr (%25, %24) : tile<32x1xptr<f32>>
      %27 = broadcast (%26) : tile<32x32xptr<f32>>
      %28 = broadcast (%14) : tile<32x32xi32>
      %29 = addptr (%27, %28) : tile<32x32xptr<f32>>
      store (%29, %acc_1, none)
    }
"""
