"""The CUDA driver through ``cuda.bindings.driver``: devices, contexts, memory, modules, launches.

Every call's ``CUresult`` is checked; a failure raises ``LaunchError`` (or ``BackendError``
for set-up) naming the driver call and the error.  Launches reuse an argument block built at
load time (one ctypes scalar per parameter and one array of their addresses), so a launch is
a few attribute stores and one ``cuLaunchKernel``.

The fast launch (``LoadedKernel.raw_launcher``) skips cuda.bindings' wrapper: one
``struct.pack_into`` writes the grid, the stream and every argument into a block holding a
``CUlaunchConfig`` and the parameter slots, and ``cuLaunchKernelEx`` is called through
``ctypes`` on libcuda with four prebuilt pointers.  Without a libcuda that ``ctypes`` can open
(or without ``cuLaunchKernelEx``, before CUDA 12) launches take the cuda.bindings path.
Argument slots, streams and the generated launcher are core's (``anytile.gpu_host``); what is
CUDA's here is the driver calls and the ``CUlaunchConfig`` header.
"""
from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass
from typing import Any, Optional

from anytile.errors import BackendError, LaunchError
from anytile.gpu_host import (ArgumentBlock, LoadedGpuKernel, RecordParameter, compile_launcher,
                              hidden_parameters)

__all__ = ["Driver", "LoadedKernel", "driver"]

_CUDA_ERROR_INVALID_CONTEXT = 201



def _error_name(cu: Any, err: Any) -> str:
    try:
        result, name = cu.cuGetErrorName(err)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return str(err)


