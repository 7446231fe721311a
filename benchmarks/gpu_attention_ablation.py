"""Where anytile's attention forward loses time: variants of ``gpu_attention.py``'s kernel
(its ``VARIANT``), each timed on anytile and Triton (same source), D=64, B=4 H=32 N=4096
fp16, non-causal.  Diagnosis only: variants that change the math are timed, not checked.

    python3 benchmarks/gpu_attention_ablation.py"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("ANYTILE_DEVICE", "cuda:0")
import torch
from triton.testing import do_bench

from gpu_attention import AT_ATTN, TR_ATTN  # noqa: E402  (this folder is sys.path[0])


def main() -> None:
    B, H, N, D = 4, 32, 4096, 64
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    flop = 4.0 * B * H * N * N * D
    rows = []
    kernels = {"anytile": AT_ATTN, "triton": TR_ATTN}
    for variant in ("base", "no_exp", "k_rows", "one_dot"):
        for (BM, BN, w, s) in ((128, 64, 8, 3), (64, 64, 4, 2), (128, 64, 4, 1)):
            cells = []
            for side in ("anytile", "triton"):
                kern = kernels[side]
                try:
                    run = lambda: kern[(N // BM, B * H)](q, k, v, o, 0.125, N, N * D, D, BM=BM, BN=BN,  # noqa: E731
                                                         D=D, CAUSAL=False, VARIANT=variant,
                                                         num_warps=w, num_stages=s)
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
