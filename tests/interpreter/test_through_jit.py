"""Launch errors of kernels written in the language point at the kernel's own lines."""
from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import DeviceAssertError, OutOfBoundsError


@at.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@at.jit
def positive_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_assert(x > 0, "x must be positive")


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_out_of_bounds_load_names_the_kernel_line():
    dev = at.device("interpreter")
    x, out = np.ones(100, np.float32), np.zeros(128, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        copy_kernel[(1,)](at.asarray(x, device=dev), at.asarray(out, device=dev), BLOCK=128)
    text = str(info.value)
    line = line_of(copy_kernel, "tl.load(x_ptr + offs)")
    assert f"{os.path.basename(__file__)}:{line}:" in text
    assert "tl.store(out_ptr + offs, tl.load(x_ptr + offs))" in text
    assert "element 100 of a 100-element (400-byte) allocation" in text
    assert (out == 0).all()


def test_device_assert_through_jit():
    dev = at.device("interpreter")
    with pytest.raises(DeviceAssertError, match="x must be positive") as info:
        positive_kernel[(1,)](at.asarray(np.arange(-3, 13, dtype=np.int32), device=dev),
                              BLOCK=16)
    assert f":{line_of(positive_kernel, 'tl.device_assert')}:" in str(info.value)
