"""Fused attention, forward and backward, written the way Triton programs write it: a
``@jit`` helper that returns the tensor descriptor it is given or makes one
(``isinstance(x, tl.tensor_descriptor)``), descriptors passed to ``@jit`` helpers that run
the inner loops and return tuples, run-time loop bounds, and the online softmax in base 2.
Checked against a float64 NumPy reference on every usable device."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl

LOG2E = 1.4426950408889634


@at.jit
def _descriptor_of(x, shape, strides, block_shape):
    """``x`` itself when it is already a descriptor, else a descriptor over the array at x."""
    if isinstance(x, tl.tensor_descriptor):
        return x
    return tl.make_tensor_descriptor(x, shape, strides, block_shape)


@at.jit
def _online_softmax(acc, row_sum, row_max, q, k_desc, v_desc, first_row, lo, hi, scale_log2e,
                    rows, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    for start in tl.range(lo, hi, BLOCK_N):
        k = k_desc.load([first_row + start, 0])
        s = tl.dot(q, k.T) * scale_log2e
        if DIAGONAL:
            s = tl.where(rows[:, None] >= start + cols[None, :], s, -1.0e6)
        new_max = tl.maximum(row_max, tl.max(s, 1))
        p = tl.exp2(s - new_max[:, None])
        alpha = tl.exp2(row_max - new_max)
        v = v_desc.load([first_row + start, 0])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        row_sum = row_sum * alpha + tl.sum(p, 1)
        row_max = new_max
    return acc, row_sum, row_max


@at.jit
def attention_forward(q, k, v, o, lse, scale, n_ctx, HEAD: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    block_m, head = tl.program_id(0), tl.program_id(1)
    rows_all = tl.num_programs(1) * n_ctx
    q_desc = _descriptor_of(q, [rows_all, HEAD], [HEAD, 1], [BLOCK_M, HEAD])
    k_desc = _descriptor_of(k, shape=[rows_all, HEAD], strides=[HEAD, 1],
                            block_shape=[BLOCK_N, HEAD])
    v_desc = _descriptor_of(v, [rows_all, HEAD], [HEAD, 1], [BLOCK_N, HEAD])
    o_desc = _descriptor_of(o, [rows_all, HEAD], [HEAD, 1], [BLOCK_M, HEAD])
    first_row = head * n_ctx
    start_m = block_m * BLOCK_M
    rows = start_m + tl.arange(0, BLOCK_M)
    scale_log2e = scale * 1.4426950408889634
    acc = tl.zeros([BLOCK_M, HEAD], tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    q_tile = q_desc.load([first_row + start_m, 0])
    if CAUSAL:
        acc, row_sum, row_max = _online_softmax(acc, row_sum, row_max, q_tile, k_desc, v_desc,
                                                first_row, 0, start_m, scale_log2e, rows,
                                                BLOCK_N, False)
        acc, row_sum, row_max = _online_softmax(acc, row_sum, row_max, q_tile, k_desc, v_desc,
                                                first_row, start_m, start_m + BLOCK_M,
                                                scale_log2e, rows, BLOCK_N, True)
    else:
        acc, row_sum, row_max = _online_softmax(acc, row_sum, row_max, q_tile, k_desc, v_desc,
                                                first_row, 0, n_ctx, scale_log2e, rows,
                                                BLOCK_N, False)
    tl.store(lse + head * n_ctx + rows, row_max + tl.log2(row_sum))   # base-2 logsumexp
    o_desc.store([first_row + start_m, 0], (acc / row_sum[:, None]).to(o_desc.dtype))


@at.jit
def attention_backward_delta(o, do, delta, HEAD: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tile = rows[:, None] * HEAD + tl.arange(0, HEAD)[None, :]
    o_t = tl.load(o + tile).to(tl.float32)
    tl.store(delta + rows, tl.sum(o_t * tl.load(do + tile).to(tl.float32), axis=1))


@at.jit
def _dkdv_steps(dk, dv, q, do, lse, delta, k_t, v_t, start_n, lo, hi, scale_log2e,
                HEAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                MASKED: tl.constexpr):
    cols = start_n + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD)
    for start_m in tl.range(lo, hi, BLOCK_M):
        rows = start_m + tl.arange(0, BLOCK_M)
        q_tr = tl.load(q + rows[None, :] * HEAD + d[:, None])
        do_t = tl.load(do + rows[:, None] * HEAD + d[None, :])
        p_tr = tl.exp2(tl.dot(k_t, q_tr) * scale_log2e - tl.load(lse + rows)[None, :])
        if MASKED:
            p_tr = tl.where(rows[None, :] >= cols[:, None], p_tr, 0.0)
        dv += tl.dot(p_tr.to(tl.float16), do_t)
        dp_tr = tl.dot(v_t, tl.trans(do_t))
        ds_tr = p_tr * (dp_tr - tl.load(delta + rows)[None, :])
        dk += tl.dot(ds_tr.to(tl.float16), tl.trans(q_tr))
    return dk, dv


@at.jit
def attention_backward_dkdv(q, k, v, do, lse, delta, dk_out, dv_out, scale, n_ctx,
                            HEAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            CAUSAL: tl.constexpr):
    tl.static_assert(BLOCK_N % BLOCK_M == 0)
    start_n, head = tl.program_id(0) * BLOCK_N, tl.program_id(1)
    offset = head * n_ctx * HEAD
    q += offset
    do += offset
    lse += head * n_ctx
    delta += head * n_ctx
    tile = offset + (start_n + tl.arange(0, BLOCK_N))[:, None] * HEAD + tl.arange(0, HEAD)[None, :]
    k_t, v_t = tl.load(k + tile), tl.load(v + tile)
    dk = tl.zeros([BLOCK_N, HEAD], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD], tl.float32)
    scale_log2e = scale * 1.4426950408889634
    lo = 0
    if CAUSAL:
        dk, dv = _dkdv_steps(dk, dv, q, do, lse, delta, k_t, v_t, start_n, start_n,
                             start_n + BLOCK_N, scale_log2e, HEAD, BLOCK_M, BLOCK_N, MASKED=True)
        lo = start_n + BLOCK_N
    dk, dv = _dkdv_steps(dk, dv, q, do, lse, delta, k_t, v_t, start_n, lo, n_ctx, scale_log2e,
                         HEAD, BLOCK_M, BLOCK_N, MASKED=False)
    tl.store(dk_out + tile, dk * scale)
    tl.store(dv_out + tile, dv)


@at.jit
def _dq_steps(dq, q_t, do_t, lse_rows, delta_rows, k, v, start_m, lo, hi, scale_log2e,
              HEAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              MASKED: tl.constexpr):
    rows = start_m + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD)
    for start_n in tl.range(lo, hi, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        k_tr = tl.load(k + cols[None, :] * HEAD + d[:, None])
        v_tr = tl.load(v + cols[None, :] * HEAD + d[:, None])
        p = tl.exp2(tl.dot(q_t, k_tr) * scale_log2e - lse_rows[:, None])
        if MASKED:
            p = tl.where(rows[:, None] >= cols[None, :], p, 0.0)
        ds = p * (tl.dot(do_t, v_tr) - delta_rows[:, None])
        dq += tl.dot(ds.to(tl.float16), tl.trans(k_tr))
    return dq


@at.jit
def attention_backward_dq(q, k, v, do, lse, delta, dq_out, scale, n_ctx, HEAD: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m, head = tl.program_id(0) * BLOCK_M, tl.program_id(1)
    offset = head * n_ctx * HEAD
    k += offset
    v += offset
    rows = start_m + tl.arange(0, BLOCK_M)
    tile = offset + rows[:, None] * HEAD + tl.arange(0, HEAD)[None, :]
    q_t, do_t = tl.load(q + tile), tl.load(do + tile)
    lse_rows = tl.load(lse + head * n_ctx + rows)
    delta_rows = tl.load(delta + head * n_ctx + rows)
    dq = tl.zeros([BLOCK_M, HEAD], tl.float32)
    scale_log2e = scale * 1.4426950408889634
    hi = n_ctx
    if CAUSAL:
        dq = _dq_steps(dq, q_t, do_t, lse_rows, delta_rows, k, v, start_m, start_m,
                       start_m + BLOCK_M, scale_log2e, HEAD, BLOCK_M, BLOCK_N, MASKED=True)
        hi = start_m
    dq = _dq_steps(dq, q_t, do_t, lse_rows, delta_rows, k, v, start_m, 0, hi, scale_log2e,
                   HEAD, BLOCK_M, BLOCK_N, MASKED=False)
    tl.store(dq_out + tile, dq * scale)


def _reference(q, k, v, do, scale, causal):
    """Attention and its gradients in float64 (``q, k, v, do``: heads x n x head_dim)."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    p = np.exp(s - lse[..., None])
    dp = do @ v.transpose(0, 2, 1)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return dict(o=p @ v, lse=lse * LOG2E, dq=ds @ k * scale,
                dk=ds.transpose(0, 2, 1) @ q * scale, dv=p.transpose(0, 2, 1) @ do)


