"""float8 dtypes (``tl.float8e4nv``: OCP e4m3fn, ``tl.float8e5``: e5m2) in the language: their
Triton attributes, signature spellings, the clear error for arithmetic on them, and torch-free
NumPy interop through ml_dtypes.  Their casts and dots are checked bit for bit on every
backend by the conformance families ``casts/float8`` and ``dot/float8_dot``."""
import ml_dtypes
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


def test_triton_attributes_and_names():
    assert (tl.float8e4nv.fp_mantissa_width, tl.float8e4nv.exponent_bias) == (3, 7)
    assert (tl.float8e5.fp_mantissa_width, tl.float8e5.exponent_bias) == (2, 15)
    assert tl.float8e4nv.primitive_bitwidth == 8 and tl.float8e5.is_fp8()
    assert tl.float8e4nv.is_floating() and repr(tl.float8e5) == "tl.float8e5"
    assert tl.dtype("fp8e4nv") == tl.float8e4nv and tl.float16.exponent_bias == 15


@at.jit
def add_float8(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def test_arithmetic_on_float8_says_to_convert_first():
    x = np.zeros(16, ml_dtypes.float8_e5m2)
    with pytest.raises(at.CompilationError, match=r"float8 values .* convert them first"):
        add_float8[(1,)](x, x, x, BLOCK=16, device="interpreter")


@at.jit
def round_to_float8(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(out_ptr.dtype.element_ty))


@pytest.mark.parametrize("fmt", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_numpy_float8_arrays_in_and_out(device, fmt):
    x = np.array([0.1, -3.3, 1000.0, 1e-5, 17.0, -0.0, 240.0, 2.5] * 2, np.float32)
    out = np.zeros(16, fmt)
    round_to_float8[(1,)](at.asarray(x, device=device), out_arr := at.asarray(out, device=device),
                          BLOCK=16)
    want = x.astype(fmt)
    np.testing.assert_array_equal(out_arr.numpy().view(np.uint8), want.view(np.uint8))


def test_signature_spellings():
    k = at.compile(round_to_float8, target="interpreter:reference",
                   signature={"x_ptr": "*fp32", "out_ptr": "*fp8e4nv"}, constexprs={"BLOCK": 16})
    assert "ptr<f8e4m3>" in k.asm["ir"]


_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def _decode(codes, fmt):
    """Reference decoding of a dot_scaled operand (K along the last axis, packed there)."""
    if fmt == "e2m1":
        low, high = _E2M1[codes & 15], _E2M1[codes >> 4]
        return np.stack([low, high], axis=-1).reshape(codes.shape[0], -1)
    ml = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}.get(fmt)
    return codes.view(ml).astype(np.float64) if ml else codes.astype(np.float64)


@at.jit
def scaled_dot_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, out_ptr, M: tl.constexpr,
                      N: tl.constexpr, K: tl.constexpr, FA: tl.constexpr, FB: tl.constexpr):
    KA: tl.constexpr = K // 2 if FA == "e2m1" else K
    KB: tl.constexpr = K // 2 if FB == "e2m1" else K
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * KA + tl.arange(0, KA)[None, :])
    b = tl.load(b_ptr + tl.arange(0, KB)[:, None] * N + tl.arange(0, N)[None, :])
    sa = tl.load(a_scale_ptr + tl.arange(0, M)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    sb = tl.load(b_scale_ptr + tl.arange(0, N)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    c = tl.dot_scaled(a, sa, FA, b, sb, FB)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


@pytest.mark.parametrize("fa, fb", [("e2m1", "e4m3"), ("e5m2", "e2m1"), ("bf16", "e4m3"),
                                    ("fp16", "e5m2")])
def test_dot_scaled_decodes_scales_and_multiplies_exactly(device, fa, fb):
    rng = np.random.default_rng(3)
    m, n, k = 16, 16, 64

    def operand(fmt, rows, cols):         # K along cols; codes avoid inf/NaN
        if fmt in ("bf16", "fp16"):
            dt = ml_dtypes.bfloat16 if fmt == "bf16" else np.float16
            return rng.standard_normal((rows, cols)).astype(dt)
        if fmt == "e2m1":
            return rng.integers(0, 256, (rows, cols // 2)).astype(np.uint8)
        ml = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
        return rng.standard_normal((rows, cols)).astype(ml).view(np.uint8)
    a = operand(fa, m, k)
    bt = operand(fb, n, k)                  # rhs built as [N, K], passed as [K, N]
    b = np.ascontiguousarray(bt.T)          # e2m1: still packed along K, now axis 0
    sa = rng.integers(120, 134, (m, k // 32)).astype(np.uint8)
    sb = rng.integers(120, 134, (n, k // 32)).astype(np.uint8)
    out = at.zeros((m, n), np.float32, device=device)
    scaled_dot_kernel[(1,)](*(at.asarray(x, device=device) for x in (a, sa, b, sb)), out,
                            M=m, N=n, K=k, FA=fa, FB=fb)
    wa = _decode(a, fa) * np.repeat(2.0 ** (sa.astype(np.float64) - 127), 32, axis=1)
    wb = _decode(bt, fb) * np.repeat(2.0 ** (sb.astype(np.float64) - 127), 32, axis=1)
    err = np.abs(out.numpy() - wa @ wb.T)
    assert np.all(err <= 1e-6 * (np.abs(wa) @ np.abs(wb).T)), err.max()
