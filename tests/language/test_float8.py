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
