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
current device is per host thread and shared with every HIP user in it (torch sets it):
each call here makes the kernel's device current only when it is not (one ``hipGetDevice``)
and sets the caller's back after (``HipDriver.on``).
"""
from __future__ import annotations

import ctypes
import re
import struct
from dataclasses import dataclass
from typing import Any, Optional

from anytile.errors import BackendError, LaunchError
from anytile.gpu_host import (ArgumentBlock, LoadedGpuKernel, compile_launcher,
                              hidden_parameters)

__all__ = ["HipDriver", "LoadedKernel", "driver"]

class HipDriver:
    """Lazily initialised access to the HIP runtime (one per process)."""

    def __init__(self) -> None:
        self._hip: Any = None
        self._error: Optional[str] = None
        self._launch_fn: Any = False      # False: not looked up yet
        self._device_calls: Any = False

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

    def on(self, index: int) -> "_OnDevice":
        """``with driver.on(index):`` -- ``index`` is this thread's current HIP device inside
        the block, and the caller's current device is set back after."""
        return _OnDevice(self, index)

    def enter(self, index: int) -> Optional[int]:
        """Make ``index`` current; the caller's device to restore, or ``None`` if it was."""
        previous = int(self.check("hipGetDevice", self.hip.hipGetDevice()))
        if previous == index:
            return None
        self.check("hipSetDevice", self.hip.hipSetDevice(index))
        return previous

    def leave(self, previous: Optional[int]) -> None:
        if previous is not None:
            self.check("hipSetDevice", self.hip.hipSetDevice(previous))

    @property
    def device_calls(self) -> Any:
        """libamdhip64's (``hipGetDevice``, ``hipSetDevice``) through ``ctypes`` for the raw
        launch path (``None`` when unavailable)."""
        if self._device_calls is False:
            self._device_calls = _open_device_calls()
        return self._device_calls

    def can_access_peer(self, index: int, peer: int) -> bool:
        """Whether device ``index`` can reach device ``peer``'s memory directly (xGMI or
        PCIe peer-to-peer)."""
        if index == peer:
            return True
        return bool(self.check("hipDeviceCanAccessPeer", self.hip.hipDeviceCanAccessPeer(index, peer),
                               BackendError))

    # -- memory --------------------------------------------------------------------------------
    def alloc(self, index: int, nbytes: int) -> int:
        with self.on(index):
            return int(self.check("hipMalloc", self.hip.hipMalloc(max(1, nbytes))))

    def free(self, index: int, address: int) -> None:
        with self.on(index):
            self.check("hipFree", self.hip.hipFree(address))

    def copy_htod(self, index: int, address: int, host_address: int, nbytes: int) -> None:
        with self.on(index):
            self.check("hipMemcpyHtoD", self.hip.hipMemcpyHtoD(address, host_address, nbytes))

    def copy_dtoh(self, index: int, host_address: int, address: int, nbytes: int) -> None:
        with self.on(index):
            self.check("hipMemcpyDtoH", self.hip.hipMemcpyDtoH(host_address, address, nbytes))

    def copy_dtod(self, dst_index: int, dst: int, src_index: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` between device memory on ``src_index`` and ``dst_index`` once both
        have finished their queued work (``hipMemcpyPeer``: direct where the devices allow,
        staged by the runtime otherwise)."""
        self.synchronize(src_index)
        if dst_index != src_index:
            self.synchronize(dst_index)
        with self.on(dst_index):
            self.check("hipMemcpyPeer", self.hip.hipMemcpyPeer(dst, dst_index, src, src_index, nbytes))
        self.synchronize(dst_index)     # done before any stream (torch's) reads it

    def synchronize(self, index: int) -> None:
        with self.on(index):
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
             signature: list, checks: Optional[list] = None,
             spans: Optional[list] = None) -> "LoadedKernel":
        """Load the code object ``image`` and prepare its argument block.  ``checks``: the
        kernel's ``device_assert``s (a debug build), which take an error word as a hidden last
        parameter: allocated here, read after each launch.  ``spans``: checked mode's pointer
        parameters, whose memory the launch passes after the parameters."""
        hip = self.hip
        with self.on(index):
            module = self.check("hipModuleLoadData", hip.hipModuleLoadData(image))
            function = self.check("hipModuleGetFunction",
                                  hip.hipModuleGetFunction(module, name.encode()))
        loaded = LoadedKernel.from_signature(
            list(signature) + hidden_parameters(spans, checks), device_index=index, name=name,
            shared_bytes=shared_bytes, threads=threads, driver=self, module=module,
            function=function)
        loaded.attach_checks(self, checks, spans)
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
            with drv.on(self.device_index):
                result = drv.hip.hipModuleLaunchKernel(self.function, grid[0], grid[1], grid[2],
                                                       self.threads, 1, 1, self.shared_bytes,
                                                       stream, self.params_address, None)
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
        codes, raw, calls = self.raw_codes(), self.driver.launch_fn, self.driver.device_calls
        if codes is None or raw is None or calls is None:
            return None
        block = ArgumentBlock.build("", codes)
        function = ctypes.c_void_p(int(self.function))
        here, elsewhere = _device_guard(calls, self.device_index)
        namespace: dict[str, Any] = {
            "_pack": struct.Struct(block.format).pack_into, "_block": block.block,
            "_bad_argument": self.bad_argument, "_launch": raw, "_function": function,
            "_params": block.params, "_failed": self._raw_failed, "_lock": self.lock,
            "_elsewhere": elsewhere, "_no_context": None}
        if self.driver.device_count() > 1:      # which device is current must be asked
            namespace["_here"] = here
        call = (f"_launch(_function, gx, gy, gz, {self.threads}, 1, 1, {self.shared_bytes}, "
                f"stream, _params, None)")
        return compile_launcher(self.name, len(codes), "", call, namespace, self.device_index)

    def _raw_failed(self, result: int, grid: tuple) -> None:
        hip = self.driver.hip
        self.driver.check(f"hipModuleLaunchKernel('{self.name}', grid={grid})",
                          (hip.hipError_t(result),))


class _OnDevice:
    """``HipDriver.on``'s context manager."""

    __slots__ = ("driver", "index", "previous")

    def __init__(self, driver: HipDriver, index: int) -> None:
        self.driver, self.index, self.previous = driver, index, None

    def __enter__(self) -> None:
        self.previous = self.driver.enter(self.index)

    def __exit__(self, *exc: Any) -> None:
        self.driver.leave(self.previous)


def _device_guard(calls: Any, index: int) -> tuple[Any, Any]:
    """The raw launcher's ``_here`` / ``_elsewhere`` for device ``index``: one
    ``hipGetDevice`` a launch; another current device is set back after the launch."""
    get, set_device = calls
    current = ctypes.c_int(-1)        # one per kernel: its launches hold the kernel's lock
    current_ref = ctypes.byref(current)

    def here() -> bool:
        return get(current_ref) == 0 and current.value == index

    def elsewhere(launch: Any) -> int:
        previous = current.value
        result = set_device(index)
        if result:
            return result
        try:
            return launch()
        finally:
            if previous >= 0:
                set_device(previous)
    return here, elsewhere


def _libhip(*symbols: str) -> Any:
    """The functions ``symbols`` of libamdhip64 through ``ctypes`` (``None`` when unavailable)."""
    for name in ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7", "amdhip64.dll"):
        try:
            lib = ctypes.CDLL(name)
            return tuple(getattr(lib, symbol) for symbol in symbols)
        except (OSError, AttributeError):
            continue
    return None


def _open_launch() -> Any:
    found = _libhip("hipModuleLaunchKernel")
    if found is None:
        return None
    fn = found[0]
    u = ctypes.c_uint
    fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def _open_device_calls() -> Any:
    found = _libhip("hipGetDevice", "hipSetDevice")
    if found is not None:
        found[0].argtypes, found[0].restype = [ctypes.c_void_p], ctypes.c_int
        found[1].argtypes, found[1].restype = [ctypes.c_int], ctypes.c_int
    return found


driver = HipDriver()
