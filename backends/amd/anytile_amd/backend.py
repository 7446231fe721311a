"""``AmdBackend``: anytile kernels on AMD GPUs (entry point ``amd``, devices ``hip:N``).

Compiling needs only llvmlite (LLVM's AMDGPU target) and, for the loadable ``hsaco``,
``ld.lld``, so ``at.compile(..., target="amd:gfx942")`` works on a machine without a GPU;
running needs the HIP runtime (ROCm), reached through hip-python.  Nothing of this backend
has run on AMD silicon yet: see ``backends/amd/README.md`` for what is verified and how.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Sequence

import numpy as np

from anytile.backend import (Availability, Backend, Buffer, CompiledKernel, CompileOptions,
                             DeviceInfo, ImportedArray, KernelArg, Stage, Target, numpy_view_of)
from anytile.errors import BackendError
from anytile.gpu_host import DLPackDevice, device_of, import_device_array, stream_handle, tensor_reader

from .archs import KNOWN_ARCHS, arch_of
from .code_object import find_lld
from .driver import LoadedKernel, driver

# ``.stages`` (the GPU lowering, LLVM) is imported when first compiling: discovery and
# launches of already compiled kernels never pay for it

__all__ = ["AmdBackend"]


class AmdBackend(Backend):
    """AMD GPUs through LLVM's AMDGPU target and the HIP runtime."""

    name = "amd"
    device_prefix = "hip"
    capabilities = frozenset({"fp64", "fp16", "bf16", "int64_atomics", "float_atomics", "dot_int8",
                              "device_assert"})
    host_memory = False
    disk_cacheable = True   # ``load`` needs only the code object, metadata and signature

    def __init__(self) -> None:
        self._devices: Optional[list[DeviceInfo]] = None

    # -- identity and availability --------------------------------------------------------------
    def availability(self) -> Availability:
        error = driver.availability_error()
        return Availability(False, error) if error else Availability(True)

    def devices(self) -> list[DeviceInfo]:
        if self._devices is None:
            if driver.availability_error():
                return []
            infos = []
            for index in range(driver.device_count()):
                props = driver.properties(index)
                infos.append(DeviceInfo(f"hip:{index}", index, f"{props['name']} ({props['arch']})",
                                        tuple(sorted(props.items()))))
            self._devices = infos
        return self._devices

    def describe(self) -> dict[str, Any]:
        facts = {"ld.lld": find_lld() or "not found (compiles stop at amdgcn; nothing loads)",
                 "targets": ", ".join(self.targets())}
        version = driver.runtime_version()
        if version:
            facts["hip_runtime"] = version
        return facts

    # -- compilation ---------------------------------------------------------------------------
    def targets(self) -> list[str]:
        archs = list(KNOWN_ARCHS)
        for info in (self.devices() if self._devices is not None else []):
            if info.props["arch"] not in archs:
                archs.append(info.props["arch"])
        return archs

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, device.props["arch"])

    def parse_options(self, **options: Any) -> CompileOptions:
        options.pop("num_ctas", None)  # one workgroup per program
        return super().parse_options(**options)

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        from .stages import amd_stages
        arch_of(target.arch)    # an unknown name fails here, before any work
        return amd_stages(target, options)

    def cache_facts(self, target: Target) -> str:
        """The tools behind the generated code: llvmlite's version and ``ld.lld``."""
        import llvmlite
        path = find_lld()
        try:
            stat = os.stat(path) if path else None
        except OSError:
            stat = None
        tool = f"{path} {stat.st_size} {stat.st_mtime_ns}" if stat else f"{path}"
        return f"llvmlite {llvmlite.__version__}; {tool}"

    # -- running -------------------------------------------------------------------------------
    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> LoadedKernel:
        image = kernel.asm.get("hsaco")
        meta = kernel.metadata
        if image is None:
            raise BackendError(f"kernel '{kernel.name}' has no loadable code object for "
                               f"{kernel.target}: {meta.get('hsaco', 'no hsaco stage ran')}")
        return driver.load(device.index, image, meta["kernel_name"], int(meta.get("shared", 0)),
                           int(meta["threads_per_block"]), kernel.signature, meta.get("asserts"))

    def launch(self, loaded: LoadedKernel, grid: tuple[int, int, int], args: Sequence[KernelArg],
               device: DeviceInfo, stream: Any = None) -> None:
        loaded.launch(grid, args, None if stream is None else stream_handle(stream))

    def launcher(self, loaded: LoadedKernel, device: DeviceInfo) -> Optional[Callable[..., None]]:
        """``hipModuleLaunchKernel`` through ``ctypes`` (``LoadedKernel.raw_launcher``)."""
        return loaded.raw_launcher()

    def foreign_reader(self, cls: type) -> Optional[Callable[[Any], tuple[Any, Any]]]:
        """Torch-like tensors (``data_ptr()``, ``get_device()``, ``dtype``,
        ``__dlpack_device__``): a few reads instead of an import per launch."""
        return tensor_reader(cls)

    def synchronize(self, device: DeviceInfo) -> None:
        driver.synchronize(device.index)

    # -- memory --------------------------------------------------------------------------------
    def alloc(self, device: DeviceInfo, nbytes: int) -> Buffer:
        address = driver.alloc(device.index, nbytes)
        return Buffer(device, nbytes, address, address)

    def free(self, buffer: Buffer) -> None:
        driver.free(buffer.device.index, buffer.address)

    def copy_to_device(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        view = numpy_view_of(host)
        driver.copy_htod(buffer.device.index, buffer.address + offset, view.ctypes.data, view.nbytes)

    def copy_to_host(self, buffer: Buffer, offset: int, host: np.ndarray) -> None:
        if not host.flags.c_contiguous:
            raise BackendError("copy_to_host needs a C-contiguous destination")
        view = host.reshape(-1).view(np.uint8)
        driver.copy_dtoh(buffer.device.index, view.ctypes.data, buffer.address + offset, view.nbytes)

    def device_of_foreign(self, obj: Any) -> Optional[DeviceInfo]:
        """``hip:N`` for a ROCm tensor of torch, CuPy or any DLPack producer."""
        return device_of(obj, self.devices(), DLPackDevice.ROCM)

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        """Zero-copy view of a ROCm array (``__cuda_array_interface__``, which torch and CuPy
        on ROCm speak, or DLPack device type ROCm)."""
        return import_device_array(obj, device, DLPackDevice.ROCM)
