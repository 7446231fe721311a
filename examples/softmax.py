"""Fused softmax, one row per program.  Run: python examples/softmax.py [DEVICE]"""
import sys

import numpy as np

import anytile as at
import anytile.language as tl


@at.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    rows, cols = x.shape
    out = at.empty_like(x)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                            BLOCK=at.next_power_of_2(cols))
    return out


def check(device):
    rng = np.random.default_rng(1)
    xh = rng.standard_normal((123, 781)).astype(np.float32)
    out = softmax(at.asarray(xh, device=device)).numpy()
    x64 = xh.astype(np.float64)
    ref = np.exp(x64 - x64.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    err = float(np.max(np.abs(out - ref)))
    return {"ok": err <= 1e-6, "detail": f"123x781, max abs err {err:.1e}"}


if __name__ == "__main__":
    print(check(at.device(sys.argv[1] if len(sys.argv) > 1 else None)))
