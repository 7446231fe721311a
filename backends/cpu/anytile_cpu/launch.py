"""Running a JIT-compiled kernel: argument packing and spreading programs over cores.

The native entry ``run(args, gx, gy, gz, begin, end, error)`` (see ``lowering.kernel``) is
called through ctypes, which releases the GIL, so worker threads run programs truly in
parallel.  The grid's linear program ids are cut into one contiguous range per worker; the
calling thread waits (so Ctrl-C stops the launch after each worker's current program) and
runs a launch of one program itself.  Argument converters are prepared once per
loaded kernel, so a launch costs a few microseconds plus the programs' own time.
"""
from __future__ import annotations

import ctypes
import linecache
import math
import os
import struct
import threading
from typing import Any, Callable, Collection, Optional, Sequence

import ml_dtypes
import numpy as np

from anytile.backend import KernelArg, PointerArg
from anytile.errors import DeviceAssertError, LaunchError
from anytile.ir import PointerType, ScalarType

from .failures import CheckRecord, checked_failure, span_of

__all__ = ["EntryPoint", "ProgramPool", "make_arg_packer", "LoadedKernel", "cpu_count"]

EntryPoint = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                              ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_U64 = (1 << 64) - 1
WORKER_STACK_BYTES = 64 << 20      # tiles live on the stack; reserved, committed on use
CALLER_STACK_LIMIT = 2 << 20       # bigger frames never run on the caller's (8 MiB) stack
CANCELLED = -1                     # the error word's value that stops a launch (Ctrl-C)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def _slot_converter(t: Any, name: str = "", written: bool = False) -> Callable[[Any], int]:
    """Python value -> the 64-bit slot holding its storage bits.  A pointer parameter
    ``name`` must not be a freed buffer, nor a read-only one when the kernel may write
    through it (``written``): host memory would not stop the access."""
    if isinstance(t, PointerType):
        def pointer(v: Any) -> int:
            if v is None:
                return 0
            if isinstance(v, PointerArg):
                _check_usable(v.buffer, name, written)
                return v.address or 0
            return int(v)
        return pointer
    assert isinstance(t, ScalarType)
    if t.is_bool:
        return lambda v: 1 if v else 0
    if t.is_int:
        return lambda v: int(v) & _U64
    if t.name == "f64":
        return lambda v: struct.unpack("<Q", struct.pack("<d", float(v)))[0]
    if t.name == "bf16":
        return _bf16_bits
    dtype, bits = t.np, np.dtype(f"u{t.np.itemsize}")

    def narrow_float(v: Any) -> int:
        with np.errstate(over="ignore"):      # out-of-range values become inf, as in the IR
            return int(np.asarray(float(v), np.float64).astype(dtype).view(bits))
    return narrow_float


def _bf16_bits(v: Any) -> int:
    """The bf16 bits of ``v`` rounded once to nearest even: rounding to odd in f32 first
    keeps the second rounding exact (NumPy and ml_dtypes round f64 -> bf16 twice)."""
    x = float(v)
    with np.errstate(over="ignore"):
        r = np.float32(x)
    if math.isfinite(r) and float(r) != x and not int(r.view(np.uint32)) & 1:
        r = np.nextafter(r, np.float32(math.inf if x > float(r) else -math.inf))
    return int(np.asarray(r).astype(ml_dtypes.bfloat16).view(np.uint16))


_WRITEABLE = np.zeros(1).flags     # what a handle without NumPy flags counts as


def _check_usable(buffer: Any, name: str, written: bool) -> None:
    if buffer.freed:
        raise LaunchError(f"argument '{name}' is a buffer that has been freed")
    if written and not getattr(buffer.handle, "flags", _WRITEABLE).writeable:
        raise LaunchError(f"argument '{name}' is a read-only array, but the kernel may store "
                          f"through it; pass a writeable array (e.g. a copy)")


def make_arg_packer(arg_types: Sequence[Any], names: Sequence[str] = (),
                    written: Collection[int] = (),
                    spans: bool = False) -> Callable[[Sequence[KernelArg]], Any]:
    """The packer of launch arguments into 64-bit slots; ``names`` are the parameters'
    names, ``written`` the indices of the pointer parameters the kernel may write through;
    ``spans`` (checked mode): then two slots per pointer parameter, its memory's address
    and size (``failures.span_of``)."""
    names = list(names) or [f"#{i}" for i in range(len(arg_types))]
    converters = [_slot_converter(t, names[i], i in written) for i, t in enumerate(arg_types)]
    n = len(converters)
    pointers = [i for i, t in enumerate(arg_types) if isinstance(t, PointerType)] if spans else []
    array_type = ctypes.c_uint64 * max(n + 2 * len(pointers), 1)

    def pack(args: Sequence[KernelArg]) -> Any:
        if len(args) != n:
            raise LaunchError(f"kernel expects {n} runtime arguments, got {len(args)}")
        slots = array_type()
        for i, (conv, a) in enumerate(zip(converters, args)):
            slots[i] = conv(a.value)
        for j, i in enumerate(pointers):
            slots[n + 2 * j], slots[n + 2 * j + 1] = span_of(args[i].value)
        return slots
    return pack


