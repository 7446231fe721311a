"""``NvidiaBackend``: anytile kernels on NVIDIA GPUs (entry point ``nvidia``, devices ``cuda:N``).

Compiling needs only llvmlite (and ``ptxas`` for the ``cubin`` stage), so
``at.compile(..., target="nvidia:sm_90")`` works on a machine without a GPU; running needs
the CUDA driver, reached through ``cuda.bindings.driver``.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Sequence

import numpy as np

from anytile.backend import (Availability, Backend, Buffer, CompiledKernel, CompileOptions,
                             DeviceInfo, DeviceTimer, ImportedArray, KernelArg, Stage, Target,
                             numpy_view_of)
from anytile.errors import BackendError
from anytile.gpu_host import DLPackDevice, device_of, import_device_array, stream_handle, tensor_reader

from .driver import LoadedKernel, driver

# ``.stages`` (the GPU lowering, LLVM) is imported when first compiling: discovery and
# launches of already compiled kernels never pay for it

__all__ = ["NvidiaBackend"]

_KNOWN_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")


class NvidiaBackend(Backend):
    """NVIDIA GPUs through LLVM's NVPTX target and the CUDA driver API."""

    name = "nvidia"
    device_prefix = "cuda"
    capabilities = frozenset({"fp64", "fp16", "bf16", "int64_atomics", "float_atomics", "dot_int8",
                              "device_assert"})
    host_memory = False
    disk_cacheable = True   # ``load`` needs only the cubin (or PTX), metadata and signature

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
                infos.append(DeviceInfo(f"cuda:{index}", index, props["name"],
                                        tuple(sorted(props.items()))))
            self._devices = infos
        return self._devices

    def describe(self) -> dict[str, Any]:
        from .stages import find_libdevice, find_ptxas
        facts = {"libdevice": find_libdevice() or "not found",
                 "ptxas": find_ptxas() or "not found (the driver compiles PTX at load)",
                 "targets": ", ".join(self.targets())}
        version = driver.driver_version()
        if version:
            facts["cuda_driver_api"] = version
        return facts

    # -- compilation ---------------------------------------------------------------------------
    def targets(self) -> list[str]:
        archs = list(_KNOWN_ARCHS)
        for info in (self.devices() if self._devices is not None else []):
            arch = self._arch_of(info)
            if arch not in archs:
                archs.append(arch)
        return archs

    @staticmethod
    def _arch_of(info: DeviceInfo) -> str:
        major, minor = info.props["compute_capability"]
        return f"sm_{major}{minor}"

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, self._arch_of(device))

    def parse_options(self, **options: Any) -> CompileOptions:
        options.pop("num_ctas", None)  # one CTA per program (Hopper clusters are not used)
        return super().parse_options(**options)

    def extra_option_names(self) -> tuple:
        """``wgmma=True`` (sm_90): run pipelined fp16/bf16 dots on Hopper's warpgroup MMA.
        Experimental: correct on an H200, but slower than the default ``mma.sync`` path
        today (BENCHMARKS.md)."""
        return ("wgmma",)

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        from .stages import nvidia_stages
        return nvidia_stages(target, options)

    def cache_facts(self, target: Target) -> str:
        """The tools behind the generated code: llvmlite's version, ``ptxas`` and libdevice
        (path, size and modification time: a new toolkit in place changes them)."""
        import llvmlite
        from .stages import find_libdevice, find_ptxas
        facts = [f"llvmlite {llvmlite.__version__}"]
        for path in (find_ptxas(), find_libdevice()):
            try:
                stat = os.stat(path) if path else None
            except OSError:
                stat = None
            facts.append(f"{path} {stat.st_size} {stat.st_mtime_ns}" if stat else f"{path}")
        return "; ".join(facts)

    # -- running -------------------------------------------------------------------------------
    def load(self, kernel: CompiledKernel, device: DeviceInfo) -> LoadedKernel:
        image = kernel.asm.get("cubin")
        if image is None:
            image = kernel.asm["ptx"].encode() + b"\0"
        meta = kernel.metadata
        return driver.load(device.index, image, meta["kernel_name"], int(meta.get("shared", 0)),
                           int(meta["threads_per_block"]), kernel.signature, meta.get("asserts"))

    def launch(self, loaded: LoadedKernel, grid: tuple[int, int, int], args: Sequence[KernelArg],
               device: DeviceInfo, stream: Any = None) -> None:
        loaded.launch(grid, args, None if stream is None else stream_handle(stream))

    def launcher(self, loaded: LoadedKernel, device: DeviceInfo) -> Optional[Callable[..., None]]:
        """``cuLaunchKernelEx`` through ``ctypes`` (``LoadedKernel.raw_launcher``)."""
        return loaded.raw_launcher()

    def foreign_reader(self, cls: type) -> Optional[Callable[[Any], tuple[Any, Any]]]:
        """Torch-like tensors (``data_ptr()``, ``get_device()`` -1 off the GPU, ``dtype``,
        ``__dlpack_device__``): three cheap reads instead of an import per launch."""
        return tensor_reader(cls)

    def synchronize(self, device: DeviceInfo) -> None:
        driver.synchronize(device.index)

    def timer(self, device: DeviceInfo) -> DeviceTimer:
        """CUDA events on the default stream (which waits for the other blocking streams)."""
        return _EventTimer(self, device)

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
        """``cuda:N`` for a CUDA tensor of torch, cupy or any DLPack producer."""
        return device_of(obj, self.devices(), DLPackDevice.CUDA)

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        """Zero-copy view of a CUDA array (``__cuda_array_interface__`` or CUDA DLPack;
        ``anytile.gpu_host.import_device_array``)."""
        return import_device_array(obj, device, DLPackDevice.CUDA)


class _EventTimer(DeviceTimer):
    """A ``DeviceTimer`` from two CUDA events: the time the GPU spent between them."""

    def __init__(self, backend: Backend, device: DeviceInfo) -> None:
        super().__init__(backend, device)
        driver.make_current(device.index)
        cu = driver.cu
        self._events = [driver.check("cuEventCreate", cu.cuEventCreate(0), BackendError)
                        for _ in range(2)]

    def start(self) -> None:
        driver.make_current(self._device.index)
        driver.check("cuEventRecord", driver.cu.cuEventRecord(self._events[0], 0), BackendError)

    def stop(self) -> None:
        driver.check("cuEventRecord", driver.cu.cuEventRecord(self._events[1], 0), BackendError)

    def elapsed_ms(self) -> float:
        cu = driver.cu
        driver.check("cuEventSynchronize", cu.cuEventSynchronize(self._events[1]), BackendError)
        return float(driver.check("cuEventElapsedTime",
                                  cu.cuEventElapsedTime(*self._events), BackendError))

    def __del__(self) -> None:
        try:
            for event in self._events:
                driver.cu.cuEventDestroy(event)
        except Exception:  # noqa: BLE001 -- at interpreter exit the driver may be gone
            pass
