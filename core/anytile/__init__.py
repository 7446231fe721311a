"""anytile: write a tile kernel once in Python; run it on NVIDIA, AMD, any CPU and any
OpenCL device.

    import anytile as at, anytile.language as tl

    @at.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""
from __future__ import annotations

from .version import __version__  # noqa: F401

from . import language  # noqa: F401  (``anytile.language`` is ``tl``)
from .backend import API_VERSION, CompiledKernel, Target  # noqa: F401
from .errors import (AnytileError, BackendError, CompilationError, DeviceAssertError,  # noqa: F401
                     LaunchArgumentError, LaunchError, LaunchOverflowError, LaunchValueError,
                     OutOfBoundsError)
from .runtime.arrays import (Array, asarray, empty, empty_like, full, zeros,  # noqa: F401
                             zeros_like)
from .runtime.compile import compile  # noqa: F401
from .runtime.devices import Device, default_device, device, devices  # noqa: F401
from .runtime.discovery import get_backend, list_backends, register_backend  # noqa: F401
from .runtime.jit import JITFunction, jit  # noqa: F401
from .runtime.autotune import Config, autotune, heuristics  # noqa: F401
from .runtime.descriptor import TensorDescriptor  # noqa: F401
from .runtime.hooks import get_allocator, knobs, set_allocator  # noqa: F401
from . import profiler, testing  # noqa: F401  (``anytile.testing``: do_bench, assert_close, perf_report)


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints: ``cdiv(1000, 256) == 4``."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= ``n`` (1 for ``n <= 1``)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()
