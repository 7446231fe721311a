"""The classic kernels compile to verified IR with the expected ops: the examples users run
(``examples/*.py``, loaded from the checkout) and the conformance catalogue's whole kernels
(``anytile_conformance.catalogue.kernels``), so that no kernel is kept here a second time."""
import importlib.util
from pathlib import Path

import pytest
from anytile_conformance.catalogue import kernels as catalogue

import anytile as at
from anytile.ir import types as T

from fe_kit import compile_ir, kernel_ops, names, of_kind, ptr

F32P = ptr(T.f32)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vector_add():
    m = compile_ir(_example("vector_add").add_kernel, {"BLOCK": 256}, x_ptr=F32P, y_ptr=F32P,
                   out_ptr=F32P, n=T.i32)
    assert names(kernel_ops(m)).count("load") == 2
    (store,) = of_kind(kernel_ops(m), "store")
    assert store.value.type == T.TileType((256,), T.f32) and store.mask is not None


def test_softmax():
    m = compile_ir(_example("softmax").softmax_kernel, {"BLOCK": 128}, out_ptr=F32P,
                   in_ptr=F32P, in_row_stride=T.i32, out_row_stride=T.i32, n_cols=T.i32)
    ops = kernel_ops(m)
    assert [r.combine.ops[0].kind for r in of_kind(ops, "reduce")] == ["max", "add"]
    (load,) = of_kind(ops, "load")
    assert load.other.owner.NAME == "splat" and load.other.owner.src.owner.value == float("-inf")


def test_persistent_softmax():
    m = compile_ir(catalogue.persistent_softmax_kernel, {"BLOCK": 128, "STAGES": 1}, out_ptr=F32P,
                   in_ptr=F32P, n_rows=T.i32, n_cols=T.i32)
    (loop,) = of_kind(kernel_ops(m), "for")
    assert loop.inits == [] and "store" in names(loop.body.ops)


def test_matmul_with_relu():
    strides = ("stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")
    m = compile_ir(_example("matmul").matmul_relu_kernel, {"BLOCK_M": 32, "BLOCK_N": 32,
                   "BLOCK_K": 16}, a_ptr=ptr(T.f16), b_ptr=ptr(T.f16), c_ptr=F32P,
                   **{k: T.i32 for k in ("M", "N", "K") + strides})
    ops = kernel_ops(m)
    (loop,) = of_kind(ops, "for")
    assert [v.type for v in loop.inits] == [T.TileType((32, 32), T.f32)]
    (dot,) = of_kind(ops, "dot")
    assert dot.a.type == T.TileType((32, 16), T.f16) and dot.acc is not None
    (store,) = of_kind(ops, "store")
    assert store.value.owner.NAME == "binary" and store.value.owner.kind == "max"


def test_matmul_epilogue_as_a_dtype_cast():
    m = compile_ir(catalogue.matmul_kernel, {"ACTIVATION": "relu", "BM": 32, "BN": 32,
                   "BK": 16, "GROUP_M": 2}, a_ptr=ptr(T.f16), b_ptr=ptr(T.f16), bias_ptr=F32P,
                   c_ptr=ptr(T.f16), **{k: T.i32 for k in ("M", "N", "K", "stride_am",
                                                           "stride_ak", "stride_bk", "stride_bn",
                                                           "stride_cm")})
    (store,) = of_kind(kernel_ops(m), "store")
    assert store.value.type == T.TileType((32, 32), T.f16)
    assert store.value.owner.NAME == "cast"


def test_layer_norm():
    m = compile_ir(catalogue.layer_norm_kernel, {"BLOCK": 1024}, x_ptr=ptr(T.f16),
                   y_ptr=ptr(T.f16), w_ptr=F32P, b_ptr=F32P, mean_ptr=F32P, rstd_ptr=F32P,
                   stride=T.i32, n=T.i32, eps=T.f32)
    ops = kernel_ops(m)
    assert len(of_kind(ops, "reduce")) == 2
    assert [op.kind for op in of_kind(ops, "unary")] == ["sqrt"]
    assert len(of_kind(ops, "store")) == 3


def test_transpose_on_a_2d_grid():
    m = compile_ir(catalogue.transpose_kernel, {"BM": 32, "BN": 16}, src=F32P, dst=F32P,
                   m=T.i32, n=T.i32)
    ops = kernel_ops(m)
    assert [p.axis for p in of_kind(ops, "program_id")] == [0, 1]
    assert [p.result.type.shape for p in of_kind(ops, "permute")] == [(16, 32), (16, 32)]


def test_atomic_histogram():
    m = compile_ir(catalogue.histogram_kernel, {"BLOCK": 64}, x_ptr=ptr(T.i32),
                   hist_ptr=ptr(T.i32), n=T.i32, bins=T.i32)
    (atomic,) = of_kind(kernel_ops(m), "atomic_rmw")
    assert atomic.kind == "add" and atomic.value.type == T.TileType((64,), T.i32)
    assert atomic.ptr.type == T.TileType((64,), ptr(T.i32))


@pytest.mark.parametrize("name", ["vector_add", "softmax", "layernorm", "matmul"])
def test_example_runs_correctly(name):
    """Each example's own ``check`` on the interpreter (``make demo`` runs them everywhere)."""
    result = _example(name).check(at.device("interpreter"))
    assert result["ok"], result["detail"]
