"""``NvidiaBackend``: anytile kernels on NVIDIA GPUs (entry point ``nvidia``, devices ``cuda:N``).

Compiling needs only llvmlite (and ``ptxas`` for the ``cubin`` stage), so
``at.compile(..., target="nvidia:sm_90")`` works on a machine without a GPU; running needs
the CUDA driver, reached through ``cuda.bindings.driver``.
"""
from __future__ import annotations

import os
from typing import Any

from anytile.backend import (Backend, CompiledKernel, CompileOptions, DeviceInfo, DeviceTimer,
                             Stage, Target)
from anytile.errors import BackendError
from anytile.gpu_host import DLPackDevice, DriverBackend

from .driver import LoadedKernel, driver
from .tma import tensor_map_parameters

# ``.stages`` (the GPU lowering, LLVM) is imported when first compiling: discovery and
# launches of already compiled kernels never pay for it

__all__ = ["NvidiaBackend"]

_KNOWN_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")


class NvidiaBackend(DriverBackend):
    """NVIDIA GPUs through LLVM's NVPTX target and the CUDA driver API (memory, launches and
    foreign CUDA arrays: core's ``DriverBackend``)."""

    name = "nvidia"
    device_prefix = "cuda"
    triton_backend = "cuda"
    capabilities = frozenset({"fp64", "fp16", "bf16", "fp8", "int64_atomics", "float_atomics", "dot_int8",
                              "device_assert", "device_print", "bounds_check"})
    op_set = 3                       # the IR ops it lowers: print and assume (anytile.ir.OP_SETS)
    disk_cacheable = True   # ``load`` needs only the cubin (or PTX), metadata and signature
    dlpack_device_type = DLPackDevice.CUDA

    # -- identity and availability --------------------------------------------------------------
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
        """``wgmma`` (sm_90, on by default): pipelined fp16/bf16 dots whose operands both
        come through the shared-memory pipeline run on Hopper's warpgroup MMA, kept in
        flight across loop iterations; ``wgmma=False`` keeps them on ``mma.sync``.  ``tma``
        (sm_90 with the warpgroup MMA, on by default): those operands, when read from an
        ``at.TensorDescriptor`` argument, are copied by the tensor memory accelerator;
        ``tma=False`` keeps ``cp.async``."""
        return ("wgmma", "tma")

    def stages(self, target: Target, options: CompileOptions) -> list[Stage]:
        from .stages import nvidia_stages
        return nvidia_stages(target, options)

    def gpu_driver(self) -> Any:
        return driver

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
                           int(meta["threads_per_block"]), kernel.signature, meta.get("asserts"),
                           meta.get("bounds_params"),
                           tensor_map_parameters(meta.get("box_maps"), kernel.signature,
                                                 lambda: driver.on(device.index),
                                                 lambda: _zeros(device.index)))

    def timer(self, device: DeviceInfo) -> DeviceTimer:
        """CUDA events on the default stream (which waits for the other blocking streams)."""
        return _EventTimer(self, device)


_ZEROS: dict = {}


def _zeros(index: int) -> int:
    """The device address of 16 zero bytes on GPU ``index`` (kept for the process): what a
    descriptor of an empty array points at (``tma.tensor_map_maker``)."""
    found = _ZEROS.get(index)
    if found is None:
        import ctypes
        found = driver.alloc(index, 256)
        zero = (ctypes.c_uint8 * 256)()
        driver.copy_htod(index, found, ctypes.addressof(zero), 256)
        _ZEROS[index] = found
    return found


class _EventTimer(DeviceTimer):
    """A ``DeviceTimer`` from two CUDA events: the time the GPU spent between them."""

    def __init__(self, backend: Backend, device: DeviceInfo) -> None:
        super().__init__(backend, device)
        cu = driver.cu
        with driver.on(device.index):
            self._events = [driver.check("cuEventCreate", cu.cuEventCreate(0), BackendError)
                            for _ in range(2)]

    def start(self) -> None:
        with driver.on(self._device.index):
            driver.check("cuEventRecord", driver.cu.cuEventRecord(self._events[0], 0),
                         BackendError)

    def stop(self) -> None:
        with driver.on(self._device.index):
            driver.check("cuEventRecord", driver.cu.cuEventRecord(self._events[1], 0),
                         BackendError)

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
