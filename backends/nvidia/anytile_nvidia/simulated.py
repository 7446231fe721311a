"""``gpusim``: the NVIDIA backend's lowering run on the host CPU, as an anytile backend.

The GPU compile pipeline runs as for NVIDIA, with NVIDIA's dialect and tables -- its matrix instructions
(executed by the simulator from their fragment maps) and its ``ldmatrix`` fragment loader
(emulated with the generic ``shuffle_idx``) -- and the host simulator's hooks for the rest
(ids, barrier, shuffles, math library, kernel marking), one OS thread per GPU thread, so the
conformance suite and the kernel tests can check the GPU lowering on a machine without a
GPU::

    ANYTILE_GPU_SIMULATOR=1 anytile conformance --device gpusim:0

It is slow (programs run one at a time) and opt-in: without ``ANYTILE_GPU_SIMULATOR=1`` it
reports itself unusable, so ordinary runs never pick it (core's ``SimulatedBackend``).
"""
from __future__ import annotations

from typing import Any

from anytile.codegen.gpu.simulated_backend import SimulatedBackend

# the GPU lowering and the simulator are imported when first used: discovery imports this
# module in every process, and it is opt-in

__all__ = ["SimulatedGpuBackend", "simulated_nvidia_target"]


def simulated_nvidia_target() -> Any:
    """The host simulator's target with NVIDIA's warp size, matrix instructions and
    ``ldmatrix`` loader (emulated through the simulator's ``shuffle_idx``)."""
    from anytile.codegen.gpu.simulator import SimulatedGpuTarget

    from .matrix import MATRIX_INSTRS, MMA_BF16, MMA_F16, LdmatrixFragments, emulated_ldmatrix_x4
    from .passes import nvidia_dialect
    target = SimulatedGpuTarget(32, MATRIX_INSTRS)
    loader = LdmatrixFragments(emulated_ldmatrix_x4(target))
    target.loaders.update({MMA_F16: loader, MMA_BF16: loader})
    target.dialects = (nvidia_dialect(),)
    return target


class SimulatedGpuBackend(SimulatedBackend):
    """The NVIDIA lowering executed on the host (testing only; see the module doc)."""

    name = "gpusim"
    device_prefix = "gpusim"
    capabilities = frozenset({"fp64", "fp16", "bf16", "fp8", "int64_atomics", "float_atomics", "dot_int8",
                              "device_assert", "device_print", "bounds_check"})
    op_set = 3                       # the IR ops it lowers: print and assume (anytile.ir.OP_SETS)
    warp_size = 32

    def simulated_target(self) -> Any:
        return simulated_nvidia_target()