class Driver:
    """Lazily initialised access to the CUDA driver (one per process)."""

    def __init__(self) -> None:
        self._cu: Any = None
        self._error: Optional[str] = None
        self._contexts: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._launch_ex: Any = False     # False: not looked up yet
        self._context_calls: Any = False
        self._peers: set[tuple[int, int]] = set()

    # -- set-up --------------------------------------------------------------------------------
    @property
    def cu(self) -> Any:
        if self._cu is None and self._error is None:
            self._init()
        if self._cu is None:
            raise BackendError(self._error or "no NVIDIA driver found")
        return self._cu

    def _init(self) -> None:
        try:
            from cuda.bindings import driver as cu
        except Exception as exc:  # the package itself is missing or broken
            self._error = f"cuda-bindings is not importable: {type(exc).__name__}: {exc}"
            return
        try:
            (err,) = cu.cuInit(0)
        except Exception as exc:  # libcuda.so is absent: no driver on this machine
            self._error = f"no NVIDIA driver found: {exc}"
            return
        if err == cu.CUresult.CUDA_ERROR_NOT_INITIALIZED:
            # what cuInit answers in a process forked from one that had initialised CUDA
            self._error = ("CUDA cannot be used in this process: it was forked from one that "
                           "had initialised CUDA (cuInit failed with "
                           "CUDA_ERROR_NOT_INITIALIZED); start it with the 'spawn' method")
            return
        if err != cu.CUresult.CUDA_SUCCESS:
            self._error = f"no NVIDIA driver found: cuInit failed with {_error_name(cu, err)}"
            return
        self._cu = cu

    @property
    def launch_ex(self) -> Any:
        """libcuda's ``cuLaunchKernelEx`` through ``ctypes`` (``None`` when unavailable)."""
        if self._launch_ex is False:
            self._launch_ex = _open_launch_ex()
        return self._launch_ex

    def availability_error(self) -> Optional[str]:
        """Why kernels cannot run here, or ``None`` when a device is usable."""
        try:
            count = self.device_count()
        except BackendError as exc:
            return str(exc)
        return None if count > 0 else "the NVIDIA driver reports no CUDA device"

    def driver_version(self) -> Optional[str]:
        """``"13.0"`` for CUDA 13.0, or ``None`` without a driver."""
        if self.availability_error():
            return None
        version = int(self.check("cuDriverGetVersion", self.cu.cuDriverGetVersion(), BackendError))
        return f"{version // 1000}.{version % 1000 // 10}"

    def check(self, what: str, result: Any, error: type = LaunchError) -> Any:
        """Raise if ``result``'s CUresult is not success; return the remaining values."""
        cu = self.cu
        err, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
        if err != cu.CUresult.CUDA_SUCCESS:
            raise error(f"CUDA driver call {what} failed: {_error_name(cu, err)}")
        return rest[0] if len(rest) == 1 else rest

    # -- devices and contexts ------------------------------------------------------------------
    def device_count(self) -> int:
        return int(self.check("cuDeviceGetCount", self.cu.cuDeviceGetCount(), BackendError))

    def properties(self, index: int) -> dict[str, Any]:
        cu = self.cu
        dev = self.check("cuDeviceGet", cu.cuDeviceGet(index), BackendError)
        attr = cu.CUdevice_attribute

        def get(name: str) -> int:
            return int(self.check("cuDeviceGetAttribute",
                                  cu.cuDeviceGetAttribute(getattr(attr, name), dev), BackendError))
        name = self.check("cuDeviceGetName", cu.cuDeviceGetName(256, dev), BackendError)
        major = get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        return {
            "name": name.split(b"\0")[0].decode() if isinstance(name, bytes) else str(name),
            "compute_capability": (major, minor),
            "multiprocessor_count": get("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            "warp_size": get("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
            "max_shared_memory_per_block": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
            "max_shared_memory_per_block_optin":
                get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            "max_registers_per_block": get("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
            "max_threads_per_block": get("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
        }

    def context(self, index: int) -> Any:
        """Device ``index``'s primary context (retained once, kept for the process)."""
        ctx = self._contexts.get(index)
        if ctx is None:
            with self._lock:
                ctx = self._contexts.get(index)
                if ctx is None:
                    cu = self.cu
                    dev = self.check("cuDeviceGet", cu.cuDeviceGet(index))
                    ctx = self.check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(dev))
                    self._contexts[index] = ctx
        return ctx

    def on(self, index: int) -> "_OnDevice":
        """``with driver.on(index):`` -- device ``index``'s primary context is current in this
        thread inside the block, and the caller's (torch's, say) is current again after."""
        return _OnDevice(self, index)

    def enter(self, index: int) -> bool:
        """Make device ``index``'s primary context current; ``True`` when it was pushed over
        the caller's (or over none), to be popped by ``leave``."""
        ctx, cu = self.context(index), self.cu
        if int(self.check("cuCtxGetCurrent", cu.cuCtxGetCurrent())) == int(ctx):
            return False
        self.check("cuCtxPushCurrent", cu.cuCtxPushCurrent(ctx))
        return True

    def leave(self, pushed: bool) -> None:
        if pushed:
            self.check("cuCtxPopCurrent", self.cu.cuCtxPopCurrent())

    @property
    def context_calls(self) -> Any:
        """libcuda's (``cuCtxGetCurrent``, ``cuCtxPushCurrent``, ``cuCtxPopCurrent``) through
        ``ctypes`` for the raw launch path (``None`` when unavailable)."""
        if self._context_calls is False:
            self._context_calls = _open_context_calls()
        return self._context_calls

    def can_access_peer(self, index: int, peer: int) -> bool:
        """Whether device ``index`` can read and write device ``peer``'s memory directly
        (NVLink or PCIe peer-to-peer); copies between them then skip the host."""
        if index == peer:
            return True
        cu = self.cu
        dev = self.check("cuDeviceGet", cu.cuDeviceGet(index), BackendError)
        other = self.check("cuDeviceGet", cu.cuDeviceGet(peer), BackendError)
        return bool(self.check("cuDeviceCanAccessPeer", cu.cuDeviceCanAccessPeer(dev, other),
                               BackendError))

    # -- memory --------------------------------------------------------------------------------
    def alloc(self, index: int, nbytes: int) -> int:
        with self.on(index):
            return int(self.check("cuMemAlloc", self.cu.cuMemAlloc(max(1, nbytes))))

    def free(self, index: int, address: int) -> None:
        with self.on(index):
            self.check("cuMemFree", self.cu.cuMemFree(self.cu.CUdeviceptr(address)))

    def copy_htod(self, index: int, address: int, host_address: int, nbytes: int) -> None:
        with self.on(index):
            self.check("cuMemcpyHtoD",
                       self.cu.cuMemcpyHtoD(self.cu.CUdeviceptr(address), host_address, nbytes))

    def copy_dtoh(self, index: int, host_address: int, address: int, nbytes: int) -> None:
        with self.on(index):
            self.check("cuMemcpyDtoH",
                       self.cu.cuMemcpyDtoH(host_address, self.cu.CUdeviceptr(address), nbytes))

    def copy_dtod(self, dst_index: int, dst: int, src_index: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` between device memory on devices ``src_index`` and ``dst_index``
        once both have finished their queued work, and wait for it: peer to peer where the
        devices allow it, staged through the host by the driver otherwise (``cuMemcpyPeer``)."""
        cu = self.cu
        self.synchronize(src_index)
        if dst_index == src_index:
            with self.on(dst_index):
                self.check("cuMemcpyDtoD",
                           cu.cuMemcpyDtoD(cu.CUdeviceptr(dst), cu.CUdeviceptr(src), nbytes))
            self.synchronize(dst_index)
            return
        self.synchronize(dst_index)
        with self.on(dst_index):       # the driver wants a current context, any
            self._enable_peer(dst_index, src_index)
            self.check("cuMemcpyPeer", cu.cuMemcpyPeer(cu.CUdeviceptr(dst), self.context(dst_index),
                                                       cu.CUdeviceptr(src), self.context(src_index),
                                                       nbytes))
        # device-to-device copies return before they are done, on the legacy stream, which
        # torch's non-blocking streams do not wait for: finish here
        self.synchronize(dst_index)

    def _enable_peer(self, index: int, peer: int) -> None:
        """Let device ``index`` (current) reach ``peer``'s memory when the hardware allows,
        once per pair: copies between them then go peer to peer."""
        if (index, peer) in self._peers:
            return
        self._peers.add((index, peer))
        if self.can_access_peer(index, peer):
            err = self.cu.cuCtxEnablePeerAccess(self.context(peer), 0)[0]
            if err not in (self.cu.CUresult.CUDA_SUCCESS,
                           self.cu.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED):
                self.check("cuCtxEnablePeerAccess", (err,))

    def synchronize(self, index: int) -> None:
        with self.on(index):
            self.check("cuCtxSynchronize", self.cu.cuCtxSynchronize())

    # -- modules and launches ------------------------------------------------------------------
    def load(self, index: int, image: bytes, name: str, shared_bytes: int, threads: int,
             signature: list, checks: Optional[list] = None,
             spans: Optional[list] = None, computed: Optional[list] = None) -> "LoadedKernel":
        """Load ``image`` and prepare its argument block.  ``checks``: the kernel's
        ``device_assert``s (``[message, file, line]``; compiled with debug), which take an
        error word as a hidden last parameter: allocated here, read after each launch.
        ``spans``: checked mode's pointer parameters, whose memory the launch passes after
        the parameters (``gpu_host.hidden_parameters``).  ``computed``: ``(name, nbytes,
        make, sources)`` of the parameters after those that the launcher computes
        (``LoadedGpuKernel.computed``)."""
        cu = self.cu
        with self.on(index):
            module = self.check("cuModuleLoadData", cu.cuModuleLoadData(image))
            function = self.check("cuModuleGetFunction",
                                  cu.cuModuleGetFunction(module, name.encode()))
            if shared_bytes > 48 * 1024:
                attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                self.check("cuFuncSetAttribute", cu.cuFuncSetAttribute(function, attr, shared_bytes))
        records = [(n, RecordParameter(nbytes)) for n, nbytes, _, _ in computed or ()]
        loaded = LoadedKernel.build(self, index, module, function, name, shared_bytes, threads,
                                    list(signature) + hidden_parameters(spans, checks) + records)
        loaded.computed = [(make, sources) for _, _, make, sources in computed or ()]
        loaded.attach_checks(self, checks, spans)
        return loaded


@dataclass(eq=False)
class LoadedKernel(LoadedGpuKernel):
    """A kernel ready to launch: the CUfunction and its reusable argument block (core's
    ``LoadedGpuKernel``)."""

    driver: Any = None
    module: Any = None
    function: Any = None
    memory_name = "CUDA device memory"

    @staticmethod
    def build(drv: Driver, index: int, module: Any, function: Any, name: str, shared: int,
              threads: int, signature: list) -> "LoadedKernel":
        return LoadedKernel.from_signature(signature, device_index=index, name=name,
                                           shared_bytes=shared, threads=threads, driver=drv,
                                           module=module, function=function)

    def launch(self, grid: tuple, args: Any, stream: Optional[int]) -> None:
        """Fill the argument block from ``args`` and launch.  ``stream`` ``None``: the current
        stream of the framework (torch, cupy) owning the first imported array, else 0."""
        with self.lock:   # the argument block is shared by the threads launching this kernel
            self._fill_and_launch(grid, args, stream)

    def _fill_and_launch(self, grid: tuple, args: Any, stream: Optional[int]) -> None:
        stream = self.fill(args, stream)
        drv = self.driver
        cu = drv.cu
        with drv.on(self.device_index):
            result = cu.cuLaunchKernel(self.function, grid[0], grid[1], grid[2], self.threads, 1,
                                       1, self.shared_bytes, stream, self.params_address, 0)
            drv.check(f"cuLaunchKernel('{self.name}', grid={tuple(grid)})", result)
            if self.checks:
                self.read_error_word(stream)

    def read_error_word(self, stream: int) -> None:
        """After a launch of a kernel with ``device_assert``s (a debug build): wait for it,
        and raise ``DeviceAssertError`` for the first assert that failed (clearing the word)."""
        drv, cu = self.driver, self.driver.cu
        drv.check("cuStreamSynchronize", cu.cuStreamSynchronize(stream))
        self.check_error_word(
            lambda word: drv.copy_dtoh(self.device_index, ctypes.addressof(word), self.error_word, 4),
            lambda zero: drv.copy_htod(self.device_index, self.error_word, ctypes.addressof(zero), 4))

    def raw_launcher(self) -> Optional[Any]:
        """A function ``run(gx, gy, gz, stream, owner, *values)`` launching through
        ``cuLaunchKernelEx`` by ``ctypes`` (see the module docstring), or ``None`` when
        libcuda cannot be reached that way or a parameter type has no ``struct`` code."""
        launch_ex, calls = self.driver.launch_ex, self.driver.context_calls
        codes = self.raw_codes()
        if codes is None or launch_ex is None or calls is None:
            return None
        block = ArgumentBlock.build(_CONFIG_FORMAT, codes)
        config, function = ctypes.c_void_p(block.address), ctypes.c_void_p(int(self.function))
        here, elsewhere = _context_guard(calls, int(self.driver.context(self.device_index)))
        namespace: dict[str, Any] = {
            "_pack": struct.Struct(block.format).pack_into, "_block": block.block,
            "_bad_argument": self.bad_argument, "_launch": launch_ex, "_config": config,
            "_function": function, "_params": block.params, "_failed": self._raw_failed,
            "_lock": self.lock, "_elsewhere": elsewhere, "_no_context": _CUDA_ERROR_INVALID_CONTEXT}
        if self.driver.device_count() > 1:      # which context is current must be asked
            namespace["_here"] = here
        header = f"gx, gy, gz, {self.threads}, 1, 1, {self.shared_bytes}, stream, 0, 0"
        computed = self.computed_expressions(namespace)
        return compile_launcher(self.name, len(codes) - len(computed), header,
                                "_launch(_config, _function, _params, None)", namespace,
                                self.device_index, computed)

    def _raw_failed(self, result: int, grid: tuple) -> None:
        """A failed raw launch, reported with the driver's error name."""
        cu = self.driver.cu
        self.driver.check(f"cuLaunchKernelEx('{self.name}', grid={grid})", (cu.CUresult(result),))


class _OnDevice:
    """``Driver.on``'s context manager (a class: cheaper than a generator)."""

    __slots__ = ("driver", "index", "pushed")

    def __init__(self, driver: Driver, index: int) -> None:
        self.driver, self.index, self.pushed = driver, index, False

    def __enter__(self) -> None:
        self.pushed = self.driver.enter(self.index)

    def __exit__(self, *exc: Any) -> None:
        self.driver.leave(self.pushed)


def _context_guard(calls: Any, context: int) -> tuple[Any, Any]:
    """The raw launcher's ``_here`` / ``_elsewhere`` for the context ``context``: with
    several GPUs, one ``cuCtxGetCurrent`` a launch (with one, only a launch failing for want
    of a context); another context (torch's on another device) or none is pushed over for
    the launch and popped after, so the caller's stays current."""
    get, push, pop = calls
    current = ctypes.c_void_p()       # one per kernel: its launches hold the kernel's lock
    current_ref, own = ctypes.byref(current), ctypes.c_void_p(context)

    def here() -> bool:
        return get(current_ref) == 0 and current.value == context

    def elsewhere(launch: Any) -> int:
        result = push(own)
        if result:
            return result
        try:
            return launch()
        finally:
            pop(current_ref)
    return here, elsewhere


_CONFIG_FORMAT = "=7I4xQQI4x"     # CUlaunchConfig: grid[3], block[3], shared, stream, attrs, n


def _libcuda(*symbols: str) -> Any:
    """The functions ``symbols`` of libcuda through ``ctypes`` (``None`` when unavailable)."""
    import ctypes.util
    names = ("libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda"), "nvcuda.dll")
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            return tuple(getattr(lib, symbol) for symbol in symbols)
        except (OSError, AttributeError):
            continue
    return None


def _open_launch_ex() -> Any:
    found = _libcuda("cuLaunchKernelEx")  # arguments: four pointers, passed as c_void_p
    return found[0] if found else None


def _open_context_calls() -> Any:
    found = _libcuda("cuCtxGetCurrent", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2")
    if found:
        for fn in found:
            fn.argtypes, fn.restype = [ctypes.c_void_p], ctypes.c_int
    return found


driver = Driver()
