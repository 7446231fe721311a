"""Layer-norm forward, one row per program.  Run: python examples/layernorm.py [DEVICE]"""
import sys

import numpy as np

import anytile as at
import anytile.language as tl


@at.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, diff * rstd * w + b, mask=mask)


def layernorm(x, w, b, eps=1e-5):
    rows, n = x.shape
    y = at.empty_like(x)
    layernorm_kernel[(rows,)](x, y, w, b, x.stride(0), n, eps, BLOCK=at.next_power_of_2(n))
    return y


def check(device):
    rng = np.random.default_rng(3)
    xh = rng.standard_normal((64, 500)).astype(np.float32)
    wh = rng.standard_normal(500).astype(np.float32)
    bh = rng.standard_normal(500).astype(np.float32)
    out = layernorm(*(at.asarray(a, device=device) for a in (xh, wh, bh))).numpy()
    x64 = xh.astype(np.float64)
    ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * wh + bh
    err = float(np.max(np.abs(out - ref)))
    return {"ok": err <= 1e-4, "detail": f"64x500, max abs err {err:.1e}"}


if __name__ == "__main__":
    print(check(at.device(sys.argv[1] if len(sys.argv) > 1 else None)))
