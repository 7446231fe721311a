"""Vector add: the "hello world" of tile kernels.  Run: python examples/vector_add.py [DEVICE]"""
import sys

import numpy as np

import anytile as at
import anytile.language as tl


@at.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y, BLOCK=1024):
    out = at.empty_like(x)
    n = x.size
    add_kernel[(at.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


def check(device):
    rng = np.random.default_rng(0)
    n = 100_003
    xh = rng.standard_normal(n).astype(np.float32)
    yh = rng.standard_normal(n).astype(np.float32)
    out = add(at.asarray(xh, device=device), at.asarray(yh, device=device)).numpy()
    err = float(np.max(np.abs(out - (xh.astype(np.float64) + yh))))
    return {"ok": err <= 1e-6, "detail": f"n={n}, max abs err {err:.1e}"}


if __name__ == "__main__":
    print(check(at.device(sys.argv[1] if len(sys.argv) > 1 else None)))
