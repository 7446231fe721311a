"""fp16 matmul 4096^3 on the GPU in two loop shapes (addresses recomputed from k, and
Triton's carried pointer tiles), beside Triton.  Run: python3 benchmarks/gpu_matmul_shapes.py"""
import os

import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

import anytile as at
import anytile.language as tl
from kernels import matmul_kernel  # this folder is sys.path[0]


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
sizes = (S, S, S, S)                  # K, sam, sbk, scm
# anytile configurations (BMxBNxBK/warps/stages); AT_SHAPES overrides
at_cfgs = [tuple(int(v) for v in c.replace("/", "x").split("x")) for c in os.environ.get(
    "AT_SHAPES", "128x128x32/4/3,128x128x32/4/4,128x128x64/8/3,128x128x64/4/3,128x256x32/8/3").split(",")]
cases = [(f"anytile, recomputed addresses {cf}", matmul_kernel, (S, S), cf) for cf in at_cfgs]
cases += [(f"anytile, carried pointers {cf}", at_carried, (), cf) for cf in at_cfgs[:2]]
cases += [("triton, carried pointers (128, 128, 32, 4, 3)", tr_carried, (), (128, 128, 32, 4, 3)),
          ("triton, carried pointers (128, 128, 64, 8, 3)", tr_carried, (), (128, 128, 64, 8, 3))]
for name, fn, extra, cfg in cases:
    bm, bn, bk, w, st = cfg
    run = lambda: fn[(S // bm, S // bn)](a, b, c, *extra, *sizes, BM=bm, BN=bn,  # noqa: E731
                                         BK=bk, num_warps=w, num_stages=st)
    try:
        run()
        torch.cuda.synchronize()
        err = ((c - ref).norm() / ref.norm()).item()
        print(f"{name:60s} {tflops(do_bench(run, return_mode='median')):6.0f} TFLOP/s  rel err {err:.1e}")
    except Exception as exc:
        print(f"{name:60s} FAILED {type(exc).__name__}: {str(exc)[:200]}")
