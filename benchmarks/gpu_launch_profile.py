"""Where a tiny launch's time goes on the GPU machine: anytile with torch tensors and with
at.Array arguments (fast path), the NVIDIA raw launcher alone, Triton and torch.add side by
side, then a cProfile of the torch case.  Run: python3 benchmarks/gpu_launch_profile.py"""
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


def per_launch(fn, count=20000, repeats=5):
    """Median over ``repeats`` rounds of ``count`` launches, in microseconds per launch."""
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(count):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) / count * 1e6)
    return sorted(rounds)[len(rounds) // 2]


x = torch.randn(16, device="cuda")
out = torch.empty_like(x)
dev = at.device("cuda:0")
xa = at.asarray(np.random.rand(16).astype(np.float32), device=dev)
oa = at.empty((16,), np.float32, device=dev)
results = {}
add[(1,)](x, x, out, 16, BLOCK=128)
torch.cuda.synchronize()
assert torch.equal(out, x + x), "anytile (torch tensors) computed a wrong result"
results["anytile, torch tensors"] = per_launch(lambda: add[(1,)](x, x, out, 16, BLOCK=128))
add[(1,)](xa, xa, oa, 16, BLOCK=128)
assert np.array_equal(oa.numpy(), 2 * xa.numpy()), "anytile (at.Array) computed a wrong result"
results["anytile, at.Array"] = per_launch(lambda: add[(1,)](xa, xa, oa, 16, BLOCK=128))
print(f"fast-path entries: {len(add._fast_cache)} (expected 2)")
compiled = add[(1,)](xa, xa, oa, 16, BLOCK=128)
loaded = dev.backend.load(compiled, dev.info)
raw = dev.backend.launcher(loaded, dev.info)
if raw is not None:
    a = xa.data_ptr()
    results["NvidiaBackend.launcher alone"] = per_launch(lambda: raw(1, 1, 1, 0, None, a, a, a, 16))
    # the driver call alone, two ways: what the raw launcher's ctypes call is measured against
    import ctypes
    from cuda.bindings import driver as cu
    for slot, value in zip(loaded.slots, (a, a, a, 16)):
        slot.value = value
    threads = loaded.threads
    results["bare cuLaunchKernel, cuda.bindings"] = per_launch(lambda: cu.cuLaunchKernel(
        loaded.function, 1, 1, 1, threads, 1, 1, 0, 0, loaded.params_address, 0))
    bare = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    function, params = ctypes.c_void_p(int(loaded.function)), ctypes.c_void_p(loaded.params_address)
    results["bare cuLaunchKernel, ctypes"] = per_launch(lambda: bare(
        function, 1, 1, 1, threads, 1, 1, 0, None, params, None))
results["torch.add"] = per_launch(lambda: torch.add(x, x, out=out))
try:
    import triton
    import triton.language as ttl

    @triton.jit
    def tr_add(x_ptr, y_ptr, out_ptr, n, BLOCK: ttl.constexpr):
        offs = ttl.arange(0, BLOCK)
        mask = offs < n
        ttl.store(out_ptr + offs, ttl.load(x_ptr + offs, mask=mask) + ttl.load(y_ptr + offs, mask=mask), mask=mask)
    results["Triton 3.6, torch tensors"] = per_launch(lambda: tr_add[(1,)](x, x, out, 16, BLOCK=128))
except Exception as exc:  # noqa: BLE001
    print(f"triton: {type(exc).__name__}: {exc}")
print("| launch of a tiny kernel from Python | us per launch (median of 5 x 20000) |")
print("| --- | --- |")
for name, value in results.items():
    print(f"| {name} | {value:.2f} |")
pr = cProfile.Profile()
pr.enable()
for _ in range(3000):
    add[(1,)](x, x, out, 16, BLOCK=128)
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
print(s.getvalue()[:3000])
