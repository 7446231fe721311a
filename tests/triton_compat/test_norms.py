"""Normalisation kernels with their backward passes: a layer norm that sweeps each row in
chunks, its backward with a spin lock (``atomic_cas`` in a ``while`` loop, ``atomic_xchg``,
``debug_barrier``) guarding per-group partial sums, and an RMS norm with constexpr strides and
epsilon whose backward is built with ``at.jit(fn)`` and may write over its own input."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


def on(device, a):
    return at.asarray(a, device=device)


# -- layer norm ---------------------------------------------------------------------------------
@at.jit
def _chunk(row_ptr, start, N, BLOCK: tl.constexpr):
    cols = start + tl.arange(0, BLOCK)
    return cols, tl.load(row_ptr + cols, mask=cols < N, other=0.).to(tl.float32)


@at.jit
def layer_norm_chunked(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK: tl.constexpr):
    # three sweeps over one row, BLOCK columns at a time: sum, squared deviations, output
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    running = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        _, x = _chunk(X, start, N, BLOCK)
        running += x
    mean = tl.sum(running, axis=0) / N
    running = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols, x = _chunk(X, start, N, BLOCK)
        dev = tl.where(cols < N, x - mean, 0.)
        running += dev * dev
    rstd = 1 / tl.sqrt(tl.sum(running, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for start in range(0, N, BLOCK):
        cols, x = _chunk(X, start, N, BLOCK)
        inside = cols < N
        scale = tl.load(W + cols, mask=inside)
        shift = tl.load(B + cols, mask=inside)
        tl.store(Y + cols, (x - mean) * rstd * scale + shift, mask=inside)


@at.jit
def layer_norm_backward_dx(DX, DY, PartialW, PartialB, X, W, Mean, Rstd, Locks, stride, N,
                           GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < N
    at_row = row * stride + cols
    x = tl.load(X + at_row, mask=inside, other=0).to(tl.float32)
    dy = tl.load(DY + at_row, mask=inside, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=inside).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(inside, (x - mean) * rstd, 0.)
    wdy = tl.where(inside, w * dy, 0.)
    proj = tl.sum(xhat * wdy, axis=0) / N
    centre = tl.sum(wdy, axis=0) / N
    tl.store(DX + at_row, (wdy - xhat * proj - centre) * rstd, mask=inside)

    # rows sharing a group add into one partial row; the group's lock serialises them
    group = row % GROUPS
    lock = Locks + group
    seen = Locks + GROUPS + group
    slot = PartialW + group * N + cols
    dw = (dy * xhat).to(w.dtype)
    db = dy.to(w.dtype)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    if tl.load(seen) == 0:
        tl.atomic_xchg(seen, 1)  # first visitor: the partial rows hold garbage, overwrite them
    else:
        dw += tl.load(slot, mask=inside)
        db += tl.load(PartialB + group * N + cols, mask=inside)
    tl.store(slot, dw, mask=inside)
    tl.store(PartialB + group * N + cols, db, mask=inside)
    tl.debug_barrier()  # every lane's store lands before the lock opens
    tl.atomic_xchg(lock, 0)


@at.jit
def sum_partial_rows(PartialW, PartialB, DW, DB, rows, N, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc_w = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_b = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for first in range(0, rows, BLOCK_M):
        r = first + tl.arange(0, BLOCK_M)
        tile = r[:, None] * N + cols[None, :]
        m = (r[:, None] < rows) & (cols[None, :] < N)
        acc_w += tl.load(PartialW + tile, mask=m, other=0.)
        acc_b += tl.load(PartialB + tile, mask=m, other=0.)
    tl.store(DW + cols, tl.sum(acc_w, axis=0), mask=cols < N)
    tl.store(DB + cols, tl.sum(acc_b, axis=0), mask=cols < N)


def test_layer_norm_forward_and_locked_backward(device, rng, poison):
    M, N, eps, groups = 24, 200, 1e-5, 4
    x = (1.7 + 0.6 * rng.standard_normal((M, N))).astype(np.float32)
    w = (0.5 + rng.random(N)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    dy = (0.1 * rng.standard_normal((M, N))).astype(np.float32)

    x64, w64, b64, dy64 = (v.astype(np.float64) for v in (x, w, b, dy))
    mu = x64.mean(1, keepdims=True)
    inv = 1 / np.sqrt(x64.var(1, keepdims=True) + eps)
    xhat = (x64 - mu) * inv
    wdy = w64 * dy64
    dx_ref = (wdy - xhat * (xhat * wdy).mean(1, keepdims=True) - wdy.mean(1, keepdims=True)) * inv

    X, W, B, DY = on(device, x), on(device, w), on(device, b), on(device, dy)
    y = on(device, poison((M, N), np.float32))
    mean, rstd = on(device, poison(M, np.float32)), on(device, poison(M, np.float32))
    layer_norm_chunked[(M,)](X, y, W, B, mean, rstd, X.stride(0), N, eps, BLOCK=64, num_warps=4,
                             num_ctas=1)
    np.testing.assert_allclose(mean.numpy(), mu[:, 0], rtol=1e-5)
    np.testing.assert_allclose(rstd.numpy(), inv[:, 0], rtol=1e-4)
    np.testing.assert_allclose(y.numpy(), xhat * w64 + b64, rtol=1e-4, atol=1e-4)

    locks = on(device, np.zeros(2 * groups, np.int32))
    part_w, part_b = (on(device, poison((groups, N), np.float32)) for _ in range(2))
    dx = on(device, poison((M, N), np.float32))
    layer_norm_backward_dx[(M,)](dx, DY, part_w, part_b, X, W, mean, rstd, locks, X.stride(0), N,
                                 GROUPS=groups, BLOCK=at.next_power_of_2(N))
    dw, db = on(device, poison(N, np.float32)), on(device, poison(N, np.float32))
    grid = lambda meta: (at.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    sum_partial_rows[grid](part_w, part_b, dw, db, groups, N, BLOCK_M=32, BLOCK_N=128)
    np.testing.assert_allclose(dx.numpy(), dx_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw.numpy(), (dy64 * xhat).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(db.numpy(), dy64.sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(locks.numpy(), [0] * groups + [1] * groups)


# -- RMS norm -----------------------------------------------------------------------------------
@at.jit
def rms_norm_forward(Y, y_stride: tl.constexpr, X, x_stride: tl.constexpr, W, InvRms,
                     n_cols: tl.constexpr, eps: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    x = tl.load(X + row * x_stride + cols, mask=inside, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=inside, other=0)
    inv = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + tl.full((), eps, tl.float32))
    tl.store(InvRms + row, inv)
    tl.store(Y + row * y_stride + cols, (x * inv).to(w.dtype) * w, mask=inside)


def rms_norm_backward_source(dY, dy_stride: tl.constexpr, dX, dx_stride: tl.constexpr, X,
                             x_stride: tl.constexpr, W, InvRms, n_cols: tl.constexpr,
                             UNIT_OFFSET: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    dY += row * dy_stride
    if UNIT_OFFSET:
        dX += row * dx_stride
    else:
        dX = dY  # the gradient goes back over dY
    g = tl.load(dY + cols, mask=inside, other=0).to(tl.float32)
    x = tl.load(X + row * x_stride + cols, mask=inside, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=inside, other=0).to(tl.float32)
    inv = tl.load(InvRms + row).to(tl.float32)
    if UNIT_OFFSET:
        w = w + 1.0  # weights stored as an offset from one
    xn = x * inv
    gw = g * w
    tl.store(dX + cols, inv * (gw - xn * (tl.sum(gw * xn, axis=0) / n_cols)), mask=inside)


rms_norm_backward = at.jit(rms_norm_backward_source)


@pytest.mark.parametrize("unit_offset", [False, True])
def test_rms_norm_forward_and_backward(device, rng, poison, unit_offset):
    rows, cols, eps = 9, 300, 1e-5
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.random(cols, dtype=np.float32)
    dy = rng.standard_normal((rows, cols), dtype=np.float32)
    x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    inv = 1 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + eps)
    X, W, dY = on(device, x), on(device, w), on(device, dy)
    Y, inv_rms = on(device, poison((rows, cols), np.float32)), on(device, poison(rows, np.float32))
    block = at.next_power_of_2(cols)
    rms_norm_forward[(rows,)](Y, Y.stride(0), X, X.stride(0), W, inv_rms, cols, eps, BLOCK=block)
    np.testing.assert_allclose(inv_rms.numpy(), inv[:, 0], rtol=1e-5)
    np.testing.assert_allclose(Y.numpy(), x64 * inv * w64, rtol=1e-5, atol=1e-6)

    dX = on(device, poison((rows, cols), np.float32)) if unit_offset else dY
    rms_norm_backward[(rows,)](dY, dY.stride(0), dX, dX.stride(0), X, X.stride(0), W, inv_rms,
                               cols, UNIT_OFFSET=unit_offset, BLOCK=block)
    gw = dy64 * (w64 + 1 if unit_offset else w64)
    xn = x64 * inv
    ref = inv * (gw - xn * (gw * xn).mean(1, keepdims=True))
    np.testing.assert_allclose(dX.numpy(), ref, rtol=1e-4, atol=1e-5)
