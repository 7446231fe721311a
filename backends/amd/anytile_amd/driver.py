"""The HIP runtime through hip-python (``from hip import hip``): devices, memory, modules,
launches.

hip-python's calls return ``(hipError_t, *results)``; ``HipDriver.check`` turns every error
into a ``BackendError`` (set-up) or ``LaunchError`` (launches) naming the call and the HIP
error.  Without ROCm, hip-python imports but its first call fails to open
``libamdhip64.so``: ``availability_error`` then says so, and compiling still works.

Launches reuse an argument block built at load time (one ctypes scalar per parameter and the
array of their addresses ``hipModuleLaunchKernel`` reads).  The fast path
(``LoadedKernel.raw_launcher``) is core's generated launcher (``anytile.gpu_host``): one
``struct.pack_into`` of the argument values and a ``ctypes`` call of
``hipModuleLaunchKernel`` in ``libamdhip64.so`` with the grid as plain arguments.  HIP's
current device is per host thread: each thread sets the kernel's device once before its
first call.
"""
from __future__ import annotations

import ctypes
import re
import struct
import threading
from dataclasses import dataclass
from typing import Any, Optional

from anytile.errors import BackendError, LaunchError
from anytile.gpu_host import ERROR_WORD, ArgumentBlock, LoadedGpuKernel, compile_launcher

__all__ = ["HipDriver", "LoadedKernel", "driver"]

class HipDriver:
    """Lazily initialised access to the HIP runtime (one per process)."""

    def __init__(self) -> None:
        self._hip: Any = None
        self._error: Optional[str] = None
        self._local = threading.local()
        self._launch_fn: Any = False      # False: not looked up yet

    # -- set-up --------------------------------------------------------------------------------
    @property
    def hip(self) -> Any:
        if self._hip is None and self._error is None:
            self._init()
        if self._hip is None:
            raise BackendError(self._error or "the HIP runtime is not available")
        return self._hip

    def _init(self) -> None:
        try:
            from hip import hip
        except Exception as exc:  # the package itself is missing or broken
            self._error = f"hip-python is not importable: {type(exc).__name__}: {exc}"
            return
        try:
            result = hip.hipInit(0)
        except Exception as exc:  # libamdhip64.so cannot be opened: no ROCm here
            detail = re.sub(r"b'([^']*)'", r"\1", str(exc))  # hip-python quotes bytes reprs
            self._error = f"the HIP runtime (libamdhip64.so) cannot be loaded: {detail}"
            return
        self._hip = hip
        err = result[0] if isinstance(result, tuple) else result
        if err != hip.hipError_t.hipSuccess:
            self._hip = None
            self._error = f"hipInit failed with {self._error_name(hip, err)}"

    @staticmethod
    def _error_name(hip: Any, err: Any) -> str:
        try:
            name = hip.hipGetErrorName(err)[1]
            return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:  # noqa: BLE001 -- naming an error must not raise another
            return str(err)

    def check(self, what: str, result: Any, error: type = LaunchError) -> Any:
        """Raise ``error`` unless ``result``'s hipError_t is success; return the rest."""
        hip = self.hip
        err, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
        if err != hip.hipError_t.hipSuccess:
            raise error(f"HIP call {what} failed: {self._error_name(hip, err)}")
        return rest[0] if len(rest) == 1 else rest

    def availability_error(self) -> Optional[str]:
        """Why kernels cannot run here, or ``None`` when a device is usable."""
        try:
            count = self.device_count()
        except BackendError as exc:
            return str(exc)
        return None if count > 0 else "the HIP runtime reports no AMD GPU"

    def runtime_version(self) -> Optional[str]:
        """``"6.2"`` for HIP 6.2, or ``None`` without a runtime."""
        if self.availability_error():
            return None
        version = int(self.check("hipRuntimeGetVersion", self.hip.hipRuntimeGetVersion(),
                                 BackendError))
        return f"{version // 10_000_000}.{version // 100_000 % 100}"

    # -- devices -------------------------------------------------------------------------------
    def device_count(self) -> int:
        return int(self.check("hipGetDeviceCount", self.hip.hipGetDeviceCount(), BackendError))

    def properties(self, index: int) -> dict[str, Any]:
        props = self.check("hipGetDeviceProperties", self.hip.hipGetDeviceProperties(index),
                           BackendError)

        def text(value: Any) -> str:
            raw = bytes(value) if not isinstance(value, (bytes, str)) else value
            return raw.split(b"\0")[0].decode() if isinstance(raw, bytes) else raw
        return {"name": text(props.name), "arch": text(props.gcnArchName).split(":")[0],
                "gcn_arch_name": text(props.gcnArchName), "warp_size": int(props.warpSize),
                "multiprocessor_count": int(props.multiProcessorCount),
                "max_shared_memory_per_block": int(props.sharedMemPerBlock),
                "max_threads_per_block": int(props.maxThreadsPerBlock)}

    def set_device(self, index: int) -> None:
        """Make ``index`` this host thread's current device (once per thread and device)."""
        if getattr(self._local, "device", None) != index:
            self.check("hipSetDevice", self.hip.hipSetDevice(index))
            self._local.device = index

    # -- memory --------------------------------------------------------------------------------
    def alloc(self, index: int, nbytes: int) -> int:
        self.set_device(index)
        return int(self.check("hipMalloc", self.hip.hipMalloc(max(1, nbytes))))

    def free(self, index: int, address: int) -> None:
        self.set_device(index)
        self.check("hipFree", self.hip.hipFree(address))

    def copy_htod(self, index: int, address: int, host_address: int, nbytes: int) -> None:
        self.set_device(index)
        self.check("hipMemcpyHtoD", self.hip.hipMemcpyHtoD(address, host_address, nbytes))

    def copy_dtoh(self, index: int, host_address: int, address: int, nbytes: int) -> None:
        self.set_device(index)
        self.check("hipMemcpyDtoH", self.hip.hipMemcpyDtoH(host_address, address, nbytes))

    def synchronize(self, index: int) -> None:
        self.set_device(index)
        self.check("hipDeviceSynchronize", self.hip.hipDeviceSynchronize())

    # -- modules and launches ------------------------------------------------------------------
    @property
    def launch_fn(self) -> Any:
        """``hipModuleLaunchKernel`` of libamdhip64 through ``ctypes`` (``None`` when it
        cannot be opened that way)."""
        if self._launch_fn is False:
            self._launch_fn = _open_launch()
        return self._launch_fn

    def load(self, index: int, image: bytes, name: str, shared_bytes: int, threads: int,
             signature: list, checks: Optional[list] = None) -> "LoadedKernel":
        """Load the code object ``image`` and prepare its argument block.  ``checks``: the
        kernel's ``device_assert``s (a debug build), which take an error word as a hidden last
        parameter: allocated here, read after each launch."""
        hip = self.hip
        self.set_device(index)
        module = self.check("hipModuleLoadData", hip.hipModuleLoadData(image))
        function = self.check("hipModuleGetFunction", hip.hipModuleGetFunction(module, name.encode()))
        loaded = LoadedKernel.from_signature(
            list(signature) + ([ERROR_WORD] if checks else []), device_index=index, name=name,
            shared_bytes=shared_bytes, threads=threads, driver=self, module=module,
            function=function)
        if checks:
            address = self.alloc(index, 4)
            zero = ctypes.c_int32(0)   # kept alive until the copy returns
            self.copy_htod(index, address, ctypes.addressof(zero), 4)
            loaded.attach_error_word(checks, address)
        return loaded


