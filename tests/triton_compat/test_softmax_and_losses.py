"""Row-wise softmax and losses: a persistent softmax whose programs stride over the rows with
``tl.range(..., num_stages=)`` (``num_stages`` also being a constexpr parameter of the kernel),
and a fused cross-entropy forward and backward with optional logit scaling and tanh
soft-capping, ignored labels tested at run time, a 2-D backward grid and the gradient written
over the logits."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl

IGNORE_INDEX: tl.constexpr = -100
tanh_fn = tl.math.tanh


def on(device, a):
    return at.asarray(a, device=device)


@at.jit
def softmax_persistent(dst, src, src_stride, dst_stride, n_rows, n_cols, BLOCK: tl.constexpr,
                       num_stages: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    live = cols < n_cols
    for r in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=num_stages):
        v = tl.load(src + r * src_stride + cols, mask=live, other=-float("inf"))
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(dst + r * dst_stride + cols, e / tl.sum(e, axis=0), mask=live)


def test_persistent_softmax_over_padded_rows(device, rng, poison):
    rows, cols, pad = 37, 781, 19
    src = rng.standard_normal((rows, cols + pad), dtype=np.float32)
    dst = on(device, poison((rows, cols + 5), np.float32))
    s = on(device, src)
    softmax_persistent[(8, 1, 1)](dst, s, s.stride(0), dst.stride(0), rows, cols,
                                  BLOCK=at.next_power_of_2(cols), num_stages=2)
    v = src[:, :cols].astype(np.float64)
    e = np.exp(v - v.max(1, keepdims=True))
    got = dst.numpy()
    np.testing.assert_allclose(got[:, :cols], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert np.isnan(got[:, cols:]).all()  # the gap between rows is left alone


# -- cross-entropy with scaled and soft-capped logits --------------------------------------------
@at.jit
def _shape_logits(z, SCALED: tl.constexpr, SCALE: tl.constexpr, CAPPED: tl.constexpr,
                  CAP: tl.constexpr):
    if SCALED:
        z = SCALE * z
    if CAPPED:
        z = CAP * tanh_fn(z / CAP)
    return z


@at.jit
def cross_entropy_forward(logits, row_stride, labels, loss, lse_out, VOCAB: tl.constexpr,
                          BLOCK: tl.constexpr, SCALED: tl.constexpr, SCALE: tl.constexpr,
                          CAPPED: tl.constexpr, CAP: tl.constexpr):
    row = tl.program_id(0)
    logits += row * tl.cast(row_stride, tl.int64)
    cols = tl.arange(0, BLOCK)
    z = tl.load(logits + cols, mask=cols < VOCAB, other=-float("inf")).to(tl.float32)
    # capping maps the -inf padding to -CAP: mask it again after shaping
    z = tl.where(cols < VOCAB, _shape_logits(z, SCALED, SCALE, CAPPED, CAP), -float("inf"))
    peak = tl.max(z, 0)
    lse = peak + tl.log(tl.sum(tl.exp(z - peak), 0))
    target = tl.load(labels + row).to(tl.int32)
    if target != IGNORE_INDEX:
        picked = _shape_logits(tl.load(logits + target).to(tl.float32), SCALED, SCALE, CAPPED, CAP)
        row_loss = lse - picked
    else:
        row_loss = 0.0
    tl.store(lse_out + row, lse)
    tl.store(loss + row, row_loss)


@at.jit
def cross_entropy_backward(logits, row_stride: tl.constexpr, dloss, dloss_stride: tl.constexpr,
                           lse_in, labels, VOCAB: tl.constexpr, BLOCK: tl.constexpr,
                           SCALED: tl.constexpr, SCALE: tl.constexpr, CAPPED: tl.constexpr,
                           CAP: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = cols < VOCAB
    logits += row * tl.cast(row_stride, tl.int64)
    target = tl.load(labels + row).to(tl.int32)
    if target != IGNORE_INDEX:
        upstream = tl.load(dloss + row * dloss_stride)
    else:
        upstream = 0.0
    z = tl.load(logits + cols, mask=inside, other=0.0).to(tl.float32)
    if SCALED:
        z = z * SCALE
    t = z
    if CAPPED:
        t = tanh_fn(z / CAP)
        z = CAP * t
    p = tl.exp(z - tl.load(lse_in + row))
    grad = tl.where(cols == target, p - 1.0, p)
    # chain rule back through the shaping, innermost last
    if CAPPED:
        grad = grad * (1.0 - t * t)
    if SCALED:
        grad = grad * SCALE
    tl.store(logits + cols, upstream * grad, mask=inside)


@pytest.mark.parametrize("scale,cap", [(0, 0), (0, 20.0), (0.5, 0)])
def test_cross_entropy_forward_and_backward(device, rng, poison, scale, cap):
    rows, vocab = 6, 500
    logits = (3 * rng.standard_normal((rows, vocab))).astype(np.float32)
    labels = rng.integers(0, vocab, rows).astype(np.int64)
    labels[2] = -100
    dloss = (rng.random(rows) + 0.5).astype(np.float32)

    z = logits.astype(np.float64) * (scale or 1)
    t = np.tanh(z / cap) if cap else None
    if cap:
        z = cap * t
    lse_ref = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    kept = labels != -100
    picked = z[np.arange(rows), np.where(kept, labels, 0)]
    p = np.exp(z - lse_ref[:, None])
    p[np.arange(rows)[kept], labels[kept]] -= 1
    grad_ref = p * np.where(kept, dloss, 0)[:, None] * (scale or 1) * (1 - t * t if cap else 1)

    L = on(device, logits)
    loss, lse = on(device, poison(rows, np.float32)), on(device, poison(rows, np.float32))
    flags = dict(SCALED=scale != 0, SCALE=scale, CAPPED=cap != 0, CAP=cap)
    cross_entropy_forward[(rows,)](L, L.stride(0), on(device, labels), loss, lse, VOCAB=vocab,
                                   BLOCK=at.next_power_of_2(vocab), **flags)
    np.testing.assert_allclose(lse.numpy(), lse_ref, rtol=1e-5)
    np.testing.assert_allclose(loss.numpy(), np.where(kept, lse_ref - picked, 0), rtol=1e-5,
                               atol=1e-5)

    block = 256
    cross_entropy_backward[(rows, at.cdiv(vocab, block))](
        L, L.stride(0), on(device, dloss), 1, lse, on(device, labels), VOCAB=vocab, BLOCK=block,
        **flags)
    np.testing.assert_allclose(L.numpy(), grad_ref, rtol=1e-4, atol=1e-6)