class ProgramPool:
    """``workers`` threads (large stacks) that each run one range of programs per launch."""

    def __init__(self, workers: int) -> None:
        self._jobs: list[Any] = []
        self._cv = threading.Condition()
        self._generation = 0
        self._pending = 0
        self._errors: list[BaseException] = []
        self._threads = []
        previous = threading.stack_size()
        try:
            threading.stack_size(WORKER_STACK_BYTES)
            for i in range(workers):
                t = threading.Thread(target=self._work, args=(i,), daemon=True,
                                     name=f"anytile-cpu-{i}")
                t.start()
                self._threads.append(t)
        finally:
            threading.stack_size(previous)
        self._launch_lock = threading.Lock()

    @property
    def size(self) -> int:
        return len(self._threads)

    def _work(self, index: int) -> None:
        seen = 0
        while True:
            with self._cv:
                while self._generation == seen:
                    self._cv.wait()
                seen = self._generation
                job = self._jobs[index] if index < len(self._jobs) else None
            if job is None:
                continue
            try:
                job()
            except BaseException as e:  # noqa: BLE001 -- reported by run()
                self._errors.append(e)
            with self._cv:
                self._pending -= 1
                if self._pending == 0:
                    self._cv.notify_all()

    def run(self, jobs: list[Callable[[], None]], cancel: Callable[[], None]) -> None:
        """Run ``jobs`` on the workers and wait for them.  The caller only waits, so Ctrl-C
        is honoured: ``cancel()`` then tells the jobs to stop after their current program,
        and ``KeyboardInterrupt`` is raised once they have."""
        with self._launch_lock:
            with self._cv:
                self._jobs = jobs
                self._pending = len(jobs)
                self._errors = []
                self._generation += 1
                self._cv.notify_all()
            try:
                with self._cv:
                    while self._pending:
                        self._cv.wait()
            except KeyboardInterrupt:
                cancel()
                with self._cv:
                    while self._pending:
                        self._cv.wait()
                raise
            if self._errors:
                raise self._errors[0]


_POOL: Optional[ProgramPool] = None
_POOL_LOCK = threading.Lock()


def _pool() -> ProgramPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ProgramPool(max(1, cpu_count()))
        return _POOL


class LoadedKernel:
    """A kernel ready to run: the JIT library (kept alive), its entry and packer."""

    def __init__(self, name: str, library: Any, entry: Any, arg_types: Sequence[Any],
                 asserts: Sequence[tuple], stack_bytes: int = 0, arg_names: Sequence[str] = (),
                 written: Collection[int] = (), checked: bool = False) -> None:
        self.name = name
        self.library = library
        self.entry = entry
        self.arg_names = list(arg_names) or [f"#{i}" for i in range(len(arg_types))]
        self.pack = make_arg_packer(arg_types, arg_names, frozenset(written), checked)
        self.asserts = list(asserts)
        self.on_caller_stack = stack_bytes < CALLER_STACK_LIMIT
        if stack_bytes > WORKER_STACK_BYTES // 2:
            raise LaunchError(f"kernel '{name}' needs {stack_bytes >> 20} MiB of tiles per "
                              "program; the cpu backend allows 32 MiB: use smaller blocks")

    def launch(self, grid: tuple[int, int, int], args: Sequence[KernelArg]) -> None:
        gx, gy, gz = (int(g) for g in grid)
        total = gx * gy * gz
        if total <= 0:
            if min(gx, gy, gz) < 0:
                raise LaunchError(f"grid {grid} has a negative size")
            return
        if max(gx, gy, gz) >= 2 ** 31:
            raise LaunchError(f"grid {grid} is too large: each axis must be below 2**31")
        slots = self.pack(args)
        error = CheckRecord()
        err_ptr = ctypes.addressof(error)
        addr = ctypes.addressof(slots)
        if total == 1 and self.on_caller_stack:     # one program: no hand-off to a worker
            self.entry(addr, gx, gy, gz, 0, total, err_ptr)
        else:
            pool = _pool()
            parts = min(total, pool.size)
            bounds = [total * i // parts for i in range(parts + 1)]
            jobs = [(lambda lo=lo, hi=hi: self.entry(addr, gx, gy, gz, lo, hi, err_ptr))
                    for lo, hi in zip(bounds, bounds[1:])]
            pool.run(jobs, cancel=lambda: setattr(error, "word", CANCELLED))
        if error.word:
            raise self._check_failure(error, args)

    def _check_failure(self, record: CheckRecord, args: Sequence[KernelArg]) -> LaunchError:
        """The error for the failed runtime check the record names (see
        ``lowering.control.RuntimeCheck``; entries cached before it had ``is_assert`` are
        asserts, before it had ``access`` no checked-mode check)."""
        message, loc, *kind = self.asserts[record.word - 1]
        line = (linecache.getline(loc.file, loc.line) if loc is not None else None) or None
        if len(kind) > 1 and kind[1] is not None:
            return checked_failure(kind[1], loc, line, record, args, self.arg_names)
        if kind and not kind[0]:
            return LaunchError(message, loc, line)
        return DeviceAssertError(f"device assertion failed: {message}" if message
                                 else "device assertion failed", loc, line)
