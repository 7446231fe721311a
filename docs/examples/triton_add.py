"""An ordinary Triton program: run it with ``anytile run --as-triton --device cpu
docs/examples/triton_add.py`` (or ``--device cuda:0``, ``opencl:0``, ``interpreter``).
It uses NumPy arrays so that it runs without torch; torch tensors work the same way."""
import numpy as np
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


x, y = np.random.rand(2, 10_000).astype(np.float32)
out = np.empty_like(x)
add_kernel[(triton.cdiv(x.size, 1024),)](x, y, out, x.size, BLOCK=1024)
print("max error:", np.abs(out - (x + y)).max())
