"""Kernels from Liger-Kernel (github.com/linkedin/Liger-Kernel, src/liger_kernel/ops/*.py,
BSD-2-Clause), with only ``@triton.jit`` -> ``@at.jit`` and the libdevice import path
(``triton.language.extra.libdevice`` -> ``anytile.language.extra.libdevice``) changed."""
import math

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.language.extra.libdevice import tanh


# -- src/liger_kernel/ops/rope.py -------------------------------------------------------------
@at.jit
def _triton_rope(
    q_ptr,
    q_row_stride,
    k_ptr,
    k_row_stride,
    cos,
    cos_row_stride,
    sin,
    sin_row_stride,
    sl,
    bs: tl.constexpr,
    cos_bs: tl.constexpr,
    n_qh: tl.constexpr,
    n_kh: tl.constexpr,
    hd: tl.constexpr,
    pad_n_qh: tl.constexpr,
    pad_n_kh: tl.constexpr,
    pad_hd: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BACKWARD_PASS: tl.constexpr = False,
):
    # q size: (bsz, seq_len, num_q_heads, head_dim)
    # q stride: (seq_len * num_q_heads * head_dim, num_q_heads * head_dim, head_dim, 1)
    # k size: (bsz, seq_len, num_kv_heads, head_dim)
    # k stride: (seq_len * num_kv_heads * head_dim, num_kv_heads * head_dim, head_dim, 1)

    # cos size: (1, seq_len, head_dim) or (bsz, seq_len, head_dim)
    # stride: (seq_len * head_dim, head_dim, 1)
    pid = tl.program_id(0).to(tl.int64)

    # locate start address
    q_ptr = q_ptr + pid * q_row_stride
    k_ptr = k_ptr + pid * k_row_stride

    # ####################################################################
    # get the cos(mθ_{i...d/2}) and sin(mθ_{i...d/2}) for token position
    # m of this program instance
    # ####################################################################

    # 1. program instances are laid out in a 1D vector of size bsz * seq_len, which
    # effectively represents a 2D grid of size [bsz, seq_len] with seq_len dimension
    # being the fastest changing dimension. Thus we can simply do pid // sl to get the batch index
    # and pid % sl to get the sequence index.
    # 2. We only need the left half of cos and sin matrix because the right half is just
    # a clone of the left half.
    batch_idx = pid // sl
    cos_row_idx = pid % sl
    cos = cos + tl.where(
        cos_bs == 1,
        cos_row_idx * cos_row_stride,
        batch_idx * (sl * cos_row_stride) + cos_row_idx * cos_row_stride,
    )
    sin = sin + tl.where(
        cos_bs == 1,
        cos_row_idx * sin_row_stride,
        batch_idx * (sl * sin_row_stride) + cos_row_idx * sin_row_stride,
    )

    cos_offsets = tl.arange(0, pad_hd // 2)
    cos_mask = cos_offsets < hd // 2
    cos_row = tl.load(cos + cos_offsets, mask=cos_mask, other=0)
    sin_row = tl.load(sin + cos_offsets, mask=cos_mask, other=0)

    # ####################################################################
    # Load the left and right half of q and k for the current
    # program instance (i.e. for the current token) separately
    # ####################################################################
    # left half of the head
    first_half_q_offsets = tl.arange(0, pad_n_qh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_half_k_offsets = tl.arange(0, pad_n_kh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_q_mask = (tl.arange(0, pad_n_qh)[:, None] < n_qh) & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    first_k_mask = (tl.arange(0, pad_n_kh)[:, None] < n_kh) & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    q_tile_1 = tl.load(q_ptr + first_half_q_offsets, mask=first_q_mask, other=0).to(sin_row.dtype)
    k_tile_1 = tl.load(k_ptr + first_half_k_offsets, mask=first_k_mask, other=0).to(sin_row.dtype)

    # right half of the head
    second_half_q_offsets = first_half_q_offsets + (hd // 2)
    second_half_k_offsets = first_half_k_offsets + (hd // 2)
    second_q_mask = first_q_mask
    second_k_mask = first_k_mask
    q_tile_2 = tl.load(q_ptr + second_half_q_offsets, mask=second_q_mask, other=0).to(sin_row.dtype)
    k_tile_2 = tl.load(k_ptr + second_half_k_offsets, mask=second_k_mask, other=0).to(sin_row.dtype)

    if not BACKWARD_PASS:
        # y = [x1, x2] * [cos, cos] + [-x2, x1] * [sin, sin]
        new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row
        tl.store(q_ptr + first_half_q_offsets, new_q_tile_1, mask=first_q_mask)
        new_q_tile_2 = q_tile_2 * cos_row + q_tile_1 * sin_row
        tl.store(q_ptr + second_half_q_offsets, new_q_tile_2, mask=second_q_mask)

        new_k_tile_1 = k_tile_1 * cos_row - k_tile_2 * sin_row
        tl.store(k_ptr + first_half_k_offsets, new_k_tile_1, mask=first_k_mask)
        new_k_tile_2 = k_tile_2 * cos_row + k_tile_1 * sin_row
        tl.store(k_ptr + second_half_k_offsets, new_k_tile_2, mask=second_k_mask)
    else:
        # with some math, we can get:
        # dy = [dx1, dx2] * [cos, cos] + [-dx2, dx1] * [-sin, -sin]
        new_q_tile_1 = q_tile_1 * cos_row + q_tile_2 * sin_row
        tl.store(q_ptr + first_half_q_offsets, new_q_tile_1, mask=first_q_mask)
        new_q_tile_2 = q_tile_2 * cos_row - q_tile_1 * sin_row
        tl.store(q_ptr + second_half_q_offsets, new_q_tile_2, mask=second_q_mask)

        new_k_tile_1 = k_tile_1 * cos_row + k_tile_2 * sin_row
        tl.store(k_ptr + first_half_k_offsets, new_k_tile_1, mask=first_k_mask)
        new_k_tile_2 = k_tile_2 * cos_row - k_tile_1 * sin_row
        tl.store(k_ptr + second_half_k_offsets, new_k_tile_2, mask=second_k_mask)


def _rope_ref(x, cos, sin, backward):
    """HuggingFace Llama rotary embedding on (bsz, seq, heads, hd) in float64."""
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    s = -sin if backward else sin
    return x * cos[:, :, None, :] + rot * s[:, :, None, :]


@pytest.mark.parametrize("backward", [False, True])
def test_liger_rope(device, rng, backward):
    bsz, sl, n_qh, n_kh, hd = 2, 5, 6, 2, 24
    on = lambda a: at.asarray(a, device=device)  # noqa: E731
    q = rng.standard_normal((bsz, sl, n_qh, hd)).astype(np.float32)
    k = rng.standard_normal((bsz, sl, n_kh, hd)).astype(np.float32)
    theta = rng.random((1, sl, hd // 2)) * 3
    cos = np.concatenate([np.cos(theta)] * 2, -1).astype(np.float32)
    sin = np.concatenate([np.sin(theta)] * 2, -1).astype(np.float32)
    c64, s64 = cos.astype(np.float64), sin.astype(np.float64)
    q_ref = _rope_ref(q.astype(np.float64), c64, s64, backward)
    k_ref = _rope_ref(k.astype(np.float64), c64, s64, backward)
    Q, K, C, S = on(q), on(k), on(cos), on(sin)  # (the kernel works in place)
    pad_hd, pad_q, pad_k = (at.next_power_of_2(v) for v in (hd, n_qh, n_kh))
    _triton_rope[(bsz * sl,)](Q, Q.stride(1), K, K.stride(1), C, C.stride(-2), S, S.stride(-2),
                              sl, bsz, 1, n_qh, n_kh, hd, pad_q, pad_k, pad_hd,
                              BLOCK_SIZE=max(pad_q, pad_k), BACKWARD_PASS=backward)
    np.testing.assert_allclose(Q.numpy(), q_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(K.numpy(), k_ref, rtol=1e-5, atol=1e-6)


# -- src/liger_kernel/ops/geglu.py ------------------------------------------------------------
@at.jit
def _geglu_tanh_forward_kernel(a, b, c, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)

    # locate start index
    a += program_id * stride
    b += program_id * stride
    c += program_id * stride

    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b + col_offsets, mask=mask, other=0)

    # tanh approximation form of GELU is computed with:
    # 0.5 * a * (1 + tanh(sqrt(2 / pi) * (a + 0.044715 * a^3)))
    sqrt_2_over_pi = 0.7978845608028654  # sqrt(2 / pi)
    a_cubed = a_row * a_row * a_row
    tanh_arg = sqrt_2_over_pi * (a_row + 0.044715 * a_cubed)
    tanh_result = tanh(tanh_arg)
    geglu_a = 0.5 * a_row * (1 + tanh_result)
    c_row = geglu_a.cast(b_row.dtype) * b_row
    tl.store(c + col_offsets, c_row, mask=mask)


@at.jit
def _geglu_tanh_backward_kernel(dc, a, b, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)

    # locate start index
    dc += program_id * stride
    a += program_id * stride
    b += program_id * stride

    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    dc_row = tl.load(dc + col_offsets, mask=mask, other=0)
    a_row = tl.load(a + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b + col_offsets, mask=mask, other=0)

    # recomputation to save memory
    sqrt_2_over_pi = 0.7978845608028654  # sqrt(2 / pi)
    a_cubed = a_row * a_row * a_row
    tanh_arg = sqrt_2_over_pi * (a_row + 0.044715 * a_cubed)
    tanh_result = tanh(tanh_arg)
    geglu_a = 0.5 * a_row * (1 + tanh_result)
    geglu_a = geglu_a.to(dc_row.dtype).to(tl.float32)

    db_row = dc_row.cast(tl.float32) * geglu_a

    # Gradient w.r.t. a can be computed with:
    # b * (0.5 * (1 + tanh(z)) + 0.5 * a * (1 - tanh(z)^2) * (sqrt(2/pi) * (1 + 3 * 0.044715 * a^2)))
    # where z = sqrt(2/pi) * (a + 0.044715 * a^3)
    term1 = 0.5 * (1 + tanh_result)
    tanh_sq = tanh_result * tanh_result
    term2 = 0.5 * a_row * (1 - tanh_sq) * (sqrt_2_over_pi * (1 + 3 * 0.044715 * a_row * a_row))
    da_row = dc_row * b_row * (term1 + term2)

    tl.store(a + col_offsets, da_row, mask=mask)
    tl.store(b + col_offsets, db_row.to(dc_row.dtype), mask=mask)


def test_liger_geglu_forward_and_backward(device, rng, poison):
    n_rows, n_cols = 7, 300
    on = lambda a: at.asarray(a, device=device)  # noqa: E731
    a, b, dc = (rng.standard_normal((n_rows, n_cols)).astype(np.float32) for _ in range(3))
    c = on(poison((n_rows, n_cols), np.float32))
    A, B = on(a), on(b)
    block = at.next_power_of_2(n_cols)
    _geglu_tanh_forward_kernel[(n_rows,)](A, B, c, c.stride(-2), n_cols=n_cols, BLOCK_SIZE=block)
    a64, b64, dc64 = a.astype(np.float64), b.astype(np.float64), dc.astype(np.float64)
    s = math.sqrt(2 / math.pi)
    t = np.tanh(s * (a64 + 0.044715 * a64 ** 3))
    gelu = 0.5 * a64 * (1 + t)
    np.testing.assert_allclose(c.numpy(), gelu * b64, rtol=1e-5, atol=1e-6)

    _geglu_tanh_backward_kernel[(n_rows,)](on(dc), A, B, n_cols, n_cols=n_cols, BLOCK_SIZE=block)
    da = dc64 * b64 * (0.5 * (1 + t) + 0.5 * a64 * (1 - t * t) * s * (1 + 3 * 0.044715 * a64 ** 2))
    np.testing.assert_allclose(A.numpy(), da, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(B.numpy(), dc64 * gelu, rtol=1e-5, atol=1e-6)
