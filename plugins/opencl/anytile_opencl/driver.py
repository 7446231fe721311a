"""The OpenCL driver seen through pyopencl: devices and their facts, program builds (cached in
memory, and by the driver on disk), loaded kernels and their launches.

Devices are numbered ``opencl:0..N`` over every platform's devices, in the order the ICD
loader lists them.  Each device gets its own context and in-order queue; a launch only
enqueues, and copies to the host wait for the queue.
"""
from __future__ import annotations

import functools
import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from anytile.backend import DeviceInfo, KernelArg
from anytile.errors import BackendError, LaunchError, device_assert_error
from anytile.ir import PointerType

from . import waits
from .checked import ERROR_RECORD_INTS, bounds_error, check_private_memory
from .target import OpenCLArch

__all__ = ["DeviceRecord", "discover_devices", "discovery_error", "build_program", "LoadedKernel",
           "BUILD_OPTIONS", "check_private_memory"]

#: every program: IEEE division and sqrt in f32 (NVIDIA's are not correctly rounded otherwise);
#: no warnings (generated code, e.g. `x && 1` from a constant mask, is no user's to fix)
BUILD_OPTIONS = ("-cl-std=CL1.2", "-cl-fp32-correctly-rounded-divide-sqrt", "-w")

#: the extensions `anytile backends` reports, in this order
NOTABLE_EXTENSIONS = ("cl_khr_fp64", "cl_khr_fp16", "cl_khr_int64_base_atomics",
                      "cl_khr_int64_extended_atomics", "cl_khr_subgroups")


@dataclass(eq=False)
class DeviceRecord:
    """One OpenCL device: what users see (``info``), what code generation needs (``arch``),
    and the context and queue used to run on it (made on first use)."""

    info: DeviceInfo
    arch: OpenCLArch
    cl_device: Any
    platform_name: str
    extensions: frozenset
    compute_units: int
    cache_bytes: int
    _context: Any = None
    _queue: Any = None
    #: the event of the last kernel launched on the queue (``waits.settle``)
    last_kernel: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def context(self) -> Any:
        waits.ensure_usable()
        if self._context is None:
            with self._lock:
                if self._context is None:
                    import pyopencl as cl
                    self._context = cl.Context([self.cl_device])
                    self._queue = cl.CommandQueue(self._context, self.cl_device)
        return self._context

    @property
    def queue(self) -> Any:
        self.context      # noqa: B018 -- makes both
        return self._queue


def _simd_width(device: Any, is_cpu: bool) -> int:
    """Work-items that run in lock step: a warp (NVIDIA), a wavefront (AMD), else 32."""
    if is_cpu:
        return 1
    for attribute in ("warp_size_nv", "wavefront_width_amd"):
        try:
            return int(getattr(device, attribute))
        except Exception:  # noqa: BLE001 -- the vendor's query extension is absent
            continue
    return 32


def _arch_of(device: Any, extensions: frozenset) -> OpenCLArch:
    import pyopencl as cl
    is_cpu = bool(device.type & cl.device_type.CPU)
    if is_cpu:
        vector = 1
        while vector * 2 <= min(16, int(device.preferred_vector_width_float) or 1):
            vector *= 2
        vector = max(vector, 4)
    else:
        vector = 4
    max_group = int(device.max_work_group_size)
    local_kib = int(device.local_mem_size) // 1024
    return OpenCLArch("cpu" if is_cpu else "gpu", _simd_width(device, is_cpu), vector, local_kib,
                      max_group, "cl_khr_fp64" in extensions,
                      "cl_khr_int64_base_atomics" in extensions,
                      "cl_khr_int64_extended_atomics" in extensions)


