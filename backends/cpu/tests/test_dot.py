"""``dot`` on the cpu backend: f32, f64, f16 and bf16 inputs with f32 accumulation, and
int8 inputs accumulating exactly in int32."""
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


@pytest.fixture
def any_shape(monkeypatch):
    """(2, 48, 3) is built by hand to show the cpu dot handles any shape, though the language
    only makes tiles of power-of-2 sizes: the verifier refuses its 3-element ``arange``."""
    def allow(*dims: int) -> None:
        if any(d & (d - 1) for d in dims):
            monkeypatch.setenv("ANYTILE_VERIFY", "0")
    return allow


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("in_name", ["f32", "f16", "bf16", "f64"])
def test_float_dot(rng, any_shape, m, n, k, in_name):
    any_shape(m, n, k)
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
def test_int8_dot_accumulates_in_int32(rng, any_shape, m, n, k):
    any_shape(m, n, k)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    out = poisoned((m, n), np.int32)
    run_cpu(_dot_module(m, n, k, i8, i32), 1, a, b, c, out)
    np.testing.assert_array_equal(out, c + a.astype(np.int32) @ b.astype(np.int32))


def test_acc_plus_dot_of_zeros_is_folded_and_exact(rng):
    """``c + dot(a, b, 0)`` (what ``acc += tl.dot(a, b)`` becomes) accumulates onto c."""
    m = n = k = 16
    kb = KernelBuilder([("a", ptr(f32)), ("b", ptr(f32)), ("c", ptr(f32)), ("out", ptr(f32))])
    a = kb.load(kb.ptrs(kb.arg("a"), kb.offsets_2d(m, k, kb.const(k, i32))))
    b = kb.load(kb.ptrs(kb.arg("b"), kb.offsets_2d(k, n, kb.const(n, i32))))
    offs = kb.offsets_2d(m, n, kb.const(n, i32))
    c = kb.load(kb.ptrs(kb.arg("c"), offs))
    zeros = kb.const(0.0, TileType((m, n), f32))
    d = kb.v(DotOp, a, b, zeros)
    kb.store(kb.ptrs(kb.arg("out"), offs), kb.binary("add", c, d))
    from anytile_cpu.lowering.plan import FusionPlan
    assert FusionPlan(kb.fn).dot_accumulates
    a_np = rng.integers(-4, 4, (m, k)).astype(np.float32)   # exact in any summation order
    b_np = rng.integers(-4, 4, (k, n)).astype(np.float32)
    c_np = rng.integers(-100, 100, (m, n)).astype(np.float32)
    out = poisoned((m, n), np.float32)
    run_cpu(kb.module, 1, a_np, b_np, c_np, out)
    np.testing.assert_array_equal(out, c_np + a_np @ b_np)


@pytest.mark.parametrize("acc_also_read", [False, True])
def test_loop_carried_accumulator(rng, acc_also_read):
    """for k-blocks: acc = acc + dot(a_k, b_k, 0); with ``acc_also_read`` the loop also reads
    the old acc (so the dot must not overwrite it in place)."""
    m = n = 32
    bk, kt = 8, 4
    kb = KernelBuilder([("a", ptr(f32)), ("b", ptr(f32)), ("out", ptr(f32)), ("old", ptr(f32))])
    offs_c = kb.offsets_2d(m, n, kb.const(n, i32))

    def body(k, acc):
        a_offs = kb.binary("add", kb.offsets_2d(m, bk, kb.const(bk * kt, i32)),
                           kb.splat(kb.binary("mul", k, kb.const(bk, i32)), (m, bk)))
        b_offs = kb.binary("add", kb.offsets_2d(bk, n, kb.const(n, i32)),
                           kb.splat(kb.binary("mul", k, kb.const(bk * n, i32)), (bk, n)))
        a = kb.load(kb.ptrs(kb.arg("a"), a_offs))
        b = kb.load(kb.ptrs(kb.arg("b"), b_offs))
        d = kb.v(DotOp, a, b, kb.const(0.0, TileType((m, n), f32)))
        new = kb.binary("add", acc, d)
        if acc_also_read:
            kb.store(kb.ptrs(kb.arg("old"), offs_c), acc)
        return [new]
    zero = kb.const(0.0, TileType((m, n), f32))
    acc, = kb.for_(kb.const(0, i32), kb.const(kt, i32), kb.const(1, i32), [zero], body)
    kb.store(kb.ptrs(kb.arg("out"), offs_c), acc)
    a_np = rng.integers(-4, 4, (m, bk * kt)).astype(np.float32)
    b_np = rng.integers(-4, 4, (bk * kt, n)).astype(np.float32)
    out, old = poisoned((m, n), np.float32), poisoned((m, n), np.float32)
    run_cpu(kb.module, 1, a_np, b_np, out, old)
    np.testing.assert_array_equal(out, a_np @ b_np)
    if acc_also_read:   # the acc before the last step
        np.testing.assert_array_equal(old, a_np[:, :-bk] @ b_np[:-bk])


def _host_has_avx512bf16() -> bool:
    from anytile_cpu import llvm_host
    return "+avx512bf16" in llvm_host.host_info().features.split(",")


@pytest.mark.skipif(not _host_has_avx512bf16(), reason="the host CPU has no AVX-512 BF16")
@pytest.mark.parametrize("m,n,k", [(16, 16, 2), (32, 64, 16), (8, 32, 64)])
def test_bf16_dot_runs_on_vdpbf16ps(rng, m, n, k):
    """bf16 x bf16 -> f32 pairs two k steps per ``vdpbf16ps``: products of bf16 values are
    exact in f32, so the result is within f32 summation error of the float64 product."""
    a = rng.standard_normal((m, k)).astype(bf16.np)
    b = rng.standard_normal((k, n)).astype(bf16.np)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = poisoned((m, n), np.float32)
    compiled = run_cpu(_dot_module(m, n, k, bf16, f32), 1, a, b, c, out)
    assert "vdpbf16ps" in compiled.asm["asm"]
    want = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-4)


def test_bf16_dot_of_odd_depth_or_narrow_columns_keeps_the_fma_loop(rng, any_shape):
    """k = 3 cannot be paired and n = 8 fills no 16-lane vector: the FMA loop remains."""
    any_shape(4, 8, 3)
    a = rng.standard_normal((4, 3)).astype(bf16.np)
    b = rng.standard_normal((3, 8)).astype(bf16.np)
    c = rng.standard_normal((4, 8)).astype(np.float32)
    out = poisoned((4, 8), np.float32)
    compiled = run_cpu(_dot_module(4, 8, 3, bf16, f32), 1, a, b, c, out)
    assert "vdpbf16ps" not in compiled.asm["asm"]
    want = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-4)
