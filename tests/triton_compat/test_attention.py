"""An attention forward pass in the flash style: online softmax over key blocks with two dots
per block, block pointers for Q, K (read transposed through ``order=(0, 1)``), V and O, a jit
helper that takes block pointers (and tensors through constexpr-annotated parameters),
``tl.advance``, ``exp2``/``log2``, ``tl.multiple_of``, ``tl.static_assert``, a constexpr local
picked from ``V.dtype.element_ty`` and a statically dead float8 branch; causal and not, with
a separate layout (and so separate strides) for each of Q, K, V and O."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl

LOG2E: tl.constexpr = 1.4426950408889634


@at.jit
def _attend(acc, run_max, run_sum, q, k_blocks, v_blocks, lo, hi, scale_log2,
            rows: tl.constexpr, keys: tl.constexpr, BLOCK_N: tl.constexpr,
            ON_DIAGONAL: tl.constexpr, V_FP8: tl.constexpr):
    # online softmax over the key blocks [lo, hi), scores kept in log2 units
    k_blocks = tl.advance(k_blocks, (0, lo))
    v_blocks = tl.advance(v_blocks, (lo, 0))
    for start in range(lo, hi, BLOCK_N):
        start = tl.multiple_of(start, BLOCK_N)
        s = tl.dot(q, tl.load(k_blocks)) * scale_log2
        if ON_DIAGONAL:
            s = s + tl.where(rows[:, None] >= start + keys[None, :], 0, -1.0e6)
        new_max = tl.maximum(run_max, tl.max(s, 1))
        p = tl.math.exp2(s - new_max[:, None])
        decay = tl.math.exp2(run_max - new_max)
        run_sum = run_sum * decay + tl.sum(p, 1)
        if V_FP8:
            p = p.to(tl.float8e5)
        else:
            p = p.to(tl.float16)
        acc = tl.dot(p, tl.load(v_blocks), acc * decay[:, None])
        run_max = new_max
        k_blocks = tl.advance(k_blocks, (0, BLOCK_N))
        v_blocks = tl.advance(v_blocks, (BLOCK_N, 0))
    return acc, run_max, run_sum


@at.jit
def attention_forward(Q, K, V, sm_scale, LSE, Out,
                      sq_z, sq_h, sq_m, sq_d, sk_z, sk_h, sk_n, sk_d,
                      sv_z, sv_h, sv_n, sv_d, so_z, so_h, so_m, so_d,
                      Z, H, SEQ, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    tl.static_assert(BLOCK_N <= HEAD_DIM)
    q_block = tl.program_id(0)
    head = tl.program_id(1)
    z = (head // H).to(tl.int64)
    h = (head % H).to(tl.int64)
    first_row = q_block * BLOCK_M
    q_blocks = tl.make_block_ptr(base=Q + z * sq_z + h * sq_h, shape=(SEQ, HEAD_DIM),
                                 strides=(sq_m, sq_d), offsets=(first_row, 0),
                                 block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
    k_blocks = tl.make_block_ptr(base=K + z * sk_z + h * sk_h, shape=(HEAD_DIM, SEQ),
                                 strides=(sk_d, sk_n), offsets=(0, 0),
                                 block_shape=(HEAD_DIM, BLOCK_N), order=(0, 1))
    v_fp8: tl.constexpr = V.dtype.element_ty == tl.float8e5
    v_order: tl.constexpr = (0, 1) if v_fp8 else (1, 0)
    v_blocks = tl.make_block_ptr(base=V + z * sv_z + h * sv_h, shape=(SEQ, HEAD_DIM),
                                 strides=(sv_n, sv_d), offsets=(0, 0),
                                 block_shape=(BLOCK_N, HEAD_DIM), order=v_order)
    rows = first_row + tl.arange(0, BLOCK_M)
    keys = tl.arange(0, BLOCK_N)
    run_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    run_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    scale_log2 = sm_scale
    scale_log2 *= LOG2E
    q = tl.load(q_blocks)
    if CAUSAL:
        lo, hi = 0, first_row  # whole blocks left of the diagonal need no mask
    else:
        lo, hi = 0, SEQ
    acc, run_max, run_sum = _attend(acc, run_max, run_sum, q, k_blocks, v_blocks, lo, hi,
                                    scale_log2, rows, keys, BLOCK_N, False, v_fp8)
    if CAUSAL:
        diag = tl.multiple_of(first_row, BLOCK_M)
        acc, run_max, run_sum = _attend(acc, run_max, run_sum, q, k_blocks, v_blocks, diag,
                                        diag + BLOCK_M, scale_log2, rows, keys, BLOCK_N, True,
                                        v_fp8)
    tl.store(LSE + head * SEQ + rows, run_max + tl.math.log2(run_sum))
    o_blocks = tl.make_block_ptr(base=Out + z * so_z + h * so_h, shape=(SEQ, HEAD_DIM),
                                 strides=(so_m, so_d), offsets=(first_row, 0),
                                 block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
    tl.store(o_blocks, (acc / run_sum[:, None]).to(Out.type.element_ty))


def _reference(q, k, v, scale, causal):
    """Attention in float64 on (Z, H, SEQ, D) arrays; also the log2-sum-exp2 of the scores."""
    s = q @ k.swapaxes(-1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - top)
    return e / e.sum(-1, keepdims=True) @ v, (top[..., 0] + np.log(e.sum(-1))) / np.log(2)


def _strides(arr, axes):
    """Element strides of ``arr`` listed in the (z, h, seq, d) order named by ``axes``."""
    return [arr.stride(a) for a in axes]


@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward(device, rng, poison, causal):
    Z, H, SEQ, D, BLOCK = 2, 2, 48, 16, 16
    q, k, v = ((0.5 * rng.standard_normal((Z, H, SEQ, D))).astype(np.float16) for _ in range(3))
    scale = 0.5
    ref, lse_ref = _reference(*(t.astype(np.float64) for t in (q, k, v)), scale, causal)
    # Q and O are (Z, H, SEQ, D); K is stored (Z, SEQ, H, D) and V (H, Z, SEQ, D)
    Q = at.asarray(q, device=device)
    K = at.asarray(np.ascontiguousarray(k.transpose(0, 2, 1, 3)), device=device)
    V = at.asarray(np.ascontiguousarray(v.transpose(1, 0, 2, 3)), device=device)
    O = at.asarray(poison((Z, H, SEQ, D), np.float16), device=device)
    lse = at.asarray(poison((Z, H, SEQ), np.float32), device=device)
    grid = (at.cdiv(SEQ, BLOCK), Z * H, 1)
    attention_forward[grid](Q, K, V, scale, lse, O,
                            *_strides(Q, (0, 1, 2, 3)), *_strides(K, (0, 2, 1, 3)),
                            *_strides(V, (1, 0, 2, 3)), *_strides(O, (0, 1, 2, 3)),
                            Z, H, SEQ, HEAD_DIM=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK, CAUSAL=causal)
    np.testing.assert_allclose(O.numpy().astype(np.float64), ref, rtol=1e-2, atol=2e-3)
    np.testing.assert_allclose(lse.numpy(), lse_ref, rtol=1e-3, atol=1e-3)