@functools.lru_cache(maxsize=1)
def _discovery() -> tuple[tuple[DeviceRecord, ...], str]:
    try:
        import pyopencl as cl
    except Exception as exc:  # noqa: BLE001 -- reported by availability()
        return (), f"pyopencl is not importable: {type(exc).__name__}: {exc}"
    waits.note_initialised()          # from here a forked child must not use the driver
    try:
        platforms = cl.get_platforms()
    except Exception as exc:  # noqa: BLE001 -- no ICD or no platform
        return (), f"no OpenCL platform found ({type(exc).__name__}: {exc}); install a driver " \
                   f"such as pocl-opencl-icd"
    records: list[DeviceRecord] = []
    for platform in platforms:
        try:
            devices = platform.get_devices()
        except Exception:  # noqa: BLE001 -- a platform without devices
            continue
        for device in devices:
            extensions = frozenset(device.extensions.split())
            arch = _arch_of(device, extensions)
            index = len(records)
            notable = " ".join(e for e in NOTABLE_EXTENSIONS if e in extensions) or "none"
            kind = "CPU" if arch.kind == "cpu" else "GPU"
            description = (f"{platform.name.strip()} / {device.name.strip()} ({kind}), "
                           f"{device.opencl_c_version.strip()}, extensions: {notable}")
            props = (("arch", str(arch)), ("compute_units", int(device.max_compute_units)),
                     ("driver_version", device.driver_version.strip()),
                     ("extensions", notable), ("local_mem_size", int(device.local_mem_size)),
                     ("max_work_group_size", int(device.max_work_group_size)),
                     ("opencl_c_version", device.opencl_c_version.strip()),
                     ("platform", platform.name.strip()), ("warp_size", arch.simd))
            records.append(DeviceRecord(
                DeviceInfo(f"opencl:{index}", index, description, props), arch, device,
                platform.name.strip(), extensions, int(device.max_compute_units),
                int(device.global_mem_cache_size) or 1 << 25))
    if not records:
        return (), "OpenCL platforms are installed but list no device"
    return tuple(records), ""


def discover_devices() -> tuple[DeviceRecord, ...]:
    """Every OpenCL device of every platform (empty when there is none)."""
    return _discovery()[0]


def discovery_error() -> str:
    """Why there is no device ("" when there is one)."""
    return _discovery()[1]


_programs: dict[tuple, Any] = {}
_programs_lock = threading.Lock()


def build_program(record: DeviceRecord, source: str) -> Any:
    """``source`` built for ``record``'s device, once per process (the driver keeps its own
    cache on disk: PoCL in ``$POCL_CACHE_DIR``, NVIDIA in ``~/.nv/ComputeCache``)."""
    import pyopencl as cl
    waits.ensure_usable()
    key = (record.info.index, hashlib.sha256(source.encode()).hexdigest())
    with _programs_lock:
        program = _programs.get(key)
    if program is not None:
        return program
    unbuilt = cl.Program(record.context, source)
    try:
        program = unbuilt.build(options=list(BUILD_OPTIONS))
    except cl.Error as exc:
        raise BackendError(f"the OpenCL driver of {record.info.name} could not build a kernel "
                           f"anytile generated (a bug in anytile-opencl; please report it):\n"
                           f"{_build_log(unbuilt, cl) or str(exc)[-3000:]}") from None
    with _programs_lock:
        _programs[key] = program
    return program


def _build_log(program: Any, cl: Any) -> str:
    """The compiler's messages for every device (the part of a build error that says what
    went wrong; some drivers print it only to stderr), at most 3000 characters."""
    try:
        logs = [program.get_build_info(d, cl.program_build_info.LOG).strip()
                for d in program.get_info(cl.program_info.DEVICES)]
    except Exception:  # noqa: BLE001 -- the log is a courtesy; the error is raised anyway
        return ""
    return "\n".join(log for log in logs if log)[:3000]


def _scalar_packer(t: Any) -> tuple[Any, Any]:
    """The kernel parameter's NumPy dtype for IR type ``t``, and the function turning a
    Python scalar into the Python value pyopencl packs as that dtype."""
    if t.name == "i1":
        return np.int8, lambda v: 1 if v else 0
    if t.is_float and t.bits == 16:
        dtype = t.np

        def bits16(v: Any) -> int:
            with np.errstate(over="ignore"):
                return int(np.array(v, dtype).view(np.uint16)[()])
        return np.uint16, bits16
    if t.is_float:
        rounding = t.np.type

        def rounded(v: Any) -> float:             # once, to the type (out of range: inf)
            with np.errstate(over="ignore"):
                return float(rounding(v))
        return t.np, rounded
    mask, half = (1 << t.bits) - 1, 1 << (t.bits - 1)
    if t.is_unsigned:
        return t.np, lambda v: int(v) & mask
    return t.np, lambda v: ((int(v) + half) & mask) - half