HEADS, N_CTX, HEAD = 2, 64, 32


def _inputs(rng):
    return [(rng.standard_normal((HEADS, N_CTX, HEAD)) * 0.5).astype(np.float16)
            for _ in range(4)]


def _forward(device, q, k, v, scale, causal, poison, host_descriptors):
    o = at.asarray(poison((HEADS, N_CTX, HEAD), np.float16), device=device)
    lse = at.asarray(poison((HEADS, N_CTX), np.float32), device=device)
    args = [at.asarray(x, device=device) for x in (q, k, v)] + [o]
    if host_descriptors:     # the helper returns these as they are
        rows = HEADS * N_CTX
        args = [at.TensorDescriptor(a, [rows, HEAD], [HEAD, 1], [block, HEAD])
                for a, block in zip(args, (32, 16, 16, 32))]
    attention_forward[(N_CTX // 32, HEADS)](*args, lse, scale, N_CTX, HEAD=HEAD, BLOCK_M=32,
                                             BLOCK_N=16, CAUSAL=causal)
    return o.numpy(), lse.numpy()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("host_descriptors", [False, True], ids=["pointers", "descriptors"])
def test_attention_forward(device, rng, poison, causal, host_descriptors):
    q, k, v, do = _inputs(rng)
    want = _reference(q, k, v, do, 0.3, causal)
    o, lse = _forward(device, q, k, v, 0.3, causal, poison, host_descriptors)
    np.testing.assert_allclose(o, want["o"], atol=1e-2, rtol=0)
    np.testing.assert_allclose(lse, want["lse"], atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward(device, rng, poison, causal):
    q, k, v, do = _inputs(rng)
    scale = 0.3
    want = _reference(q, k, v, do, scale, causal)
    o, lse = _forward(device, q, k, v, scale, causal, poison, False)
    on = {name: at.asarray(x, device=device)
          for name, x in dict(q=q, k=k, v=v, do=do, o=o, lse=lse).items()}
    delta = at.asarray(poison((HEADS, N_CTX), np.float32), device=device)
    attention_backward_delta[(HEADS * N_CTX // 32,)](on["o"], on["do"], delta, HEAD=HEAD,
                                                     BLOCK=32)
    grads = {name: at.asarray(poison((HEADS, N_CTX, HEAD), np.float32), device=device)
             for name in ("dq", "dk", "dv")}
    common = (on["q"], on["k"], on["v"], on["do"], on["lse"], delta)
    attention_backward_dkdv[(N_CTX // 32, HEADS)](*common, grads["dk"], grads["dv"], scale,
                                                  N_CTX, HEAD=HEAD, BLOCK_M=16, BLOCK_N=32,
                                                  CAUSAL=causal)
    attention_backward_dq[(N_CTX // 32, HEADS)](*common, grads["dq"], scale, N_CTX, HEAD=HEAD,
                                                BLOCK_M=32, BLOCK_N=16, CAUSAL=causal)
    for name, grad in grads.items():
        np.testing.assert_allclose(grad.numpy(), want[name], atol=1e-2, rtol=0, err_msg=name)
