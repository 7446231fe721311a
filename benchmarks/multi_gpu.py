"""Two GPUs in one process: copies between them and what a launch costs when the kernel's
device is not the caller's current one.  Run through ``bash benchmarks/gpu.sh multi`` on a
machine with two NVIDIA GPUs; torch is the peer, measured in the same run.  ``--one-gpu``
(run with ``CUDA_VISIBLE_DEVICES=0``): the tiny launch with one visible GPU, where the launch
asks the driver nothing about contexts, beside ``torch.add(out=)``.

* copy GPU0 -> GPU1 of 256 MiB: ``at.Array.to("cuda:1")`` against ``tensor.to("cuda:1")``
  (each allocates its destination; median of 7, after a warm-up);
* launch of a 16-element vector add, microseconds per launch (mean of 3 x 2000, best run):
  arrays on cuda:0 with torch's current device 0; arrays on cuda:1 with torch's current
  device 0 (anytile pushes cuda:1's context for the launch and pops it after); arrays on
  cuda:1 with torch's current device 1; and ``torch.add(out=)`` of the same size on cuda:1.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import anytile as at
from anytile_conformance.catalogue.kernels import vector_add_kernel
from anytile_nvidia.driver import _context_guard, driver


def copy_rows() -> list[str]:
    n = 64 << 20                                  # 256 MiB of float32
    src_t = torch.arange(n, dtype=torch.float32, device="cuda:0")
    src_a = at.asarray(src_t, device="cuda:0")
    times = {"anytile": [], "torch": []}
    for rep in range(8):
        torch.cuda.synchronize(0), torch.cuda.synchronize(1)
        t0 = time.perf_counter()
        moved = src_a.to("cuda:1")
        at.device("cuda:1").synchronize()
        t1 = time.perf_counter()
        peer = src_t.to("cuda:1")
        torch.cuda.synchronize(1)
        t2 = time.perf_counter()
        if rep:
            times["anytile"].append(t1 - t0)
            times["torch"].append(t2 - t1)
    assert torch.equal(torch.as_tensor(moved.numpy()), peer.cpu())
    backend, dst = src_a.device.backend, at.empty(src_a.shape, src_a.dtype, "cuda:1")
    into = torch.empty_like(peer)
    times["anytile, into an existing array"], times["torch, into an existing tensor"] = [], []
    for rep in range(8):
        torch.cuda.synchronize(0), torch.cuda.synchronize(1)
        t0 = time.perf_counter()
        backend.copy_between(dst.buffer, 0, src_a.buffer, 0, 4 * n)   # returns when done
        t1 = time.perf_counter()
        into.copy_(src_t)
        torch.cuda.synchronize(1)
        t2 = time.perf_counter()
        if rep:
            times["anytile, into an existing array"].append(t1 - t0)
            times["torch, into an existing tensor"].append(t2 - t1)
    gbs = {k: 4 * n / statistics.median(v) / 1e9 for k, v in times.items()}
    peer_ok = driver.can_access_peer(0, 1)
    a, t = gbs["anytile, into an existing array"], gbs["torch, into an existing tensor"]
    return [f"| copy cuda:0 -> cuda:1, 256 MiB, new destination (GB/s) | {gbs['anytile']:.0f} | "
            f"{gbs['torch']:.0f} | {gbs['anytile'] / gbs['torch']:.2f}x | peer access: {peer_ok} |",
            f"| copy cuda:0 -> cuda:1, 256 MiB, existing destination (GB/s) | {a:.0f} | {t:.0f} "
            f"| {a / t:.2f}x | |"]


def synchronize_all() -> None:
    for device in range(torch.cuda.device_count()):
        torch.cuda.synchronize(device)


def launch_us(run, reps: int = 2000) -> float:
    best = float("inf")
    for _ in range(3):
        synchronize_all()
        t0 = time.perf_counter()
        for _ in range(reps):
            run()
        synchronize_all()
        best = min(best, (time.perf_counter() - t0) / reps * 1e6)
    return best


def launch_rows() -> list[str]:
    def tensors(device):
        return [torch.ones(16, device=device) for _ in range(3)]
    rows = []
    torch.cuda.set_device(0)
    x0, y0, o0 = tensors("cuda:0")
    x1, y1, o1 = tensors("cuda:1")
    for x, y, o in ((x0, y0, o0), (x1, y1, o1)):
        vector_add_kernel[(1,)](x, y, o, 16, BLOCK=16)
    same = launch_us(lambda: vector_add_kernel[(1,)](x0, y0, o0, 16, BLOCK=16))
    other = launch_us(lambda: vector_add_kernel[(1,)](x1, y1, o1, 16, BLOCK=16))
    assert torch.cuda.current_device() == 0 and torch.equal(o1, x1 + y1)
    torch.cuda.set_device(1)
    own = launch_us(lambda: vector_add_kernel[(1,)](x1, y1, o1, 16, BLOCK=16))
    peer = launch_us(lambda: torch.add(x1, y1, out=o1))
    torch.cuda.set_device(0)
    here, _ = _context_guard(driver.context_calls, int(driver.context(0)))
    t0 = time.perf_counter()
    for _ in range(100_000):
        here()
    check_us = (time.perf_counter() - t0) / 100_000 * 1e6
    rows.append(f"| the launch's context check alone, cuCtxGetCurrent by ctypes (us) | "
                f"{check_us:.2f} | | | part of every launch |")
    rows.append(f"| launch, arrays on cuda:0, torch on device 0 (us) | {same:.2f} | {peer:.2f} "
                f"| {peer / same:.2f}x | |")
    rows.append(f"| launch, arrays on cuda:1, torch on device 0 (us) | {other:.2f} | {peer:.2f} "
                f"| {peer / other:.2f}x | context pushed and popped |")
    rows.append(f"| launch, arrays on cuda:1, torch on device 1 (us) | {own:.2f} | {peer:.2f} "
                f"| {peer / own:.2f}x | |")
    return rows


def one_gpu_row() -> list[str]:
    x, y, o = (torch.ones(16, device="cuda:0") for _ in range(3))
    vector_add_kernel[(1,)](x, y, o, 16, BLOCK=16)
    assert torch.equal(o, x + y)
    ours = launch_us(lambda: vector_add_kernel[(1,)](x, y, o, 16, BLOCK=16))
    peer = launch_us(lambda: torch.add(x, y, out=o))
    return [f"| launch, one visible GPU (us) | {ours:.2f} | {peer:.2f} | {peer / ours:.2f}x | |"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--one-gpu", action="store_true",
                        help="only the launch with one visible GPU (CUDA_VISIBLE_DEVICES=0)")
    args = parser.parse_args()
    if args.one_gpu:
        lines = ["| what | anytile | torch | torch time / anytile time | note |",
                 "| --- | --- | --- | --- | --- |"] + one_gpu_row()
        print("\n".join(lines))
        return
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    lines = [f"# two GPUs: {', '.join(names)}; torch {torch.__version__}", "",
             "| what | anytile | torch | torch time / anytile time | note |",
             "| --- | --- | --- | --- | --- |"]
    lines += copy_rows() + launch_rows()
    text = "\n".join(lines)
    print(text)
    if args.out:
        open(args.out, "w").write(text + "\n")


if __name__ == "__main__":
    main()
