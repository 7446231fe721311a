"""fp16 matmul 4096^3 on the GPU in two loop shapes (addresses recomputed from k, and
Triton's carried pointer tiles), beside Triton.  Run: python3 benchmarks/gpu_matmul_shapes.py"""
import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

import anytile as at
import anytile.language as tl


@at.jit
def mm_recompute(a_ptr, b_ptr, c_ptr, K, sam, sbk, scm,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc)


def carried(lang):
    def mm_carried(a_ptr, b_ptr, c_ptr, K, sam, sbk, scm,
                   BM: lang.constexpr, BN: lang.constexpr, BK: lang.constexpr):
        rm = lang.program_id(0) * BM + lang.arange(0, BM)
        rn = lang.program_id(1) * BN + lang.arange(0, BN)
        rk = lang.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :]
        acc = lang.zeros((BM, BN), dtype=lang.float32)
        for _ in range(0, K, BK):
            acc = lang.dot(lang.load(a_ptrs), lang.load(b_ptrs), acc)
            a_ptrs += BK
            b_ptrs += BK * sbk
        lang.store(c_ptr + rm[:, None] * scm + rn[None, :], acc)
    return mm_carried


at_carried = at.jit(carried(tl))
tr_carried = triton.jit(carried(ttl))
S = 4096
a = torch.randn(S, S, device="cuda", dtype=torch.float16)
b = torch.randn(S, S, device="cuda", dtype=torch.float16)
c = torch.empty(S, S, device="cuda")
ref = a.float() @ b.float()
tflops = lambda ms: 2 * S ** 3 / ms / 1e9  # noqa: E731
for name, fn, cfg in (("anytile, recomputed addresses", mm_recompute, (128, 128, 32, 4, 3)),
                      ("anytile, carried pointers", at_carried, (128, 128, 32, 4, 3)),
                      ("triton, carried pointers", tr_carried, (128, 128, 32, 4, 3)),
                      ("triton, carried pointers, 128x128x64 w8", tr_carried, (128, 128, 64, 8, 3))):
    bm, bn, bk, w, st = cfg
    run = lambda: fn[(S // bm, S // bn)](a, b, c, S, S, S, S, BM=bm, BN=bn, BK=bk,  # noqa: E731
                                         num_warps=w, num_stages=st)
    try:
        run()
        torch.cuda.synchronize()
        err = ((c - ref).norm() / ref.norm()).item()
        print(f"{name:45s} {tflops(do_bench(run, return_mode='median')):6.0f} TFLOP/s  rel err {err:.1e}")
    except Exception as exc:
        print(f"{name:45s} FAILED {type(exc).__name__}: {str(exc)[:200]}")
