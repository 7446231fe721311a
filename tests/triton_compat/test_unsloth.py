"""Kernels from Unsloth (github.com/unslothai/unsloth, unsloth/kernels/*.py, Apache-2.0), with
only ``triton.jit`` -> ``at.jit`` changed; kernel bodies are Unsloth's code, verbatim.
``triton.heuristics`` (which only turned flags into bools) is replaced by passing bools."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl

# unsloth/kernels/utils.py picks these for recent Triton versions
triton_tanh = tl.math.tanh
triton_cast = tl.cast


# -- unsloth/kernels/rms_layernorm.py ---------------------------------------------------------
@at.jit
def _rms_layernorm_forward(
    Y,
    Y_row_stride: tl.constexpr,
    X,
    X_row_stride: tl.constexpr,
    W,
    W_row_stride: tl.constexpr,
    r,
    r_row_stride: tl.constexpr,
    n_cols: tl.constexpr,
    eps: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """
    Fast RMS Layernorm kernel
    Inspiration from a Triton tutorial:
    https://triton-lang.org/main/getting-started/tutorials/05-layer-norm.html
    """
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    Y += row_idx * Y_row_stride
    X += row_idx * X_row_stride
    r += row_idx * r_row_stride

    X_row = tl.load(X + col_offsets, mask = mask, other = 0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask = mask, other = 0)  # .to(tl.float32)

    row_var = tl.sum(X_row * X_row, axis = 0) / n_cols
    # Explicit float32 scalar to ensure correct type promotion on HIP/ROCm
    eps_f32 = tl.full((), eps, tl.float32)
    inv_var = tl.math.rsqrt(row_var + eps_f32)
    tl.store(r, inv_var)
    normed = X_row * inv_var
    normed = normed.to(W_row.dtype)  # Exact copy from HF
    output = normed * W_row
    tl.store(Y + col_offsets, output, mask = mask)


def _rms_layernorm_backward(
    dY,
    dY_row_stride: tl.constexpr,
    dX,
    dX_row_stride: tl.constexpr,
    X,
    X_row_stride: tl.constexpr,
    W,
    W_row_stride: tl.constexpr,
    r,
    r_row_stride: tl.constexpr,
    # dW, dW_row_stride,
    n_cols: tl.constexpr,
    eps: tl.constexpr,
    GEMMA: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """
    Fast RMS Layernorm kernel for the backward pass
    Inspiration from a Triton tutorial:
    https://triton-lang.org/main/getting-started/tutorials/05-layer-norm.html
    """
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    dY += row_idx * dY_row_stride
    X += row_idx * X_row_stride
    r += row_idx * r_row_stride

    if GEMMA:
        dX += row_idx * dY_row_stride
    else:
        dX = dY

    dY_row = tl.load(dY + col_offsets, mask = mask, other = 0).to(tl.float32)
    X_row = tl.load(X + col_offsets, mask = mask, other = 0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask = mask, other = 0).to(tl.float32)

    inv_var = tl.load(r).to(tl.float32)
    normed = X_row * inv_var

    if GEMMA:
        dY_W = dY_row * (W_row + 1.0)
    else:
        dY_W = dY_row * W_row

    rowsum_dY_normed = tl.sum(dY_W * normed, axis = 0)
    output = inv_var / n_cols * (n_cols * dY_W - normed * rowsum_dY_normed)
    tl.store(dX + col_offsets, output, mask = mask)


_rms_layernorm_backward = at.jit(_rms_layernorm_backward)


@pytest.mark.parametrize("gemma", [False, True])
def test_rms_layernorm_forward_and_backward(device, rng, poison, gemma):
    n_rows, n_cols, eps = 9, 300, 1e-5
    on = lambda a: at.asarray(a, device=device)  # noqa: E731
    x = rng.standard_normal((n_rows, n_cols), dtype=np.float32)
    w = rng.random(n_cols, dtype=np.float32)
    dy = rng.standard_normal((n_rows, n_cols), dtype=np.float32)
    X, W, dY = on(x), on(w), on(dy.copy())
    Y, r = on(poison((n_rows, n_cols), np.float32)), on(poison(n_rows, np.float32))
    BLOCK_SIZE = at.next_power_of_2(n_cols)
    _rms_layernorm_forward[(n_rows,)](Y, Y.stride(0), X, X.stride(0), W, W.stride(0), r,
                                      r.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE)
    x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    inv = 1 / np.sqrt((x64 * x64).mean(1, keepdims=True) + eps)
    np.testing.assert_allclose(r.numpy(), inv[:, 0], rtol=1e-5)
    np.testing.assert_allclose(Y.numpy(), x64 * inv * w64, rtol=1e-5, atol=1e-6)

    dX = on(poison((n_rows, n_cols), np.float32)) if gemma else dY
    _rms_layernorm_backward[(n_rows,)](dY, dY.stride(0), dX, dX.stride(0), X, X.stride(0), W,
                                       W.stride(0), r, r.stride(0), n_cols, eps, GEMMA=gemma,
                                       BLOCK_SIZE=BLOCK_SIZE)
    wg = w64 + 1.0 if gemma else w64
    normed = x64 * inv
    dyw = dy64 * wg
    ref = inv / n_cols * (n_cols * dyw - normed * (dyw * normed).sum(1, keepdims=True))
    np.testing.assert_allclose(dX.numpy(), ref, rtol=1e-4, atol=1e-5)


# -- unsloth/kernels/swiglu.py ----------------------------------------------------------------
@at.jit
def _fg_kernel(e, g, h, n_elements, BLOCK_SIZE: tl.constexpr, LONG_INDEXING: tl.constexpr):
    block_idx = tl.program_id(0)
    if LONG_INDEXING:
        offsets = block_idx.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE).to(tl.int64)
        n_elements = tl.cast(n_elements, tl.int64)
    else:
        offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements

    e_row = tl.load(e + offsets, mask = mask, other = 0).to(tl.float32)
    g_row = tl.load(g + offsets, mask = mask, other = 0)  # .to(tl.float32)

    f_row = e_row * tl.sigmoid(e_row)  # e_row / (1 + tl.exp(-e_row))
    f_row = f_row.to(g_row.dtype)  # Exact copy from HF
    h_row = f_row * g_row

    tl.store(h + offsets, h_row, mask = mask)


@at.jit
def _DWf_DW_dfg_kernel(DW, e, g, n_elements, BLOCK_SIZE: tl.constexpr, LONG_INDEXING: tl.constexpr):
    """
    e = e.float()
    se = 1.0 / (1.0 + torch.exp(-e))
    f = (se * e).to(dtype)
    h = f * g
    df = DW * f
    dg = DW * g
    de = (dg.float() * se * (1.0 + e * (1.0 - se))).to(dtype)
    """
    block_idx = tl.program_id(0)
    if LONG_INDEXING:
        offsets = block_idx.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE).to(tl.int64)
        n_elements = tl.cast(n_elements, tl.int64)
    else:
        offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements

    DW_row = tl.load(DW + offsets, mask = mask, other = 0)  # .to(tl.float32)
    e_row = tl.load(e + offsets, mask = mask, other = 0).to(tl.float32)
    g_row = tl.load(g + offsets, mask = mask, other = 0)  # .to(tl.float32)

    se_row = tl.sigmoid(e_row)  # 1.0 / (1.0 + tl.exp(-e_row))
    f_row = se_row * e_row
    f_row = f_row.to(DW_row.dtype)
    h_row = f_row * g_row
    df_row = DW_row * f_row
    dg_row = DW_row * g_row
    # de = (dg.float() * se * (1.0 + e * (1.0 - se))).to(dtype)
    de_row = dg_row.to(tl.float32) * se_row * (1.0 + e_row * (1.0 - se_row))
    de_row = de_row.to(DW_row.dtype)

    # Reuse input buffers to store outputs h, df, de
    tl.store(DW + offsets, h_row, mask = mask)  # h  = f * g
    tl.store(e + offsets, df_row, mask = mask)  # df = DW * f
    tl.store(g + offsets, de_row, mask = mask)  # de


@pytest.mark.parametrize("long_indexing", [0, 1])
def test_swiglu_forward_and_backward(device, rng, poison, long_indexing):
    n = 3000
    on = lambda a: at.asarray(a, device=device)  # noqa: E731
    e, g, dw = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    h = on(poison(n, np.float32))
    grid = lambda meta: (at.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    _fg_kernel[grid](on(e), on(g), h, n, BLOCK_SIZE=1024, LONG_INDEXING=long_indexing)
    e64, g64, dw64 = e.astype(np.float64), g.astype(np.float64), dw.astype(np.float64)
    se = 1 / (1 + np.exp(-e64))
    np.testing.assert_allclose(h.numpy(), e64 * se * g64, rtol=1e-5, atol=1e-6)

    DW, E, G = on(dw), on(e), on(g)
    _DWf_DW_dfg_kernel[grid](DW, E, G, n, BLOCK_SIZE=1024, LONG_INDEXING=long_indexing)
    np.testing.assert_allclose(DW.numpy(), e64 * se * g64, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(E.numpy(), dw64 * e64 * se, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(G.numpy(), dw64 * g64 * se * (1 + e64 * (1 - se)),
                               rtol=1e-5, atol=1e-6)


# -- unsloth/kernels/geglu.py -----------------------------------------------------------------
@at.jit
def _exact_forward_kernel(
    e, g, h, n_elements, BLOCK_SIZE: tl.constexpr, LONG_INDEXING: tl.constexpr
):
    block_idx = tl.program_id(0)
    if LONG_INDEXING:
        offsets = block_idx.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE).to(tl.int64)
        n_elements = tl.cast(n_elements, tl.int64)
    else:
        offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements

    # f = 1/2 * e * (1 + erf(1/sqrt(2) * e))
    # h = f * up
    e_row = tl.load(e + offsets, mask = mask, other = 0).to(tl.float32)
    g_row = tl.load(g + offsets, mask = mask, other = 0)  # .to(tl.float32)

    f_row = 0.5 * e_row * (tl.math.erf(tl.math.rsqrt(2.0) * e_row) + 1.0)
    f_row = f_row.to(g_row.dtype)  # Exact copy from HF
    h_row = f_row * g_row

    tl.store(h + offsets, h_row, mask = mask)


@at.jit
def _approx_forward_kernel(
    e, g, h, n_elements, BLOCK_SIZE: tl.constexpr, LONG_INDEXING: tl.constexpr
):
    block_idx = tl.program_id(0)
    if LONG_INDEXING:
        offsets = block_idx.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE).to(tl.int64)
        n_elements = tl.cast(n_elements, tl.int64)
    else:
        offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements

    # f = 1/2 * e * (1 + tanh( sqrt(2/pi) * (x + 0.044715 * x^3 ) ))
    # f = 1/2 * e * (1 + tanh( sqrt(2/pi) * x * (1 + 0.044715 * x^2 ) ))
    # h = f * up
    s = 0.7978845608028654  # math.sqrt(2 / math.pi)

    e_row = tl.load(e + offsets, mask = mask, other = 0).to(tl.float32)
    g_row = tl.load(g + offsets, mask = mask, other = 0)  # .to(tl.float32)

    f_row = 0.5 * e_row * (triton_tanh(s * e_row * (1.0 + 0.044715 * e_row * e_row)) + 1.0)
    f_row = f_row.to(g_row.dtype)  # Exact copy from HF
    h_row = f_row * g_row

    tl.store(h + offsets, h_row, mask = mask)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_geglu_forward(device, rng, poison, dtype):
    import math
    n = 2500
    on = lambda a: at.asarray(a, device=device)  # noqa: E731
    e, g = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    e64, g64 = e.astype(np.float64), g.astype(np.float64)
    grid = lambda meta: (at.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=2e-3, atol=2e-3)

    h = on(poison(n, dtype))
    _exact_forward_kernel[grid](on(e), on(g), h, n, BLOCK_SIZE=1024, LONG_INDEXING=0)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(h.numpy().astype(np.float64),
                               0.5 * e64 * (1 + erf(e64 / math.sqrt(2))) * g64, **tol)

    h = on(poison(n, dtype))
    _approx_forward_kernel[grid](on(e), on(g), h, n, BLOCK_SIZE=1024, LONG_INDEXING=1)
    s = math.sqrt(2 / math.pi)
    np.testing.assert_allclose(h.numpy().astype(np.float64),
                               0.5 * e64 * (1 + np.tanh(s * e64 * (1 + 0.044715 * e64 * e64))) * g64,
                               **tol)


# -- unsloth/kernels/cross_entropy_loss.py ----------------------------------------------------
def _cross_entropy_forward(
    logits_ptr,
    logits_row_stride,
    loss_ptr,
    logsumexp_ptr,
    labels_ptr,
    VOCAB_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    DO_SOFTCAPPING: tl.constexpr,
    SOFTCAP: tl.constexpr,
    DO_LOGIT_SCALING: tl.constexpr,
    LOGIT_SCALE: tl.constexpr,
):
    row_idx = tl.program_id(0)
    logits_ptr += row_idx * triton_cast(logits_row_stride, tl.int64)
    loss_ptr += row_idx
    logsumexp_ptr += row_idx
    labels_ptr += row_idx

    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < VOCAB_SIZE

    label_idx = tl.load(labels_ptr).to(tl.int32)
    logits = tl.load(logits_ptr + col_offsets, mask = mask, other = -float("inf")).to(tl.float32)

    # Go logit scaling for Cohere: t * x
    if DO_LOGIT_SCALING:
        logits = LOGIT_SCALE * logits
    # Do logit softcapping for Gemma 2: t * tanh(1/t * x)
    if DO_SOFTCAPPING:
        logits = SOFTCAP * triton_tanh(logits / SOFTCAP)

    c = tl.max(logits, 0)
    logsumexp = c + tl.log(tl.sum(tl.exp(logits - c), 0))

    if label_idx != -100:
        x = tl.load(logits_ptr + label_idx).to(tl.float32)
        # Go logit scaling for Cohere: t * x
        if DO_LOGIT_SCALING:
            x = LOGIT_SCALE * x
        # Do logit softcapping for Gemma 2: t * tanh(1/t * x)
        if DO_SOFTCAPPING:
            x = SOFTCAP * triton_tanh(x / SOFTCAP)
        loss = logsumexp - x
    else:
        loss = 0.0
    tl.store(logsumexp_ptr, logsumexp)
    tl.store(loss_ptr, loss)


_cross_entropy_forward = at.jit(_cross_entropy_forward)


def _cross_entropy_backward(
    logits_ptr,
    logits_row_stride: tl.constexpr,
    dloss_ptr,
    dloss_row_stride: tl.constexpr,
    logsumexp_ptr,
    labels_ptr,
    VOCAB_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    DO_SOFTCAPPING: tl.constexpr,
    SOFTCAP: tl.constexpr,
    DO_LOGIT_SCALING: tl.constexpr,
    LOGIT_SCALE: tl.constexpr,
):
    row_idx = tl.program_id(0)
    block_idx = tl.program_id(1)

    logits_ptr += row_idx * triton_cast(logits_row_stride, tl.int64)
    dloss_ptr += row_idx * dloss_row_stride
    col_offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < VOCAB_SIZE
    label_idx = tl.load(labels_ptr + row_idx).to(tl.int32)

    if label_idx != -100:
        dloss = tl.load(dloss_ptr)
    else:
        dloss = 0.0

    x = tl.load(logits_ptr + col_offsets, mask = mask, other = -float("inf")).to(tl.float32)

    # Do logit scaling for Cohere
    if DO_LOGIT_SCALING:
        # d/dx [s * x] = s
        x = x * LOGIT_SCALE

    # Do logit softcapping for Gemma 2: t * tanh(1/t * x)
    partial = x
    if DO_SOFTCAPPING:
        # d/dx [t * tanh(1/t * x)] = 1 - tanh^2(1/t * x)
        partial = triton_tanh(x / SOFTCAP)
        x = SOFTCAP * partial

    logsumexp = tl.load(logsumexp_ptr + row_idx)
    y = tl.exp(x - logsumexp)
    y = tl.where(
        col_offsets == label_idx,
        y - 1.0,  # exp(x - logsumexp) - 1
        y,  # exp(x - logsumexp)
    )

    if DO_LOGIT_SCALING:
        # d/dx [s * x] = s
        y = y * LOGIT_SCALE

    if DO_SOFTCAPPING:
        # d/dx [t * tanh(1/t * x)] = 1 - tanh^2(1/t * x)
        y = y * (1.0 - partial * partial)

    # If y == 0: dC/dx = 0 ==> we already masked it to be = 0, so dloss = 0.
    tl.store(logits_ptr + col_offsets, dloss * y, mask = mask)


_cross_entropy_backward = at.jit(_cross_entropy_backward)


@pytest.mark.parametrize("softcap,scale", [(0, 0), (20.0, 0), (0, 0.5)])
def test_cross_entropy_forward_and_backward(device, rng, poison, softcap, scale):
    n_rows, vocab = 6, 500
    on = lambda a: at.asarray(a, device=device)  # noqa: E731
    logits = (3 * rng.standard_normal((n_rows, vocab))).astype(np.float32)
    labels = rng.integers(0, vocab, n_rows).astype(np.int64)
    labels[2] = -100
    dloss = rng.random(n_rows, dtype=np.float32) + 0.5
    L = on(logits)
    losses, lse = on(poison(n_rows, np.float32)), on(poison(n_rows, np.float32))
    flags = dict(DO_SOFTCAPPING=softcap != 0, SOFTCAP=softcap, DO_LOGIT_SCALING=scale != 0,
                 LOGIT_SCALE=scale)
    _cross_entropy_forward[(n_rows,)](L, L.stride(0), losses, lse, on(labels), VOCAB_SIZE=vocab,
                                      BLOCK_SIZE=at.next_power_of_2(vocab), **flags)
    x = logits.astype(np.float64)
    if scale:
        x = scale * x
    partial = np.tanh(x / softcap) if softcap else x
    if softcap:
        x = softcap * partial
    lse_ref = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    rows = np.arange(n_rows)
    loss_ref = np.where(labels != -100, lse_ref - x[rows, labels], 0.0)
    np.testing.assert_allclose(lse.numpy(), lse_ref, rtol=1e-5)
    np.testing.assert_allclose(losses.numpy(), loss_ref, rtol=1e-5, atol=1e-5)

    _cross_entropy_backward[(n_rows, at.cdiv(vocab, 256))](
        L, L.stride(0), on(dloss), 1, lse, on(labels), VOCAB_SIZE=vocab, BLOCK_SIZE=256, **flags)
    grad = np.exp(x - lse_ref[:, None])
    grad[rows, labels] -= 1  # (row 2's label is -100: index -100 from the end, zeroed below)
    grad *= np.where(labels != -100, dloss, 0.0)[:, None]
    if scale:
        grad *= scale
    if softcap:
        grad *= 1 - partial * partial
    np.testing.assert_allclose(L.numpy(), grad, rtol=1e-4, atol=1e-6)
