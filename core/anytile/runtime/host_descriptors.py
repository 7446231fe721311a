"""Triton 3.2-3.3's host-filled TMA descriptors, read as ``at.TensorDescriptor`` arguments.

Before ``TensorDescriptor``, Triton kernels took "TMA descriptors" that the host wrote into a
128-byte buffer (``triton.tools.experimental_descriptor.create_2d_tma_descriptor``, or
``driver.active.utils.fill_2d_tma_descriptor(ptr, dim1, dim0, block_dim1, block_dim0,
element_size, buffer_address)``, often inside the grid callable, once the autotuner has picked
the block sizes) and passed as an object with ``tma_desc_cpu_ptr()``; the kernel read blocks
with ``tl._experimental_descriptor_load(desc, offsets, shape, dtype)``.

anytile writes its own record into the buffer (not NVIDIA's ``CUtensorMap``: no backend uses
TMA yet): a magic word, the address, the dimensions, the block dimensions and the element
size, as little-endian 64-bit words.  A launch given such an argument calls the grid first (it
may fill the buffer), then reads the record into an ``at.TensorDescriptor`` of unsigned
integers of the element's size over the raw memory (row-major, the last dimension
contiguous); the kernel's ``_experimental_descriptor_load`` reads those bits as its dtype."""
from __future__ import annotations

import ctypes
import struct
from typing import Any, Sequence

import numpy as np

from ..errors import LaunchValueError
from .descriptor import TensorDescriptor

__all__ = ["fill_descriptor", "read_descriptor", "is_host_filled", "HostFilledDescriptor",
           "DESCRIPTOR_BYTES"]

DESCRIPTOR_BYTES = 128
_MAGIC = int.from_bytes(b"anytTMA1", "little")
_WORDS = 9          # magic, rank, address, two dims, two block dims, element size, spare
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def is_host_filled(value: Any) -> bool:
    return hasattr(type(value), "tma_desc_cpu_ptr")


def fill_descriptor(address: int, dims: Sequence[int], block_dims: Sequence[int],
                    element_size: int, buffer: int) -> None:
    """Write the record of a descriptor over ``address`` into host memory at ``buffer``;
    ``dims`` and ``block_dims`` outermost first."""
    rank = len(dims)
    if rank not in (1, 2) or len(block_dims) != rank:
        raise LaunchValueError(f"a TMA descriptor has 1 or 2 dimensions and as many block "
                               f"dimensions, got {list(dims)} and {list(block_dims)}")
    if element_size not in _UINT:
        raise LaunchValueError(f"a TMA descriptor's element size must be 1, 2, 4 or 8 bytes, "
                               f"got {element_size}")
    if any(int(d) < 0 for d in dims) or any(int(b) < 1 or int(b) & (int(b) - 1)
                                          for b in block_dims):
        raise LaunchValueError(f"a TMA descriptor needs non-negative dimensions {list(dims)} "
                               f"and power-of-2 block dimensions {list(block_dims)}")
    d = [1] * (2 - rank) + [int(x) for x in dims]
    bd = [1] * (2 - rank) + [int(x) for x in block_dims]
    record = struct.pack(f"<{_WORDS}Q", _MAGIC, rank, int(address), *d, *bd, element_size, 0)
    ctypes.memmove(int(buffer), record, len(record))


def read_descriptor(value: Any, device: Any) -> TensorDescriptor:
    """The ``at.TensorDescriptor`` of the record ``value.tma_desc_cpu_ptr()`` points at, over
    memory of ``device``."""
    buffer = int(value.tma_desc_cpu_ptr())
    magic, rank, address, d1, d0, b1, b0, size, _ = struct.unpack(
        f"<{_WORDS}Q", ctypes.string_at(buffer, _WORDS * 8))
    if magic != _MAGIC or rank not in (1, 2) or size not in _UINT:
        raise LaunchValueError(
            "a TMA descriptor argument holds no descriptor anytile wrote: fill it with "
            "triton.runtime.driver.active.utils.fill_1d/2d_tma_descriptor (or make it with "
            "triton.tools.experimental_descriptor) before the launch, or in the grid callable")
    dims, blocks = ([d0], [b0]) if rank == 1 else ([d1, d0], [b1, b0])
    base = _raw_memory(address, d1 * d0, _UINT[size], device)
    return TensorDescriptor(base, dims, [d0, 1][2 - rank:], blocks)


class _DeviceMemory:
    """Device memory at a raw address, as an array (``__cuda_array_interface__``)."""

    def __init__(self, address: int, count: int, dtype: Any) -> None:
        self._interface = {"shape": (max(count, 1),), "typestr": np.dtype(dtype).str,
                           "data": (address, False), "version": 3, "strides": None}

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self._interface


def _raw_memory(address: int, count: int, dtype: Any, device: Any) -> Any:
    if device.backend.host_memory:
        kind = np.ctypeslib.as_ctypes_type(np.dtype(dtype))
        return np.ctypeslib.as_array((kind * max(count, 1)).from_address(address))
    if device.backend.triton_backend:        # CUDA and HIP: memory is addressed by numbers
        return _DeviceMemory(address, count, dtype)
    raise LaunchValueError(f"a TMA descriptor names memory by its address, which {device} "
                           f"does not use: pass an at.TensorDescriptor instead")


class HostFilledDescriptor:
    """``triton.tools.experimental_descriptor``'s ``TmaDescKernelParam``: its own 128-byte
    host buffer holding one descriptor record."""

    def __init__(self, address: int, dims: Sequence[int], block_dims: Sequence[int],
                 element_size: int) -> None:
        self._buffer = (ctypes.c_uint8 * DESCRIPTOR_BYTES)()
        fill_descriptor(address, dims, block_dims, element_size, self.tma_desc_cpu_ptr())

    def tma_desc_cpu_ptr(self) -> int:
        return ctypes.addressof(self._buffer)
