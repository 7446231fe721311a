"""One launch of a matmul or attention kernel of either compiler, for a profiler (Nsight
Compute, through ``bash benchmarks/gpu.sh ncu|profile|stalls``):

    ncu --launch-skip 2 --launch-count 1 python3 benchmarks/gpu_profile.py SIDE KERNEL CONFIG [CUBIN]

SIDE is ``anytile`` or ``triton``.  Matmul kernels (``benchmarks/gpu_matmul.py``'s sources),
CONFIG ``BM,BN,BK,warps,stages``: ``matmul`` (carried pointers, fp16 -> fp32 at 4096^3),
``persistent`` (fp16 out at 8192^3, tiles ``num_programs`` apart), ``indexed_matmul`` (one tile
a program, addresses from k each step, fp16 out at 8192^3), ``wrapped_matmul`` (indices
wrapped by ``% M`` and ``% N``, the K tail masked, as Triton's tutorial writes it, fp16 out at
4096^3); the environment's ``PROFILE_SIZE`` and ``PROFILE_OUT`` (fp16 or fp32) override the
size and output type.  Attention kernels (``benchmarks/gpu_attention.py``'s), CONFIG
``BM,BN,warps,stages,D,causal``: ``attn_fwd`` (pointers, K by transposed addressing) and
``attn_fwd_desc`` (tensor descriptors, K read as rows and ``.T``), B=4, H=32, N=4096, fp16.
The kernel is launched three times (compile, warm-up, the one to profile) and checked; CUBIN
names a file for its cubin (``cuobjdump -sass``)."""
import math
import os
import sys

os.environ.setdefault("ANYTILE_DEVICE", "cuda:0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import triton  # noqa: E402

ATTENTION = ("attn_fwd", "attn_fwd_desc")


def run_matmul(side: str, which: str, cfg: list) -> tuple:
    """Three launches of a matmul kernel; ``(compiled, ok)``."""
    import gpu_matmul as gm
    bm, bn, bk, w, s = cfg
    kernels = gm.AT if side == "anytile" else gm.TR
    matmul, persist, indexed = kernels[0], kernels[1], kernels[7]
    size = int(os.environ.get("PROFILE_SIZE", 8192 if which in ("persistent", "indexed_matmul") else 4096))
    out = os.environ.get("PROFILE_OUT", "fp32" if which == "matmul" else "fp16")
    out_dtype = {"fp16": torch.float16, "fp32": torch.float32}[out]
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.empty(size, size, device="cuda", dtype=out_dtype)
    tiles = triton.cdiv(size, bm) * triton.cdiv(size, bn)
    dims = (a, b, c, size, size, size, size, size, size)
    for _ in range(3):
        if which == "persistent":
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            compiled = persist[(min(sms, tiles),)](*dims, BM=bm, BN=bn, BK=bk, GROUP=8,
                                                   num_warps=w, num_stages=s)
        elif which == "wrapped_matmul":
            compiled = kernels[9][(tiles,)](*dims, BM=bm, BN=bn, BK=bk, GROUP=8,
                                            num_warps=w, num_stages=s)
        elif which == "indexed_matmul":
            compiled = indexed[(tiles,)](*dims, BM=bm, BN=bn, BK=bk, GROUP=8,
                                         num_warps=w, num_stages=s)
        else:
            compiled = matmul[(tiles,)](*dims, BM=bm, BN=bn, BK=bk, GROUP=8, RELU=False,
                                        INT=False, num_warps=w, num_stages=s)
    torch.cuda.synchronize()
    return compiled, torch.allclose(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)


def run_attention(side: str, which: str, cfg: list) -> tuple:
    """Three launches of an attention kernel; ``(compiled, ok)``."""
    import gpu_attention as ga
    bm, bn, w, s, d, causal = cfg
    desc = which == "attn_fwd_desc"
    kern = {("anytile", False): ga.AT_ATTN, ("triton", False): ga.TR_ATTN,
            ("anytile", True): ga.AT_ATTN_DESC, ("triton", True): ga.TR_ATTN_DESC}[side, desc]
    B, H, N = 4, 32, 4096
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d)
    grid = (N // bm, B * H)
    if desc:
        make = ga.at.TensorDescriptor if side == "anytile" else ga.TritonDescriptor
        rows = [B * H * N, d]
        args = [make(x.view(*rows), rows, [d, 1], blk) for x, blk in
                ((q, [bm, d]), (k, [bn, d]), (v, [bn, d]), (o, [bm, d]))] + [scale, N]
    else:
        args = [q, k, v, o, scale, N, N * d, d]
    for _ in range(3):
        compiled = kern[grid](*args, BM=bm, BN=bn, D=d, CAUSAL=bool(causal), VARIANT="base",
                              num_warps=w, num_stages=s)
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal),
                                                           scale=scale)
    return compiled, (o.float() - ref.float()).abs().max().item() < 2e-2


def main() -> None:
    side, which, cfg = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")]
    run = run_attention if which in ATTENTION else run_matmul
    compiled, ok = run(side, which, cfg)
    print(f"{side} {which} {cfg}: {'ok' if ok else 'WRONG'}")
    if len(sys.argv) > 4:
        with open(sys.argv[4], "wb") as f:
            f.write(compiled.asm["cubin"])


if __name__ == "__main__":
    main()