@dataclass(eq=False)
class LoadedKernel(LoadedGpuKernel):
    """A kernel ready to launch: the hipFunction_t and its reusable argument block (core's
    ``LoadedGpuKernel``)."""

    driver: Any = None
    module: Any = None
    function: Any = None
    memory_name = "AMD GPU memory"

    def launch(self, grid: tuple, args: Any, stream: Optional[int]) -> None:
        """Fill the argument block from ``args`` and launch.  ``stream`` ``None``: the current
        stream of the framework (torch, cupy) owning the first imported array, else 0."""
        with self.lock:
            stream = self.fill(args, stream)
            drv = self.driver
            drv.set_device(self.device_index)
            result = drv.hip.hipModuleLaunchKernel(self.function, grid[0], grid[1], grid[2],
                                                   self.threads, 1, 1, self.shared_bytes, stream,
                                                   self.params_address, None)
            drv.check(f"hipModuleLaunchKernel('{self.name}', grid={tuple(grid)})", result)
            if self.checks:
                drv.check("hipStreamSynchronize", drv.hip.hipStreamSynchronize(stream))
                self.check_error_word(
                    lambda word: drv.copy_dtoh(self.device_index, ctypes.addressof(word),
                                               self.error_word, 4),
                    lambda zero: drv.copy_htod(self.device_index, self.error_word,
                                               ctypes.addressof(zero), 4))

    def raw_launcher(self) -> Optional[Any]:
        """A function ``run(gx, gy, gz, stream, owner, *values)`` launching through
        ``hipModuleLaunchKernel`` by ``ctypes`` (see the module docstring), or ``None`` when
        libamdhip64 cannot be reached that way or a parameter type has no ``struct`` code."""
        codes, raw = self.raw_codes(), self.driver.launch_fn
        if codes is None or raw is None:
            return None
        block = ArgumentBlock.build("", codes)
        function = ctypes.c_void_p(int(self.function))
        drv, index, local = self.driver, self.device_index, self.driver._local

        def launch(*arguments: Any) -> int:
            if getattr(local, "device", None) != index:
                drv.set_device(index)
            return raw(*arguments)
        namespace: dict[str, Any] = {
            "_pack": struct.Struct(block.format).pack_into, "_block": block.block,
            "_bad_argument": self.bad_argument, "_launch": launch, "_function": function,
            "_params": block.params, "_failed": self._raw_failed, "_lock": self.lock,
            "_again": None}
        call = (f"_launch(_function, gx, gy, gz, {self.threads}, 1, 1, {self.shared_bytes}, "
                f"stream, _params, None)")
        return compile_launcher(self.name, len(codes), "", call, namespace, index)

    def _raw_failed(self, result: int, grid: tuple, again: Any) -> None:
        hip = self.driver.hip
        self.driver.check(f"hipModuleLaunchKernel('{self.name}', grid={grid})",
                          (hip.hipError_t(result),))


def _open_launch() -> Any:
    for name in ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7", "amdhip64.dll"):
        try:
            fn = ctypes.CDLL(name).hipModuleLaunchKernel
        except (OSError, AttributeError):
            continue
        u = ctypes.c_uint
        fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_void_p]
        fn.restype = ctypes.c_int
        return fn
    return None


driver = HipDriver()
