"""Where a tiny launch's time goes on the GPU machine: torch tensors vs at.Array arguments,
then a cProfile of the torch case.  Run: python3 benchmarks/gpu_launch_profile.py"""
import cProfile
import io
import pstats
import time

import numpy as np
import torch

import anytile as at
import anytile.language as tl


@at.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def per_launch(fn, count=5000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(count):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / count * 1e6


x = torch.randn(16, device="cuda")
out = torch.empty_like(x)
dev = at.device("cuda:0")
xa = at.asarray(np.random.rand(16).astype(np.float32), device=dev)
oa = at.empty((16,), np.float32, device=dev)
print(f"torch tensors: {per_launch(lambda: add[(1,)](x, x, out, 16, BLOCK=128)):.1f} us")
print(f"at.Array:      {per_launch(lambda: add[(1,)](xa, xa, oa, 16, BLOCK=128)):.1f} us")
pr = cProfile.Profile()
pr.enable()
for _ in range(3000):
    add[(1,)](x, x, out, 16, BLOCK=128)
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
print(s.getvalue()[:5000])
