"""``gpusim``: the NVIDIA backend's lowering run on the host CPU, as an anytile backend.

Everything the NVIDIA backend generates except its five hooks (thread ids, barrier,
shuffle, math library, kernel marking) runs here, one OS thread per GPU thread, so the
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

__all__ = ["SimulatedGpuBackend"]

_ENV = "ANYTILE_GPU_SIMULATOR"


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
        from anytile.codegen.gpu import assign_layouts
        from anytile.codegen.gpu.lowering import lower_kernel
        from anytile.codegen.gpu.mma import mma_warps
        from anytile.codegen.gpu.pipeline import pipeline_dot_operands, pipeline_loops
        from anytile.codegen.gpu.simulator import SimulatedGpuTarget

        def laid_out(module: Any, metadata: dict) -> Any:
            metadata["threads_per_block"] = options.num_warps * SimulatedGpuTarget.warp_size
            if options.num_stages > 1:
                pipeline_dot_operands(module.kernel, options.num_stages, lambda dot: mma_warps(
                    dot, options.num_warps, SimulatedGpuTarget.warp_size) is not None, 96 * 1024)
                pipeline_loops(module.kernel)
            return assign_layouts(module, options.num_warps, SimulatedGpuTarget.warp_size,
                                  use_mma=SimulatedGpuTarget.has_mma)

        def llir(laid: Any, metadata: dict) -> str:
            module, shared, checks = lower_kernel(laid, SimulatedGpuTarget(), debug=options.debug)
            metadata["shared"] = shared
            if checks:
                metadata["asserts"] = checks
            metadata["kernel_name"] = laid.kernel.name
            return str(module)
        return [Stage("laid-out ir", laid_out), Stage("llir", llir)]

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
