"""Where anytile's attention forward loses time: variants of the kernel, each timed on anytile
and Triton (same source), D=64, B=4 H=32 N=4096 fp16, non-causal.  Diagnosis only: variants
that change the math are timed, not checked.

    python3 benchmarks/gpu_attention_ablation.py"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("ANYTILE_DEVICE", "cuda:0")
import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

import anytile as at
import anytile.language as tl


def make(jit, lang):
    def attn(Q, K, V, O, sm_scale, N_CTX, stride_h, stride_n,
             BM: lang.constexpr, BN: lang.constexpr, D: lang.constexpr, VARIANT: lang.constexpr):
        start_m = lang.program_id(0)
        base = lang.program_id(1).to(lang.int64) * stride_h
        offs_m = start_m * BM + lang.arange(0, BM)
        offs_n = lang.arange(0, BN)
        offs_d = lang.arange(0, D)
        q = lang.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
        m_i = lang.zeros((BM,), lang.float32) - float("inf")
        l_i = lang.zeros((BM,), lang.float32) + 1.0
        acc = lang.zeros((BM, D), lang.float32)
        for start_n in range(0, N_CTX, BN):
            if VARIANT == "k_rows":      # K read as BN x D rows (contiguous), then transposed
                kr = lang.load(K + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
                qk = lang.dot(q, lang.trans(kr))
            else:
                k = lang.load(K + base + (start_n + offs_n)[None, :] * stride_n + offs_d[:, None])
                qk = lang.dot(q, k)
            if VARIANT == "one_dot":     # no softmax, no second dot
                acc += qk
            else:
                m_ij = lang.maximum(m_i, lang.max(qk, 1) * sm_scale)
                qk = qk * sm_scale - m_ij[:, None]
                p = qk * 0.5 + 1.0 if VARIANT == "no_exp" else lang.math.exp2(qk)
                alpha = lang.math.exp2(m_i - m_ij)
                l_i = l_i * alpha + lang.sum(p, 1)
                acc = acc * alpha[:, None]
                v = lang.load(V + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
                acc = lang.dot(p.to(lang.float16), v, acc)
                m_i = m_ij
        acc = acc / l_i[:, None]
        lang.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], acc.to(lang.float16))
    return jit(attn)


def main() -> None:
    B, H, N, D = 4, 32, 4096, 64
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    flop = 4.0 * B * H * N * N * D
    rows = []
    kernels = {"anytile": make(at.jit, tl), "triton": make(triton.jit, ttl)}
    for variant in ("base", "no_exp", "k_rows", "one_dot"):
        for (BM, BN, w, s) in ((128, 64, 8, 3), (64, 64, 4, 2), (128, 64, 4, 1)):
            cells = []
            for side in ("anytile", "triton"):
                kern = kernels[side]
                try:
                    run = lambda: kern[(N // BM, B * H)](q, k, v, o, 0.125, N, N * D, D, BM=BM, BN=BN,  # noqa: E731
                                                         D=D, VARIANT=variant, num_warps=w, num_stages=s)
                    run()
                    ms = do_bench(run, return_mode="median")
                    cells.append(f"{flop / ms * 1e-9:.0f}")
                except Exception as exc:  # noqa: BLE001
                    cells.append(f"error {type(exc).__name__}: {str(exc)[:80]}")
            rows.append(f"| {variant} | {BM}x{BN} w{w} s{s} | {cells[0]} | {cells[1]} |")
            print(rows[-1], flush=True)
    print("\n| variant | config | anytile TFLOP/s | Triton TFLOP/s |\n| --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    sys.exit(main())
