"""flash-attention's rotary kernel (github.com/Dao-AILab/flash-attention,
flash_attn/ops/triton/rotary.py, BSD-3-Clause), with only ``@triton.jit`` -> ``@at.jit``
changed: early ``return`` under a run-time ``if``, a 3-D grid, ``None`` arguments, positional
constexprs, interleaved and variable-length layouts."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


@at.jit
def rotary_kernel(
    OUT,  # Pointers to matrices
    X,
    COS,
    SIN,
    CU_SEQLENS,
    SEQLEN_OFFSETS,  # this could be int or a pointer
    # Matrix dimensions
    seqlen,
    rotary_dim,
    seqlen_ro,
    # strides
    stride_out_batch,
    stride_out_seqlen,
    stride_out_nheads,
    stride_out_headdim,
    stride_x_batch,
    stride_x_seqlen,
    stride_x_nheads,
    stride_x_headdim,
    # Meta-parameters
    BLOCK_K: tl.constexpr,
    IS_SEQLEN_OFFSETS_TENSOR: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    CONJUGATE: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    pid_m = tl.program_id(axis=0)
    pid_batch = tl.program_id(axis=1)
    pid_head = tl.program_id(axis=2)
    rotary_dim_half = rotary_dim // 2

    if not IS_VARLEN:
        X = X + pid_batch * stride_x_batch + pid_head * stride_x_nheads
        OUT = OUT + pid_batch * stride_out_batch + pid_head * stride_out_nheads
    else:
        start_idx = tl.load(CU_SEQLENS + pid_batch)
        seqlen = tl.load(CU_SEQLENS + pid_batch + 1) - start_idx
        X = X + start_idx * stride_x_seqlen + pid_head * stride_x_nheads
        OUT = OUT + start_idx * stride_out_seqlen + pid_head * stride_out_nheads

    if pid_m * BLOCK_M >= seqlen:
        return
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if not IS_SEQLEN_OFFSETS_TENSOR:
        rm_cs = rm + SEQLEN_OFFSETS
    else:
        rm_cs = rm + tl.load(SEQLEN_OFFSETS + pid_batch)
    rk = tl.arange(0, BLOCK_K)
    rk_half = tl.arange(0, BLOCK_K // 2)

    if not INTERLEAVED:
        # Load the 1st and 2nd halves of X, do calculation, then store to 1st and 2nd halves of OUT
        X = X + (rm[:, None] * stride_x_seqlen + rk_half[None, :] * stride_x_headdim)
        COS = COS + (rm_cs[:, None] * rotary_dim_half + rk_half[None, :])
        SIN = SIN + (rm_cs[:, None] * rotary_dim_half + rk_half[None, :])
        cos = tl.load(
            COS, mask=(rm_cs[:, None] < seqlen_ro) & (rk_half[None, :] < rotary_dim_half), other=1.0
        ).to(tl.float32)
        sin = tl.load(
            SIN, mask=(rm_cs[:, None] < seqlen_ro) & (rk_half[None, :] < rotary_dim_half), other=0.0
        ).to(tl.float32)
        x0 = tl.load(
            X, mask=(rm[:, None] < seqlen) & (rk_half[None, :] < rotary_dim_half), other=0.0
        ).to(tl.float32)
        x1 = tl.load(
            X + rotary_dim_half * stride_x_headdim,
            mask=(rm[:, None] < seqlen) & (rk_half[None, :] < rotary_dim_half),
            other=0.0,
        ).to(tl.float32)
        if CONJUGATE:
            sin = -sin
        o0 = x0 * cos - x1 * sin
        o1 = x0 * sin + x1 * cos
        # write back result
        OUT = OUT + (rm[:, None] * stride_out_seqlen + rk_half[None, :] * stride_out_headdim)
        tl.store(OUT, o0, mask=(rm[:, None] < seqlen) & (rk_half[None, :] < rotary_dim_half))
        tl.store(
            OUT + rotary_dim_half * stride_out_headdim,
            o1,
            mask=(rm[:, None] < seqlen) & (rk_half[None, :] < rotary_dim_half),
        )
    else:
        # We don't want to load X[0, 2, 4, ...] and X[1, 3, 5, ...] separately since both are slow.
        # Instead, we load x0 = X[0, 1, 2, 3, ...] and x1 = X[1, 0, 3, 2, ...].
        # Loading x0 will be fast but x1 will be slow.
        # Then we load cos = COS[0, 0, 1, 1, ...] and sin = SIN[0, 0, 1, 1, ...].
        # Then we do the calculation and use tl.where to pick put the right outputs for the even
        # and for the odd indices.
        rk_swap = rk + ((rk + 1) % 2) * 2 - 1  # 1, 0, 3, 2, 5, 4, ...
        rk_repeat = tl.arange(0, BLOCK_K) // 2
        X0 = X + (rm[:, None] * stride_x_seqlen + rk[None, :] * stride_x_headdim)
        X1 = X + (rm[:, None] * stride_x_seqlen + rk_swap[None, :] * stride_x_headdim)
        COS = COS + (rm_cs[:, None] * rotary_dim_half + rk_repeat[None, :])
        SIN = SIN + (rm_cs[:, None] * rotary_dim_half + rk_repeat[None, :])
        cos = tl.load(
            COS,
            mask=(rm_cs[:, None] < seqlen_ro) & (rk_repeat[None, :] < rotary_dim_half),
            other=1.0,
        ).to(tl.float32)
        sin = tl.load(
            SIN,
            mask=(rm_cs[:, None] < seqlen_ro) & (rk_repeat[None, :] < rotary_dim_half),
            other=0.0,
        ).to(tl.float32)
        x0 = tl.load(X0, mask=(rm[:, None] < seqlen) & (rk[None, :] < rotary_dim), other=0.0).to(
            tl.float32
        )
        x1 = tl.load(
            X1, mask=(rm[:, None] < seqlen) & (rk_swap[None, :] < rotary_dim), other=0.0
        ).to(tl.float32)
        if CONJUGATE:
            sin = -sin
        x0_cos = x0 * cos
        x1_sin = x1 * sin
        out = tl.where(rk[None, :] % 2 == 0, x0_cos - x1_sin, x0_cos + x1_sin)
        OUT = OUT + (rm[:, None] * stride_out_seqlen + rk[None, :] * stride_out_headdim)
        tl.store(OUT, out, mask=(rm[:, None] < seqlen) & (rk[None, :] < rotary_dim))


def _rotary_ref(x, cos, sin, offsets, interleaved, conjugate):
    """x: (batch, seqlen, nheads, headdim); cos/sin: (seqlen_ro, rotary_dim / 2)."""
    x = x.astype(np.float64)
    out = x.copy()
    rd = cos.shape[1] * 2
    for b in range(x.shape[0]):
        pos = np.arange(x.shape[1]) + offsets[b]
        c, s = cos[pos][:, None, :].astype(np.float64), sin[pos][:, None, :].astype(np.float64)
        s = -s if conjugate else s
        if interleaved:
            x0, x1 = x[b, :, :, 0:rd:2], x[b, :, :, 1:rd:2]
            out[b, :, :, 0:rd:2], out[b, :, :, 1:rd:2] = x0 * c - x1 * s, x0 * s + x1 * c
        else:
            x0, x1 = x[b, :, :, :rd // 2], x[b, :, :, rd // 2:rd]
            out[b, :, :, :rd // 2], out[b, :, :, rd // 2:rd] = x0 * c - x1 * s, x0 * s + x1 * c
    return out


@pytest.mark.parametrize("interleaved,conjugate,offsets_tensor",
                         [(False, False, False), (True, True, True)])
def test_flash_attn_rotary(device, rng, interleaved, conjugate, offsets_tensor):
    batch, seqlen, nheads, headdim, rotary_dim, seqlen_ro = 2, 7, 3, 40, 24, 12
    x = rng.standard_normal((batch, seqlen, nheads, headdim)).astype(np.float32)
    theta = rng.random((seqlen_ro, rotary_dim // 2)) * 3
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    offsets = np.array([2, 5] if offsets_tensor else [3, 3], dtype=np.int32)
    on = lambda a: at.asarray(a, device=device)  # noqa: E731
    xa = on(x)
    # rotated part poisoned; the rest pre-copied from x, as apply_rotary does
    oa = on(np.where(np.arange(headdim) < rotary_dim, np.float32(np.nan), x))
    BLOCK_M = 2 if interleaved else 4
    grid = lambda META: (at.cdiv(seqlen, META["BLOCK_M"]), batch, nheads)  # noqa: E731
    rotary_kernel[grid](
        oa, xa, on(cos), on(sin), None, on(offsets) if offsets_tensor else 3,
        seqlen, rotary_dim, seqlen_ro,
        oa.stride(0), oa.stride(-3), oa.stride(-2), oa.stride(-1),
        xa.stride(0), xa.stride(-3), xa.stride(-2), xa.stride(-1),
        32, offsets_tensor, False, interleaved, conjugate, BLOCK_M)
    ref = _rotary_ref(x, cos, sin, offsets, interleaved, conjugate)
    np.testing.assert_allclose(oa.numpy(), ref, rtol=1e-5, atol=1e-6)
