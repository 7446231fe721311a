"""Rotary position embeddings, two ways.

``rotary_embed`` runs on a 3-D grid (sequence blocks, batch, heads), returns early under a
run-time ``if``, takes ``None`` for an unused pointer, an int or a tensor for the position
offset, its constexprs positionally, and handles half-split and interleaved pairs (partner
lanes found with ``^``) and packed variable-length batches.  ``rope_qk_in_place`` rotates q
and k in place, one program per token, over head tiles padded to powers of two, picks the
cos/sin row with ``tl.where`` on a constexpr, and has a defaulted ``BACKWARD`` constexpr."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


def on(device, a):
    return at.asarray(a, device=device)


@at.jit
def rotary_embed(OUT, X, COS, SIN, CU_SEQLENS, POS_OFFSET, seqlen, rotary_dim, table_len,
                 so_b, so_s, so_h, so_d, sx_b, sx_s, sx_h, sx_d,
                 BLOCK_K: tl.constexpr, OFFSET_IS_TENSOR: tl.constexpr, VARLEN: tl.constexpr,
                 INTERLEAVED: tl.constexpr, CONJUGATE: tl.constexpr, BLOCK_M: tl.constexpr):
    seq_block = tl.program_id(axis=0)
    batch = tl.program_id(axis=1)
    head = tl.program_id(axis=2)
    half = rotary_dim // 2
    if VARLEN:
        # sequences are packed back to back; CU_SEQLENS holds where each starts
        begin = tl.load(CU_SEQLENS + batch)
        seqlen = tl.load(CU_SEQLENS + batch + 1) - begin
        X += begin * sx_s + head * sx_h
        OUT += begin * so_s + head * so_h
    else:
        X += batch * sx_b + head * sx_h
        OUT += batch * so_b + head * so_h
    if seq_block * BLOCK_M >= seqlen:
        return
    pos = seq_block * BLOCK_M + tl.arange(0, BLOCK_M)
    if OFFSET_IS_TENSOR:
        angle_row = pos + tl.load(POS_OFFSET + batch)
    else:
        angle_row = pos + POS_OFFSET
    rows_ok = pos[:, None] < seqlen
    table_ok = angle_row[:, None] < table_len
    if INTERLEAVED:
        lane = tl.arange(0, BLOCK_K)
        lane_ok = lane[None, :] < rotary_dim
        angle = angle_row[:, None] * half + (lane // 2)[None, :]
        cos = tl.load(COS + angle, mask=table_ok & lane_ok, other=1.0).to(tl.float32)
        sin = tl.load(SIN + angle, mask=table_ok & lane_ok, other=0.0).to(tl.float32)
        if CONJUGATE:
            sin = -sin
        own = tl.load(X + pos[:, None] * sx_s + lane[None, :] * sx_d, mask=rows_ok & lane_ok,
                      other=0.0).to(tl.float32)
        partner = tl.load(X + pos[:, None] * sx_s + (lane ^ 1)[None, :] * sx_d,
                          mask=rows_ok & lane_ok, other=0.0).to(tl.float32)
        even = (lane % 2 == 0)[None, :]
        out = tl.where(even, own * cos - partner * sin, own * cos + partner * sin)
        tl.store(OUT + pos[:, None] * so_s + lane[None, :] * so_d, out, mask=rows_ok & lane_ok)
    else:
        lane = tl.arange(0, BLOCK_K // 2)
        ok = rows_ok & (lane[None, :] < half)
        angle = angle_row[:, None] * half + lane[None, :]
        cos = tl.load(COS + angle, mask=table_ok & (lane[None, :] < half), other=1.0).to(tl.float32)
        sin = tl.load(SIN + angle, mask=table_ok & (lane[None, :] < half), other=0.0).to(tl.float32)
        if CONJUGATE:
            sin = -sin
        lo_ptr = X + pos[:, None] * sx_s + lane[None, :] * sx_d
        lo = tl.load(lo_ptr, mask=ok, other=0.0).to(tl.float32)
        hi = tl.load(lo_ptr + half * sx_d, mask=ok, other=0.0).to(tl.float32)
        out_ptr = OUT + pos[:, None] * so_s + lane[None, :] * so_d
        tl.store(out_ptr, lo * cos - hi * sin, mask=ok)
        tl.store(out_ptr + half * so_d, lo * sin + hi * cos, mask=ok)


def _rotate(x, cos, sin, interleaved):
    """Rotate the first 2 * cos.shape[-1] features of x (seq, heads, dim) in float64."""
    half = cos.shape[-1]
    out = x.copy()
    c, s = cos[:, None, :], sin[:, None, :]
    first, second = ((slice(0, 2 * half, 2), slice(1, 2 * half, 2)) if interleaved
                     else (slice(0, half), slice(half, 2 * half)))
    a, b = x[..., first], x[..., second]
    out[..., first], out[..., second] = a * c - b * s, a * s + b * c
    return out


@pytest.mark.parametrize("interleaved,conjugate,offset_tensor,varlen",
                         [(False, False, False, False), (True, True, True, False),
                          (False, True, True, True)])
def test_rotary_embed(device, rng, interleaved, conjugate, offset_tensor, varlen):
    batch, seqlen, heads, dim, rot, table_len = 2, 7, 3, 40, 24, 12
    lengths = [3, 7] if varlen else [seqlen] * batch  # (3 rows: the second block returns early)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    shape = (starts[-1], heads, dim) if varlen else (batch, seqlen, heads, dim)
    x = rng.standard_normal(shape).astype(np.float32)
    theta = rng.random((table_len, rot // 2)) * 3
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    offsets = np.array([2, 5] if offset_tensor else [3, 3], dtype=np.int32)

    sign = -1.0 if conjugate else 1.0
    ref = x.astype(np.float64)
    for b in range(batch):
        seq = slice(starts[b], starts[b + 1]) if varlen else (b, slice(None))
        rows = offsets[b] + np.arange(lengths[b])
        ref[seq] = _rotate(ref[seq], cos[rows].astype(np.float64),
                           sign * sin[rows].astype(np.float64), interleaved)

    X = on(device, x)
    # rotated features poisoned, the rest already holding x (the caller copies them)
    out = on(device, np.where(np.arange(dim) < rot, np.float32(np.nan), x))
    strides_x = [X.stride(i) for i in range(X.ndim)]
    strides_o = [out.stride(i) for i in range(out.ndim)]
    if varlen:  # no batch axis: a zero batch stride
        strides_x, strides_o = [0] + strides_x, [0] + strides_o
    block_m = 2 if interleaved else 4
    grid = lambda META: (at.cdiv(seqlen, META["BLOCK_M"]), batch, heads)  # noqa: E731
    rotary_embed[grid](out, X, on(device, cos), on(device, sin),
                       on(device, starts) if varlen else None,
                       on(device, offsets) if offset_tensor else 3,
                       seqlen, rot, table_len, *strides_o, *strides_x,
                       32, offset_tensor, varlen, interleaved, conjugate, block_m)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)


# -- q and k rotated in place ---------------------------------------------------------------------
@at.jit
def _rotate_heads(ptr, n_heads, PAD_HEADS: tl.constexpr, head_dim, PAD_DIM: tl.constexpr, c, s):
    heads = tl.arange(0, PAD_HEADS)[:, None]
    lanes = tl.arange(0, PAD_DIM // 2)[None, :]
    first = heads * head_dim + lanes
    ok = (heads < n_heads) & (lanes < head_dim // 2)
    a = tl.load(ptr + first, mask=ok, other=0).to(s.dtype)
    b = tl.load(ptr + first + head_dim // 2, mask=ok, other=0).to(s.dtype)
    tl.store(ptr + first, a * c - b * s, mask=ok)
    tl.store(ptr + first + head_dim // 2, b * c + a * s, mask=ok)


@at.jit
def rope_qk_in_place(q, q_row_stride, k, k_row_stride, cos, cos_row_stride, sin, sin_row_stride,
                     seq_len, batch: tl.constexpr, cos_batch: tl.constexpr,
                     n_q_heads: tl.constexpr, n_k_heads: tl.constexpr, head_dim: tl.constexpr,
                     PAD_Q: tl.constexpr, PAD_K: tl.constexpr, PAD_DIM: tl.constexpr,
                     BACKWARD: tl.constexpr = False):
    token = tl.program_id(0).to(tl.int64)  # one program per (batch, position) pair
    q += token * q_row_stride
    k += token * k_row_stride
    # a (1, seq, dim) table is shared by the batch; a (batch, seq, dim) one is not
    table_row = tl.where(cos_batch == 1, token % seq_len, token)
    lanes = tl.arange(0, PAD_DIM // 2)
    c = tl.load(cos + table_row * cos_row_stride + lanes, mask=lanes < head_dim // 2, other=0)
    s = tl.load(sin + table_row * sin_row_stride + lanes, mask=lanes < head_dim // 2, other=0)
    if BACKWARD:
        s = -s  # the gradient rotates back by the same angle
    _rotate_heads(q, n_q_heads, PAD_Q, head_dim, PAD_DIM, c, s)
    _rotate_heads(k, n_k_heads, PAD_K, head_dim, PAD_DIM, c, s)


@pytest.mark.parametrize("backward,table_per_batch", [(False, False), (True, True)])
def test_rope_q_and_k_in_place(device, rng, backward, table_per_batch):
    bsz, seq, n_q, n_k, dim = 2, 5, 6, 2, 24
    q = rng.standard_normal((bsz, seq, n_q, dim)).astype(np.float32)
    k = rng.standard_normal((bsz, seq, n_k, dim)).astype(np.float32)
    theta = rng.random((bsz if table_per_batch else 1, seq, dim // 2)) * 3
    cos = np.concatenate([np.cos(theta)] * 2, -1).astype(np.float32)
    sin = np.concatenate([np.sin(theta)] * 2, -1).astype(np.float32)
    sign = -1.0 if backward else 1.0
    c64 = np.broadcast_to(cos[..., :dim // 2], (bsz, seq, dim // 2)).astype(np.float64)
    s64 = sign * np.broadcast_to(sin[..., :dim // 2], (bsz, seq, dim // 2)).astype(np.float64)
    q_ref = np.stack([_rotate(q[b].astype(np.float64), c64[b], s64[b], False) for b in range(bsz)])
    k_ref = np.stack([_rotate(k[b].astype(np.float64), c64[b], s64[b], False) for b in range(bsz)])

    Q, K, C, S = on(device, q), on(device, k), on(device, cos), on(device, sin)
    pads = [at.next_power_of_2(v) for v in (n_q, n_k, dim)]
    args = (Q, Q.stride(1), K, K.stride(1), C, C.stride(1), S, S.stride(1), seq, bsz,
            cos.shape[0], n_q, n_k, dim, *pads)
    if backward:
        rope_qk_in_place[(bsz * seq,)](*args, BACKWARD=True)
    else:
        rope_qk_in_place[(bsz * seq,)](*args)  # BACKWARD keeps its default
    np.testing.assert_allclose(Q.numpy(), q_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(K.numpy(), k_ref, rtol=1e-5, atol=1e-6)
