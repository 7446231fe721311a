"""Triton's tools that some programs take as their reference: ``triton._C.libtriton``'s cuBLAS
binding and Triton 3.2-3.3's host-filled TMA descriptors."""
from __future__ import annotations

import types
from typing import Any

from .standin import StandInModule

__all__ = ["cublas_module", "experimental_descriptor"]


def cublas_module() -> types.ModuleType:
    """``triton._C.libtriton`` holding only ``nvidia.cublas.CublasLt``: Triton's private
    binding, which its tutorials 09 and 10 take as the cuBLAS reference; served by torch's own
    matrix products (cuBLAS under torch on NVIDIA GPUs)."""
    class CublasLt:
        def __init__(self, workspace: Any) -> None:
            self.workspace = workspace

        def matmul(self, a: Any, b: Any, c: Any) -> None:
            """``c = a @ b.T`` (``b`` holds the product's right operand transposed)."""
            import torch
            if a.element_size() == 1:       # float8: torch's scaled product, unit scales
                one = torch.ones((), device=a.device, dtype=torch.float32)
                c.copy_(torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=c.dtype))
            else:
                torch.matmul(a, b.T, out=c)

    cublas = types.SimpleNamespace(CublasLt=CublasLt)
    return StandInModule("triton._C.libtriton", {
        "nvidia": types.SimpleNamespace(cublas=cublas)})


def experimental_descriptor() -> types.ModuleType:
    """Triton 3.2-3.3's ``triton.tools.experimental_descriptor`` (runtime/host_descriptors.py)."""
    from ..runtime.host_descriptors import HostFilledDescriptor

    class TmaDescKernelParam(HostFilledDescriptor):
        TMA_DESC_SIZE = 128

    def create_1d_tma_descriptor(ptr: int, dim: int, block_dim: int,
                                 element_size: int) -> TmaDescKernelParam:
        return TmaDescKernelParam(ptr, [dim], [block_dim], element_size)

    def create_2d_tma_descriptor(ptr: int, dim1: int, dim0: int, block_dim1: int,
                                 block_dim0: int, element_size: int) -> TmaDescKernelParam:
        return TmaDescKernelParam(ptr, [dim1, dim0], [block_dim1, block_dim0], element_size)

    return StandInModule("triton.tools.experimental_descriptor", {
        "TmaDescKernelParam": TmaDescKernelParam,
        "create_1d_tma_descriptor": create_1d_tma_descriptor,
        "create_2d_tma_descriptor": create_2d_tma_descriptor})


