"""The kernels the benchmarks time, written once against a Triton-style language module and
built for anytile here (`cpu.py`, `cpu_checked.py`, `gpu.py`, `gpu_checked.py` and `opencl.py`
import them; the scripts put this folder first on `sys.path`) and for Triton by
`make_kernels(triton.jit, ttl)`, so both sides run the very same source."""
from types import SimpleNamespace

import anytile as at
import anytile.language as tl


def make_kernels(jit, lang) -> SimpleNamespace:
    """``add``, ``softmax``, ``layernorm`` and ``matmul`` (addresses recomputed from k),
    decorated with ``jit``."""

    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: lang.constexpr):
        offs = lang.program_id(0) * BLOCK + lang.arange(0, BLOCK)
        mask = offs < n
        lang.store(out_ptr + offs, lang.load(x_ptr + offs, mask=mask) + lang.load(y_ptr + offs, mask=mask),
                   mask=mask)

    def softmax(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: lang.constexpr):
        row = lang.program_id(0)
        cols = lang.arange(0, BLOCK)
        mask = cols < n_cols
        x = lang.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
        x = x - lang.max(x, axis=0)
        num = lang.exp(x)
        lang.store(out_ptr + row * out_stride + cols, num / lang.sum(num, axis=0), mask=mask)

    def layernorm(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK: lang.constexpr):
        row = lang.program_id(0)
        cols = lang.arange(0, BLOCK)
        mask = cols < N
        x = lang.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
        mean = lang.sum(x, axis=0) / N
        diff = lang.where(mask, x - mean, 0.0)
        rstd = 1 / lang.sqrt(lang.sum(diff * diff, axis=0) / N + eps)
        w = lang.load(w_ptr + cols, mask=mask)
        b = lang.load(b_ptr + cols, mask=mask)
        lang.store(y_ptr + row * stride + cols, diff * rstd * w + b, mask=mask)

    def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
               BM: lang.constexpr, BN: lang.constexpr, BK: lang.constexpr):
        # unit inner strides; addresses recomputed from k (gpu_matmul.py carries pointers)
        rm = lang.program_id(0) * BM + lang.arange(0, BM)
        rn = lang.program_id(1) * BN + lang.arange(0, BN)
        rk = lang.arange(0, BK)
        acc = lang.zeros((BM, BN), dtype=lang.float32)
        for k in range(0, K, BK):
            a = lang.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :])
            b = lang.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :])
            acc = lang.dot(a, b, acc)
        lang.store(c_ptr + rm[:, None] * scm + rn[None, :], acc)

    return SimpleNamespace(add=jit(add), softmax=jit(softmax), layernorm=jit(layernorm),
                           matmul=jit(matmul))


ANYTILE = make_kernels(at.jit, tl)
add_kernel, softmax_kernel = ANYTILE.add, ANYTILE.softmax
layernorm_kernel, matmul_kernel = ANYTILE.layernorm, ANYTILE.matmul
