"""Elementwise kernels of the kind training libraries fuse: vector add launched through a
meta-grid, dropout with a precomputed keep mask, gated activations (SiLU, erf GELU and tanh
GELU gates) forward and backward, with int32 or int64 indexing chosen by a constexpr flag, an
argument rebound to int64 inside the kernel, results written back over their own inputs,
fp16 storage with f32 math, and libdevice functions imported by name."""
import math

import numpy as np
import pytest
from anytile_conformance.catalogue.kernels import vector_add_kernel

import anytile as at
import anytile.language as tl
from anytile.language.extra.libdevice import tanh as device_tanh

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
GELU_SCALE: tl.constexpr = SQRT_2_OVER_PI  # an annotated constexpr global, read by kernels
tanh_fn = tl.math.tanh  # a tl function bound to a module global, called from a kernel


def on(device, a):
    return at.asarray(a, device=device)


def test_vector_add_through_a_meta_grid(device, rng, poison):
    n = 98432 // 16
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = on(device, poison(n, np.float32))
    grid = lambda meta: (at.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    vector_add_kernel[grid](on(device, x), on(device, y), out, n, BLOCK=1024)
    np.testing.assert_allclose(out.numpy(), x.astype(np.float64) + y, rtol=1e-6)


@at.jit
def apply_keep_mask(src, keep, dst, n, drop_rate, BLOCK: tl.constexpr):
    lanes = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    valid = lanes < n
    v = tl.load(src + lanes, mask=valid)
    kept = tl.load(keep + lanes, mask=valid)
    # an int32 tile used as the condition, a run-time float in the scale
    tl.store(dst + lanes, tl.where(kept, v / (1 - drop_rate), 0.0), mask=valid)


def test_dropout_with_a_keep_mask(device, rng, poison):
    n, rate = 1500, 0.3
    x = rng.standard_normal(n, dtype=np.float32)
    keep = (rng.random(n) > rate).astype(np.int32)
    out = on(device, poison(n, np.float32))
    grid = lambda meta: (at.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    apply_keep_mask[grid](on(device, x), on(device, keep), out, n, rate, BLOCK=1024)
    np.testing.assert_allclose(out.numpy(), np.where(keep, x.astype(np.float64) / (1 - rate), 0),
                               rtol=1e-6)


# -- gated activations: out = act(gate) * up ---------------------------------------------------
@at.jit
def gated_forward(gate_ptr, up_ptr, out_ptr, n, BLOCK: tl.constexpr, WIDE_INDEX: tl.constexpr,
                  ACT: tl.constexpr):
    if WIDE_INDEX:
        first = tl.program_id(0).to(tl.int64) * BLOCK
        idx = first + tl.arange(0, BLOCK).to(tl.int64)
        n = tl.cast(n, tl.int64)
    else:
        idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = idx < n
    g = tl.load(gate_ptr + idx, mask=inside, other=0).to(tl.float32)
    u = tl.load(up_ptr + idx, mask=inside, other=0)
    if ACT == "silu":
        act = g * tl.sigmoid(g)
    elif ACT == "gelu":
        act = 0.5 * g * (1.0 + tl.math.erf(g * tl.math.rsqrt(2.0)))
    else:
        act = 0.5 * g * (1.0 + tanh_fn(GELU_SCALE * g * (1.0 + 0.044715 * g * g)))
    # the activation is rounded to the storage type before the product, as eager frameworks do
    tl.store(out_ptr + idx, act.to(u.dtype) * u, mask=inside)


def _activation(g, kind):
    if kind == "silu":
        return g / (1 + np.exp(-g))
    if kind == "gelu":
        return 0.5 * g * (1 + np.vectorize(math.erf)(g / math.sqrt(2)))
    return 0.5 * g * (1 + np.tanh(SQRT_2_OVER_PI * (g + 0.044715 * g ** 3)))


@pytest.mark.parametrize("act,dtype,wide", [("silu", np.float32, 0), ("gelu", np.float32, 0),
                                            ("gelu", np.float16, 1), ("gelu_tanh", np.float32, 1),
                                            ("gelu_tanh", np.float16, 0)])
def test_gated_forward(device, rng, poison, act, dtype, wide):
    n = 2500
    gate, up = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    out = on(device, poison(n, dtype))
    grid = lambda meta: (at.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    gated_forward[grid](on(device, gate), on(device, up), out, n, BLOCK=1024, WIDE_INDEX=wide,
                        ACT=act)
    g64 = gate.astype(np.float64)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(out.numpy().astype(np.float64), _activation(g64, act) * up, **tol)


@at.jit
def _span(n, BLOCK: tl.constexpr, WIDE_INDEX: tl.constexpr):
    if WIDE_INDEX:
        idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    return idx, idx < n


@at.jit
def silu_gate_backward(grad_ptr, gate_ptr, up_ptr, n, BLOCK: tl.constexpr,
                       WIDE_INDEX: tl.constexpr):
    # the three inputs are overwritten: grad <- forward output, gate <- d(up), up <- d(gate)
    idx, inside = _span(n, BLOCK, WIDE_INDEX)
    dh = tl.load(grad_ptr + idx, mask=inside, other=0)
    g = tl.load(gate_ptr + idx, mask=inside, other=0).to(tl.float32)
    u = tl.load(up_ptr + idx, mask=inside, other=0)
    sig = tl.sigmoid(g)
    silu = (g * sig).to(dh.dtype)
    d_gate = (dh * u).to(tl.float32) * sig * (1.0 + g * (1.0 - sig))
    tl.store(grad_ptr + idx, silu * u, mask=inside)
    tl.store(gate_ptr + idx, dh * silu, mask=inside)
    tl.store(up_ptr + idx, d_gate.to(dh.dtype), mask=inside)


@pytest.mark.parametrize("wide", [0, 1])
def test_silu_gate_backward_in_place(device, rng, wide):
    n = 3000
    gate, up, dh = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    g64, u64, d64 = (a.astype(np.float64) for a in (gate, up, dh))  # (host arrays may alias)
    G, U, D = on(device, gate), on(device, up), on(device, dh)
    grid = lambda meta: (at.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    silu_gate_backward[grid](D, G, U, n, BLOCK=1024, WIDE_INDEX=wide)
    sig = 1 / (1 + np.exp(-g64))
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(D.numpy(), g64 * sig * u64, **tol)
    np.testing.assert_allclose(G.numpy(), d64 * g64 * sig, **tol)
    np.testing.assert_allclose(U.numpy(), d64 * u64 * sig * (1 + g64 * (1 - sig)), **tol)


# -- tanh-GELU gate over rows, libdevice tanh, backward recomputing the forward ---------------
@at.jit
def _gelu_tanh(a):
    t = device_tanh(GELU_SCALE * (a + 0.044715 * a * a * a))
    return 0.5 * a * (1 + t), t


@at.jit
def geglu_rows_forward(a_ptr, b_ptr, c_ptr, row_stride, n_cols: tl.constexpr,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    a_ptr += row * row_stride
    b_ptr += row * row_stride
    c_ptr += row * row_stride
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    a = tl.load(a_ptr + cols, mask=inside, other=0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=inside, other=0)
    gelu, _ = _gelu_tanh(a)
    tl.store(c_ptr + cols, gelu.cast(b.dtype) * b, mask=inside)


@at.jit
def geglu_rows_backward(dc_ptr, a_ptr, b_ptr, row_stride, n_cols: tl.constexpr,
                        BLOCK: tl.constexpr):
    # gradients go back into a and b
    base = tl.program_id(0).to(tl.int64) * row_stride
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    dc = tl.load(dc_ptr + base + cols, mask=inside, other=0)
    a = tl.load(a_ptr + base + cols, mask=inside, other=0).to(tl.float32)
    b = tl.load(b_ptr + base + cols, mask=inside, other=0)
    gelu, t = _gelu_tanh(a)
    slope = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * GELU_SCALE * (1 + 3 * 0.044715 * a * a)
    tl.store(a_ptr + base + cols, dc * b * slope, mask=inside)
    tl.store(b_ptr + base + cols, (dc.cast(tl.float32) * gelu).to(dc.dtype), mask=inside)


def test_geglu_rows_forward_and_backward(device, rng, poison):
    n_rows, n_cols = 7, 300
    a, b, dc = (rng.standard_normal((n_rows, n_cols)).astype(np.float32) for _ in range(3))
    a64, b64, dc64 = (v.astype(np.float64) for v in (a, b, dc))
    A, B = on(device, a), on(device, b)
    c = on(device, poison((n_rows, n_cols), np.float32))
    block = at.next_power_of_2(n_cols)
    geglu_rows_forward[(n_rows,)](A, B, c, c.stride(0), n_cols=n_cols, BLOCK=block)
    t = np.tanh(SQRT_2_OVER_PI * (a64 + 0.044715 * a64 ** 3))
    gelu = 0.5 * a64 * (1 + t)
    np.testing.assert_allclose(c.numpy(), gelu * b64, rtol=1e-5, atol=1e-6)

    geglu_rows_backward[(n_rows,)](on(device, dc), A, B, n_cols, n_cols=n_cols, BLOCK=block)
    slope = 0.5 * (1 + t) + 0.5 * a64 * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * a64 ** 2)
    np.testing.assert_allclose(A.numpy(), dc64 * b64 * slope, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(B.numpy(), dc64 * gelu, rtol=1e-5, atol=1e-6)
