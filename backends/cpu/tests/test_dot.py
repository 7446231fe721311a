"""``dot`` on the cpu backend: f32, f64, f16 and bf16 inputs with f32 accumulation, and
int8 inputs accumulating exactly in int32."""
import ml_dtypes
import numpy as np
import pytest

from anytile.ir import DotOp
from anytile.ir.types import TileType, bf16, f16, f32, f64, i8, i32

from cpu_kit import KernelBuilder, poisoned, ptr, run_cpu


def _dot_module(m, n, k, in_elem, acc_elem):
    kb = KernelBuilder([("a", ptr(in_elem)), ("b", ptr(in_elem)), ("c", ptr(acc_elem)),
                        ("out", ptr(acc_elem))])
    a = kb.load(kb.ptrs(kb.arg("a"), kb.offsets_2d(m, k, kb.const(k, i32))))
    b = kb.load(kb.ptrs(kb.arg("b"), kb.offsets_2d(k, n, kb.const(n, i32))))
    c_offs = kb.offsets_2d(m, n, kb.const(n, i32))
    c = kb.load(kb.ptrs(kb.arg("c"), c_offs))
    r = kb.v(DotOp, a, b, c)
    kb.store(kb.ptrs(kb.arg("out"), c_offs), r)
    return kb.module


SHAPES = [(16, 16, 16), (32, 64, 16), (64, 32, 8), (4, 8, 32), (2, 48, 3)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("in_name", ["f32", "f16", "bf16", "f64"])
def test_float_dot(rng, m, n, k, in_name):
    in_elem = {"f32": f32, "f16": f16, "bf16": bf16, "f64": f64}[in_name]
    acc_elem = f64 if in_name == "f64" else f32
    a = rng.standard_normal((m, k)).astype(in_elem.np)
    b = rng.standard_normal((k, n)).astype(in_elem.np)
    c = rng.standard_normal((m, n)).astype(acc_elem.np)
    out = poisoned((m, n), acc_elem.np)
    run_cpu(_dot_module(m, n, k, in_elem, acc_elem), 1, a, b, c, out)
    want = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-12 if in_name == "f64" else 2e-5
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_int8_dot_accumulates_in_int32(rng, m, n, k):
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    out = poisoned((m, n), np.int32)
    run_cpu(_dot_module(m, n, k, i8, i32), 1, a, b, c, out)
    np.testing.assert_array_equal(out, c + a.astype(np.int32) @ b.astype(np.int32))
