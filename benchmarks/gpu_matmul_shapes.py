"""fp16 matmul 4096^3 on the GPU in two loop shapes (addresses recomputed from k, and
Triton's carried pointer tiles), beside Triton.  Run: python3 benchmarks/gpu_matmul_shapes.py"""
import os

import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

from kernels import ANYTILE, make_kernels  # this folder is sys.path[0]

matmul_kernel, at_carried = ANYTILE.matmul, ANYTILE.matmul_carried
tr_carried = make_kernels(triton.jit, ttl).matmul_carried
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
# AT_WGMMA=0,1: the anytile rows without and with Hopper's warpgroup MMA (wgmma=True)
wgmma_modes = [bool(int(v)) for v in os.environ.get("AT_WGMMA", "0").split(",")]
cases = [(f"anytile{' wgmma' if wg else ''}, recomputed addresses {cf}", matmul_kernel, (S, S), cf, wg)
         for wg in wgmma_modes for cf in at_cfgs]
cases += [(f"anytile{' wgmma' if wg else ''}, carried pointers {cf}", at_carried, (), cf, wg)
          for wg in wgmma_modes for cf in at_cfgs[:2]]
tr_cfgs = [tuple(int(v) for v in c.replace("/", "x").split("x")) for c in os.environ.get(
    "TR_SHAPES", "128x128x32/4/3,128x128x64/8/3").split(",")]
cases += [(f"triton, carried pointers {cf}", tr_carried, (), cf, None) for cf in tr_cfgs]
for name, fn, extra, cfg, wg in cases:
    bm, bn, bk, w, st = cfg
    opts = {} if wg is None else {"wgmma": wg}
    run = lambda: fn[(S // bm, S // bn)](a, b, c, *extra, *sizes, BM=bm, BN=bn,  # noqa: E731
                                         BK=bk, num_warps=w, num_stages=st, **opts)
    try:
        run()
        torch.cuda.synchronize()
        err = ((c - ref).norm() / ref.norm()).item()
        print(f"{name:60s} {tflops(do_bench(run, return_mode='median')):6.0f} TFLOP/s  rel err {err:.1e}")
    except Exception as exc:
        print(f"{name:60s} FAILED {type(exc).__name__}: {str(exc)[:200]}")