class LoadedKernel:
    """A built kernel ready to launch on one device: its argument packers, work-group size,
    and, for kernels with run-time checks (``device_assert``, checked mode), the error
    record read after each launch."""

    def __init__(self, record: DeviceRecord, program: Any, kernel_name: str,
                 signature: Sequence[tuple[str, Any]], work_items: int, checks: list,
                 written: Sequence[int] = (), spans: Sequence[int] = (),
                 check_facts: Sequence[Any] = ()) -> None:
        import pyopencl as cl
        self.record = record
        self.kernel = cl.Kernel(program, kernel_name)
        self.work_items = work_items
        self.checks = [tuple(c) for c in checks]
        self.check_facts = list(check_facts)
        self.spans = list(spans)            # checked mode: each one's buffer size follows
        self.names = [name for name, _ in signature]
        dtypes: list[Any] = []
        self.packers = []
        for _, t in signature:
            if isinstance(t, PointerType):
                dtypes += [None, np.int64]
                self.packers.append(None)
            else:
                dtype, pack = _scalar_packer(t)
                dtypes.append(dtype)
                self.packers.append(pack)
        dtypes += [np.int64] * len(self.spans) + [np.int32] * 5 + ([None] if checks else [])
        self.lock = threading.Lock()
        self.written = [i for i in written if i < len(self.packers)]
        self.error_record = None
        if self.checks:
            self.error_record = cl.Buffer(record.context, cl.mem_flags.READ_WRITE,
                                          size=4 * ERROR_RECORD_INTS)
            self._clear_error_record(record.queue)
        self.kernel.set_scalar_arg_dtypes(dtypes)     # typed calls: the fast way to set args
        device = record.cl_device
        info = cl.kernel_work_group_info
        self.driver_facts = {
            "work_group_size": int(self.kernel.get_work_group_info(info.WORK_GROUP_SIZE, device)),
            "local_mem_bytes": int(self.kernel.get_work_group_info(info.LOCAL_MEM_SIZE, device)),
            "private_mem_bytes": int(self.kernel.get_work_group_info(info.PRIVATE_MEM_SIZE, device)),
        }
        if self.driver_facts["work_group_size"] < work_items:
            raise BackendError(f"{record.info.name} runs this kernel with at most "
                               f"{self.driver_facts['work_group_size']} work-items, and it was "
                               f"compiled for {work_items}: use a smaller num_warps")

    def programs_per_group(self, grid_x: int) -> int:
        """Programs one work-group runs in turn along grid axis 0: on a CPU, enough work-
        groups to balance the cores and few enough that starting them costs little."""
        if self.record.arch.kind != "cpu":
            return 1
        return max(1, grid_x // (self.record.compute_units * 16))

    def _streams(self, args: Sequence[KernelArg]) -> bool:
        """Whether stores should skip the cache: a CPU launch writing a buffer larger than it."""
        if self.record.arch.kind != "cpu":
            return False
        cache = self.record.cache_bytes
        return any(args[i].value.buffer.nbytes > cache for i in self.written)

    def launch(self, grid: tuple[int, int, int], args: Sequence[KernelArg]) -> None:
        waits.ensure_usable()
        values: list[Any] = []
        for arg, pack in zip(args, self.packers):
            if pack is None:
                buffer = arg.value.buffer
                if buffer.freed or buffer.handle is None:
                    raise LaunchError("a kernel argument is a freed OpenCL buffer")
                values.append(buffer.handle)
                values.append(arg.value.offset)
            else:
                values.append(pack(arg.value))
        values += [int(args[i].value.buffer.nbytes) for i in self.spans]
        per_group = self.programs_per_group(grid[0])
        values += [grid[0], grid[1], grid[2], per_group, int(self._streams(args))]
        if self.error_record is not None:
            values.append(self.error_record)
        groups = -(-grid[0] // per_group)
        queue = self.record.queue
        with self.lock:
            self.record.last_kernel = self.kernel(
                queue, (groups * self.work_items, grid[1], grid[2]), (self.work_items, 1, 1),
                *values)
        if self.error_record is not None:
            self._read_error_record(queue, args)

    def _clear_error_record(self, queue: Any) -> None:
        import pyopencl as cl
        waits.settle(self.record)
        cl.enqueue_copy(queue, self.error_record, np.zeros(ERROR_RECORD_INTS, np.int32),
                        is_blocking=True)

    def _read_error_record(self, queue: Any, args: Sequence[KernelArg]) -> None:
        import pyopencl as cl
        record = np.zeros(ERROR_RECORD_INTS, np.int32)
        waits.settle(self.record)
        cl.enqueue_copy(queue, record, self.error_record, is_blocking=True)
        if record[0]:
            self._clear_error_record(queue)
            index = int(record[0]) - 1
            if not 0 <= index < len(self.checks):
                raise LaunchError(f"the kernel reported an unknown error code {record[0]}")
            facts = self.check_facts[index] if index < len(self.check_facts) else None
            if facts is not None:
                raise bounds_error(self.checks[index], facts, record, args)
            raise device_assert_error(*self.checks[index])


def release(handle: Any) -> Optional[Any]:
    """Free an OpenCL buffer now (pyopencl would wait for the garbage collector); in a child
    forked after the parent used OpenCL, leave it (the driver cannot serve the child)."""
    if waits.forked_child():
        return None
    try:
        handle.release()
    except Exception:  # noqa: BLE001 -- already released
        pass
    return None
