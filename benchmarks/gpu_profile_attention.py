"""One attention-forward launch of either compiler, for a profiler on the lent GPU machine:

    ncu --section WarpStateStats python3 benchmarks/gpu_profile_attention.py anytile attn_fwd_desc 128,64,8,3,128,1

Side (anytile or triton), kernel (attn_fwd: pointers, K by transposed addressing;
attn_fwd_desc: tensor descriptors, K read as rows and ``.T``: benchmarks/gpu_attention.py's
two kernels), config BM, BN, warps, stages, head dim D, causal (0 or 1); B=4, H=32, N=4096,
fp16.  Launches the kernel three times (compile, warm-up, the one to profile:
``--launch-skip 2``) and checks the output against torch's attention; a fourth argument
names a file for its cubin."""
import math
import os
import sys

os.environ.setdefault("ANYTILE_DEVICE", "cuda:0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import gpu_attention as ga  # noqa: E402


def main() -> None:
    side, which, cfg = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")]
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
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=scale)
    err = (o.float() - ref.float()).abs().max().item()
    print(f"{side} {which} {cfg}: {'ok' if err < 2e-2 else 'WRONG'} (max error {err:.2g})")
    if len(sys.argv) > 4:
        with open(sys.argv[4], "wb") as f:
            f.write(compiled.asm["cubin"])


if __name__ == "__main__":
    main()
