"""``gpusim``: the NVIDIA backend's lowering run on the host CPU, as an anytile backend.

The GPU compile pipeline runs as for NVIDIA, with NVIDIA's tables -- its matrix instructions
(executed by the simulator from their fragment maps) and its ``ldmatrix`` fragment loader
(emulated with the generic ``shuffle_idx``) -- and the host simulator's hooks for the rest
(ids, barrier, shuffles, math library, kernel marking), one OS thread per GPU thread, so the
conformance suite and the kernel tests can check the GPU lowering on a machine without a
GPU::

    ANYTILE_GPU_SIMULATOR=1 anytile conformance --device gpusim:0

It is slow (programs run one at a time) and opt-in: without ``ANYTILE_GPU_SIMULATOR=1`` it
reports itself unusable, so ordinary runs never pick it.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

import numpy as np

from anytile.backend import (Availability, Backend, Buffer, CompiledKernel, CompileOptions,
                             DeviceInfo, ImportedArray, KernelArg, Stage, Target, numpy_view_of)

# the GPU lowering and the simulator are imported when first used: discovery imports this
# module in every process, and it is opt-in

__all__ = ["SimulatedGpuBackend", "simulated_nvidia_target"]

_ENV = "ANYTILE_GPU_SIMULATOR"


def simulated_nvidia_target() -> Any:
    """The host simulator's target with NVIDIA's warp size, matrix instructions and
    ``ldmatrix`` loader (emulated through the simulator's ``shuffle_idx``)."""
    from anytile.codegen.gpu.simulator import SimulatedGpuTarget

    from .matrix import MATRIX_INSTRS, MMA_BF16, MMA_F16, LdmatrixFragments, emulated_ldmatrix_x4
    target = SimulatedGpuTarget(32, MATRIX_INSTRS)
    loader = LdmatrixFragments(emulated_ldmatrix_x4(target))
    target.loaders.update({MMA_F16: loader, MMA_BF16: loader})
    return target


class SimulatedGpuBackend(Backend):
    """The shared GPU lowering executed on the host (testing only; see the module doc)."""

    name = "gpusim"
    device_prefix = "gpusim"
    capabilities = frozenset({"fp64", "fp16", "bf16", "int64_atomics", "float_atomics", "dot_int8",
                              "device_assert"})
    host_memory = True

    def availability(self) -> Availability:
        if os.environ.get(_ENV) == "1":
            return Availability(True)
        return Availability(False, f"a test instrument: set {_ENV}=1 to run the GPU lowering "
                                   f"on the host CPU")

    def devices(self) -> list[DeviceInfo]:
        if not self.availability().usable:
            return []
        return [DeviceInfo("gpusim:0", 0, "GPU lowering simulated on the host",
                           (("warp_size", 32),))]

    def targets(self) -> list[str]:
        return ["host"]

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, "host")

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        from anytile.codegen.gpu import gpu_stages
        return gpu_stages(simulated_nvidia_target(), options)

    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> Any:
        from anytile.codegen.gpu.simulator import SimulatedKernel
        from anytile.ir.types import PointerType, i32
        checks = kernel.metadata.get("asserts") or []
        types = [t for _, t in kernel.signature] + ([PointerType(i32)] if checks else [])
        loaded = SimulatedKernel(kernel.asm["llir"], kernel.metadata["kernel_name"], types,
                                 int(kernel.metadata["threads_per_block"]))
        loaded.checks = checks
        return loaded

    def launch(self, loaded: Any, grid: tuple[int, int, int], args: Sequence[KernelArg],
               device: DeviceInfo, stream: Any = None) -> None:
        from anytile.errors import device_assert_error
        values = [a.value.address if hasattr(a.value, "buffer") else a.value for a in args]
        if not loaded.checks:
            loaded.run(grid, values)
            return
        word = np.zeros(1, np.int32)
        loaded.run(grid, values + [word])
        if word[0]:
            raise device_assert_error(*loaded.checks[word[0] - 1])

    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        data = np.zeros(max(1, int(nbytes)) + 64, np.uint8)
        offset = (-data.ctypes.data) % 64  # 64-byte alignment, as a GPU allocation would have
        view = data[offset:offset + max(1, int(nbytes))]
        return Buffer(device, int(nbytes), view, address=view.ctypes.data, owner=data)

    def free(self, buffer: Buffer) -> None:
        buffer.freed = True

    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        src = numpy_view_of(host)
        buffer.handle[offset:offset + src.size] = src

    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        dst = host.reshape(-1).view(np.uint8)
        dst[...] = buffer.handle[offset:offset + dst.size]

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        return None
