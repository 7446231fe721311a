"""Laid-out IR has a text form that parses back: each layout and shared-memory type alone,
and the ``laid-out ir`` of whole kernels compiled for NVIDIA (no GPU needed)."""
from __future__ import annotations

import pytest
from anytile_conformance.catalogue import kernels as catalogue

import anytile as at
import anytile.language as tl
from anytile.codegen.gpu.layouts import BlockedLayout, SliceLayout
from anytile.codegen.gpu.shared_ops import PaddedRows, SharedBufferType, SharedLayout
from anytile.ir.parser import IRParseError, parse_module
from anytile.ir.printer import print_module
from anytile.ir.types import TileType, f16, f32, parse_type
from anytile.ir.verifier import verify_module

from gpu_kit import ir

BLOCKED = BlockedLayout((1, 4), (8, 4), (4, 1), (1, 0))


@pytest.mark.parametrize("t", [
    TileType((64, 32), f32, BLOCKED),
    TileType((64,), f32, SliceLayout(BLOCKED, 1)),
    TileType((8,), f16, SliceLayout(SliceLayout(BlockedLayout((1, 1, 4), (2, 4, 4), (4, 1, 1),
                                                              (2, 1, 0)), 0), 1)),
    TileType((32, 16), f16, SharedLayout(PaddedRows(24))),
    SharedBufferType((32, 16), f16, 3, PaddedRows(24)),
], ids=str)
def test_each_layout_and_shared_type_parses_back(t):
    assert parse_type(str(t)) == t


def test_a_backends_buffer_layouts_parse_back():
    """Layouts a backend's dot strategy adds (NVIDIA's warpgroup operands) register their text."""
    warpgroup = pytest.importorskip("anytile_nvidia.warpgroup")
    for t in (SharedBufferType((64, 32), f16, 2, warpgroup.SwizzledPanels(64, 8)),
              SharedBufferType((32, 64), f16, 4, warpgroup.SwizzledPanels(128))):
        assert parse_type(str(t)) == t


@pytest.mark.parametrize("text,problem", [
    ("tile<8xf32, #cyclic<2>>", "unknown layout #cyclic (known: #blocked, "),
    ("tile<8xf32, #blocked<spt=[1], tpw=[32], wpc=[4]>>", "expected spt=..., tpw=..., wpc=..., order=..."),
    ("tile<8xf32, #blocked<spt=[1,1], tpw=[32], wpc=[4], order=[0]>>", "inconsistent #blocked"),
    ("tile<8xf32, #slice<dim=1, parent=#blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>>",
     "dim 1 is not a dimension of its parent"),
    ("shared<2x32x16xf16, row>", "malformed buffer layout 'row': expected 'row R'"),
    ("shared<2x32x16xf16>", "malformed shared buffer type"),
    ("shared<2x32x16xf16, swizzled 128>", "unknown shared buffer layout 'swizzled 128' (known: col, row"),
    ("tile<8xf32, #shared<rows 4>>", "unknown shared buffer layout 'rows 4'"),
])
def test_malformed_layouts_name_the_problem(text, problem):
    with pytest.raises(IRParseError) as info:
        parse_module(ir(f"""
            kernel @k(%x: {text}) {{
            }}
        """))
    assert problem in str(info.value) and info.value.line == 1


@at.jit
def rows_minus_max(x_ptr, out_ptr, n_cols, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    offs = rows[:, None] * n_cols + tl.arange(0, COLS)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x - tl.max(x, axis=1)[:, None])


def _laid_out(fn, signature, constexprs, **options):
    pytest.importorskip("anytile_nvidia")
    compiled = at.compile(fn, target="nvidia:sm_90", signature=signature, constexprs=constexprs,
                          **options)
    return compiled.asm["laid-out ir"]


_MATMUL_SIGNATURE = {"a_ptr": "*fp16", "b_ptr": "*fp16", "bias_ptr": "*fp32", "c_ptr": "*fp16",
                     **{k: "i32" for k in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                                           "stride_bn", "stride_cm")}}
_MATMUL_CONSTEXPRS = {"ACTIVATION": "relu", "BM": 64, "BN": 64, "BK": 32, "GROUP_M": 2}


@pytest.mark.parametrize("name,fn,signature,constexprs,options,shows", [
    ("vector add", catalogue.vector_add_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16",
                                   "out_ptr": "*fp32:16", "n": "i32:16"}, {"BLOCK": 1024}, {},
     ["#blocked<spt=[4]"]),
    ("softmax", catalogue.softmax_kernel, {"out_ptr": "*fp32:16", "in_ptr": "*fp32:16",
                                           "in_row_stride": "i32:16", "out_row_stride": "i32:16",
                                           "n_cols": "i32"}, {"BLOCK": 1024}, {}, ["reduce"]),
    ("matmul on mma.sync", catalogue.matmul_kernel, _MATMUL_SIGNATURE, _MATMUL_CONSTEXPRS,
     {"wgmma": False}, ["shared_alloc : shared<3x64x32xf16, row 40>", "#shared<row 40>", "async_wait"]),
    ("matmul on warpgroup MMA", catalogue.matmul_kernel, _MATMUL_SIGNATURE,
     _MATMUL_CONSTEXPRS, {}, ["swizzle 64 warps 4 in-flight 1", "swizzle 128 in-flight 1>"]),
    ("row maxima", rows_minus_max, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16",
                                    "n_cols": "i32:16"}, {"ROWS": 8, "COLS": 128}, {},
     ["#slice<dim=1, parent=#blocked<spt=[1,4]"]),
    ("transpose", catalogue.transpose_kernel, {"src": "*i16", "dst": "*i16", "m": "i32", "n": "i32"},
     {"BM": 16, "BN": 32}, {}, ["permute"]),
])
def test_laid_out_ir_of_whole_kernels_parses_back(name, fn, signature, constexprs, options,
                                                  shows):
    text = _laid_out(fn, signature, constexprs, **options)
    for fragment in shows:
        assert fragment in text
    module = parse_module(text)
    verify_module(module)
    assert print_module(module) == text
