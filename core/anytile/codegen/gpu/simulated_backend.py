"""``SimulatedBackend``: a GPU backend's lowering run on the host simulator, as a backend.

A GPU backend subclasses it to expose its own lowering -- its tables and whatever hooks it
writes against the generic ones -- as a test device: the subclass names itself and returns
its ``SimulatedGpuTarget`` from ``simulated_target``; compiling runs the GPU compile
pipeline every GPU backend runs, and launches run it one OS thread per GPU thread
(``simulator.py``).  It is opt-in: without ``ANYTILE_GPU_SIMULATOR=1`` it reports itself
unusable, so ordinary runs never pick it::

    ANYTILE_GPU_SIMULATOR=1 anytile conformance --device <name>:0
"""
from __future__ import annotations

import abc
import os
from typing import Any, Optional, Sequence

import numpy as np

from ...backend import (Availability, Backend, Buffer, CompiledKernel, CompileOptions, DeviceInfo,
                        ImportedArray, KernelArg, Stage, Target, numpy_view_of)

# the GPU lowering and the simulator are imported when first used: discovery imports a
# subclass's module in every process, and it is opt-in

__all__ = ["SimulatedBackend", "SIMULATOR_SWITCH"]

#: the environment variable that makes simulated backends usable
SIMULATOR_SWITCH = "ANYTILE_GPU_SIMULATOR"


class SimulatedBackend(Backend):
    """A GPU lowering executed on the host (testing only; see the module doc).  Subclasses
    set ``name``, ``device_prefix``, ``capabilities``, ``warp_size`` and ``description`` and
    implement ``simulated_target``."""

    host_memory = True
    #: lanes of a warp of the simulated target (reported in the device's properties)
    warp_size: int = 32
    description: str = "GPU lowering simulated on the host"

    @abc.abstractmethod
    def simulated_target(self) -> Any:
        """The ``SimulatedGpuTarget`` (with the backend's tables and hooks) to compile for."""

    def availability(self) -> Availability:
        if os.environ.get(SIMULATOR_SWITCH) == "1":
            return Availability(True)
        return Availability(False, f"a test instrument: set {SIMULATOR_SWITCH}=1 to run the GPU "
                                   f"lowering on the host CPU")

    def devices(self) -> list[DeviceInfo]:
        if not self.availability().usable:
            return []
        return [DeviceInfo(f"{self.device_prefix}:0", 0, self.description,
                           (("warp_size", self.warp_size),))]

    def targets(self) -> list[str]:
        return ["host"]

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, "host")

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        from .compile import gpu_stages
        return gpu_stages(self.simulated_target(), options)

    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> Any:
        from ...gpu_host import hidden_parameters
        from .simulator import SimulatedKernel
        checks = kernel.metadata.get("asserts") or []
        spans = kernel.metadata.get("bounds_params") or []
        types = [t for _, t in list(kernel.signature) + hidden_parameters(spans, checks)]
        loaded = SimulatedKernel(kernel.asm["llir"], kernel.metadata["kernel_name"], types,
                                 int(kernel.metadata["threads_per_block"]))
        loaded.checks, loaded.spans = checks, spans
        return loaded

    def launch(self, loaded: Any, grid: tuple[int, int, int], args: Sequence[KernelArg],
               device: DeviceInfo, stream: Any = None) -> None:
        from ...errors import device_assert_error
        from ...gpu_host import span_arguments
        args = list(args) + span_arguments(args, loaded.spans)
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
