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
                             DeviceInfo, ImportedArray, KernelArg, Stage, Target, numpy_view_of)
from anytile.errors import BackendError
from anytile.ir.types import from_numpy

from .driver import LoadedKernel, driver, stream_handle

# ``.stages`` (the GPU lowering, LLVM) is imported when first compiling: discovery and
# launches of already compiled kernels never pay for it

__all__ = ["NvidiaBackend"]

_KNOWN_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")
_DLPACK_CUDA = 2

_TYPESTR = {"f2": "f16", "f4": "f32", "f8": "f64", "i1": "i8", "i2": "i16", "i4": "i32",
            "i8": "i64", "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64", "b1": "i1"}


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
        if not all(hasattr(cls, a) for a in ("data_ptr", "get_device", "dtype",
                                              "__dlpack_device__")):
            return None

        def read(obj: Any) -> tuple[int, tuple]:
            address = obj.data_ptr()
            return address, (obj.dtype, obj.get_device(), not address & 15)
        return read

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
        """``cuda:N`` for a CUDA tensor of torch, cupy or any DLPack producer."""
        located = _dlpack_device(obj)
        if located is None or located[0] != _DLPACK_CUDA:
            return None
        for info in self.devices():
            if info.index == located[1]:
                return info
        return None

    def import_array(self, obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
        """Zero-copy view of a CUDA array (``__cuda_array_interface__`` or CUDA DLPack).
        Torch-like tensors (``__dlpack_device__`` + ``data_ptr``) take the fast path:
        torch's ``__cuda_array_interface__`` costs tens of microseconds per launch."""
        located = _dlpack_device(obj)
        if located is not None and hasattr(obj, "data_ptr"):
            if located != (_DLPACK_CUDA, device.index):
                return None
            return _from_dlpack(obj, device)
        try:
            interface = getattr(obj, "__cuda_array_interface__", None)
        except (TypeError, ValueError, RuntimeError):  # torch refuses it for bfloat16
            interface = None
        if interface is not None:
            return _from_cuda_array_interface(obj, interface, device)
        if hasattr(obj, "__dlpack_device__") and hasattr(obj, "__dlpack__"):
            try:
                kind, index = obj.__dlpack_device__()
            except Exception:
                return None
            if int(kind) != _DLPACK_CUDA or int(index) != device.index:
                return None
            return _from_dlpack(obj, device)
        return None


def _dlpack_device(obj: Any) -> Optional[tuple[int, int]]:
    locate = getattr(obj, "__dlpack_device__", None)
    if locate is None:
        return None
    try:
        kind, index = locate()
        return int(kind), int(index)
    except Exception:  # noqa: BLE001 -- a foreign object's protocol failing means "not ours"
        return None


def _from_cuda_array_interface(obj: Any, cai: dict, device: DeviceInfo) -> Optional[ImportedArray]:
    typestr = cai["typestr"]
    name = _TYPESTR.get(typestr[1:])
    if name is None:
        return None
    from anytile.ir.types import scalar_type
    dtype = scalar_type(name)
    shape = tuple(int(s) for s in cai["shape"])
    address = int(cai["data"][0])
    itemsize = dtype.nbytes
    strides_bytes = cai.get("strides")
    if strides_bytes is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= max(s, 1)
        strides = tuple(reversed(strides))
    else:
        if any(s % itemsize for s in strides_bytes):
            return None
        strides = tuple(int(s) // itemsize for s in strides_bytes)
    extent = sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + 1 if all(shape) else 0
    buf = Buffer(device, extent * itemsize, address, address, owner=obj)
    return ImportedArray(buf, 0, shape, strides, dtype)


_FOREIGN_DTYPES: dict[Any, Any] = {}   # a framework's dtype object -> ScalarType (or None)


def _foreign_dtype(framework_dtype: Any) -> Any:
    try:
        return _FOREIGN_DTYPES[framework_dtype]
    except KeyError:
        pass
    except TypeError:  # unhashable dtype object
        return None
    text = str(framework_dtype).replace("torch.", "")
    try:
        found: Any = from_numpy(np.dtype(text))
    except TypeError:
        from anytile.ir.types import bf16
        found = bf16 if "bfloat16" in text else None
    _FOREIGN_DTYPES[framework_dtype] = found
    return found


def _from_dlpack(obj: Any, device: DeviceInfo) -> Optional[ImportedArray]:
    """CUDA DLPack through torch-like attributes (``data_ptr``, ``stride``) when present."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "stride") and hasattr(obj, "dtype"):
        dtype = _foreign_dtype(obj.dtype)
        if dtype is None:
            return None
        shape = tuple(int(s) for s in obj.shape)
        strides = tuple(int(s) for s in obj.stride())
        address = int(obj.data_ptr())
        buf = Buffer(device, 0, address, address, owner=obj)
        return ImportedArray(buf, 0, shape, strides, dtype)
    return None
