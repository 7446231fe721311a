"""One matmul launch of either compiler, for a profiler on the lent GPU machine:

    ncu --section WarpStateStats python3 benchmarks/gpu_profile_matmul.py anytile matmul 128,128,32,4,3

Side (anytile or triton), kernel (matmul: carried pointers, fp16 -> fp32 at 4096^3;
persistent: fp16 out at 8192^3, tiles num_programs apart; indexed_matmul: one tile a program,
addresses from k each step, fp16 out at 8192^3; wrapped_matmul: indices wrapped by % M and
% N and the K tail masked, as Triton's tutorial writes it, fp16 out at 4096^3), config BMxBNxBK, warps, stages.  The
environment's PROFILE_SIZE and PROFILE_OUT (fp16 or fp32) override the size and output type.  Launches the kernel
three times (compile, warm-up, the one to profile: ``--launch-skip 2``) and checks it; a
fourth argument names a file for its cubin."""
import os
import sys

os.environ.setdefault("ANYTILE_DEVICE", "cuda:0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import triton  # noqa: E402

import gpu_matmul as gm  # noqa: E402


def main() -> None:
    side, which, cfg = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")]
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
    for _ in range(3):
        if which == "persistent":
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            compiled = persist[(min(sms, tiles),)](a, b, c, size, size, size, size, size, size, BM=bm, BN=bn,
                                        BK=bk, GROUP=8, num_warps=w, num_stages=s)
        elif which == "wrapped_matmul":
            compiled = kernels[9][(tiles,)](a, b, c, size, size, size, size, size, size, BM=bm, BN=bn,
                                            BK=bk, GROUP=8, num_warps=w, num_stages=s)
        elif which == "indexed_matmul":
            compiled = indexed[(tiles,)](a, b, c, size, size, size, size, size, size, BM=bm, BN=bn, BK=bk,
                                         GROUP=8, num_warps=w, num_stages=s)
        else:
            compiled = matmul[(tiles,)](a, b, c, size, size, size, size, size, size, BM=bm, BN=bn, BK=bk,
                             GROUP=8, RELU=False, INT=False, num_warps=w, num_stages=s)
    torch.cuda.synchronize()
    ok = torch.allclose(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)
    print(f"{side} {which} {cfg}: {'ok' if ok else 'WRONG'}")
    if len(sys.argv) > 4:       # the cubin, for cuobjdump -sass
        with open(sys.argv[4], "wb") as f:
            f.write(compiled.asm["cubin"])


if __name__ == "__main__":
    main()
