"""Helpers of the OpenCL plugin's tests: the architectures the kernels are compiled for, and
running a jit kernel on ``opencl:0`` with the code path of any of them."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pytest

import anytile as at

#: the host CPU's own path (one work-item, wide vectors) and two GPU paths PoCL also runs:
#: 128 work-items x 4-wide vectors (4 warps), 32 x 2-wide (1 warp)
ARCHES = {"native": None,
          "gpu128x4": ("gpu-s32-v4-l48k-g1024+fp64+a64+a64x", 4),
          "gpu32x2": ("gpu-s32-v2-l48k-g1024+fp64+a64+a64x", 1)}


def opencl_device() -> Any:
    """``opencl:0``, or a skip when no OpenCL device is usable here."""
    try:
        return at.device("opencl:0")
    except Exception as exc:  # noqa: BLE001 -- no driver here
        pytest.skip(f"no OpenCL device: {exc}")


@contextmanager
def arch(name: str) -> Iterator[dict]:
    """Compile for ``ARCHES[name]`` inside the block; yields the launch options to use."""
    chosen = ARCHES[name]
    before = os.environ.get("ANYTILE_OPENCL_ARCH")
    if chosen is None:
        os.environ.pop("ANYTILE_OPENCL_ARCH", None)
    else:
        os.environ["ANYTILE_OPENCL_ARCH"] = chosen[0]
    try:
        yield {} if chosen is None else {"num_warps": chosen[1]}
    finally:
        if before is None:
            os.environ.pop("ANYTILE_OPENCL_ARCH", None)
        else:
            os.environ["ANYTILE_OPENCL_ARCH"] = before


def fresh(kernel: Any) -> Any:
    """A new ``JITFunction`` of the same source: no plan compiled for another arch."""
    return at.jit(kernel.fn)


def poisoned(shape: Any, dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.full(shape, np.nan, dtype)
    return np.full(shape, np.iinfo(dtype).min + 7 if dtype.kind == "i" else np.iinfo(dtype).max - 7,
                   dtype)
