"""Running a JIT-compiled kernel: argument packing and spreading programs over cores.

The native entry ``run(args, gx, gy, gz, begin, end, error)`` (see ``lowering.kernel``) is
called through ctypes, which releases the GIL, so threads run programs truly in parallel.
A launch of one program, or of programs that took less than the pool's hand-off last time,
runs on the caller's thread alone.  More go to the pool: on 64-bit Linux ``NativePool``
(``native_pool``): native worker threads woken by a futex, which claim the grid's linear
program ids from a shared counter, a contiguous run at a time, with the calling thread
claiming too; elsewhere ``ProgramPool``, Python threads that run ``run_claiming`` while the
caller waits.  Ctrl-C stops a launch of the main thread at once, even inside a long program
(``interrupt``): ``KeyboardInterrupt``, with the outputs partly written.  Argument
converters are prepared once per loaded kernel.  ``LoadedKernel.raw_launcher`` is the fast
path's launcher (``Backend.launcher``): generated per kernel, it packs raw values with one
``struct`` call, so a launch of one small program costs about two microseconds.
"""
from __future__ import annotations

import ctypes
import linecache
import math
import os
import struct
import threading
import time
import weakref
from typing import Any, Callable, Collection, Optional, Sequence

import ml_dtypes
import numpy as np

from anytile.backend import KernelArg, PointerArg
from anytile.errors import DeviceAssertError, LaunchError
from anytile.ir import PointerType, ScalarType

from .failures import CheckRecord, checked_failure, span_of
from .interrupt import CANCELLED, MAIN, interrupted
from .interrupt import install as install_interrupt_handler
from .native_pool import NativePool, native_pool_support

__all__ = ["EntryPoint", "ClaimingEntryPoint", "ProgramPool", "NativePool", "make_arg_packer",
           "LoadedKernel", "cpu_count", "register_read_only", "launch_counts",
           "STREAM_LAUNCH_BYTES"]

EntryPoint = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                              ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
ClaimingEntryPoint = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                      ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_void_p, ctypes.c_int64)
CLAIMS_PER_WORKER = 8              # a launch's programs come in about this many claims a worker
CALLER_WORK_SECONDS = 50e-6        # a launch expected to take less runs on the caller alone...
CALLER_SLICES = 8                  # ...in this many calls (Ctrl-C is heard between them)
CALLER_CLAIM_SECONDS = 1e-3        # the caller's claims in the native pool: about this long


def _last_level_cache_bytes() -> int:
    """The largest CPU cache's size (Linux sysfs; 32 MiB where it cannot be read)."""
    sizes = []
    for index in range(8):
        try:
            with open(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size") as f:
                text = f.read().strip()
        except OSError:
            break
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            sizes.append(int(text.rstrip("KMG")) * scale)
        except ValueError:
            continue
    return max(sizes, default=32 << 20)


#: a launch streams its stores past the caches (``lowering.streaming``) from this many bytes:
#: a smaller output may well be read again from the cache
STREAM_LAUNCH_BYTES = 3 * _last_level_cache_bytes() // 4
_U64 = (1 << 64) - 1
WORKER_STACK_BYTES = 64 << 20      # tiles live on the stack; reserved, committed on use
CALLER_STACK_LIMIT = 2 << 20       # bigger frames never run on the caller's (8 MiB) stack


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

# id(buffer) -> (first address, end) of the read-only host memory imported in place: the raw
# launcher sees only addresses, and refuses a store into these (the general path reads the
# buffer's flags)
_READ_ONLY: dict[int, tuple[int, int]] = {}


def register_read_only(buffer: Any) -> None:
    """Remember ``buffer`` (read-only imported memory) until it is collected."""
    if buffer.address is None or not buffer.nbytes:
        return
    _READ_ONLY[id(buffer)] = (buffer.address, buffer.address + buffer.nbytes)
    weakref.finalize(buffer, _READ_ONLY.pop, id(buffer), None)


def _refuse_read_only(address: Any, name: str) -> None:
    """The raw launcher's read-only check of a pointer the kernel may store through."""
    if address and any(lo <= address < hi for lo, hi in list(_READ_ONLY.values())):
        raise LaunchError(f"argument '{name}' is a read-only array, but the kernel may store "
                          f"through it; pass a writeable array (e.g. a copy)")


def _check_usable(buffer: Any, name: str, written: bool) -> None:
    if buffer.freed:
        raise LaunchError(f"argument '{name}' is a buffer that has been freed")
    if written and not getattr(buffer.handle, "flags", _WRITEABLE).writeable:
        raise LaunchError(f"argument '{name}' is a read-only array, but the kernel may store "
                          f"through it; pass a writeable array (e.g. a copy)")


def make_arg_packer(arg_types: Sequence[Any], names: Sequence[str] = (),
                    written: Collection[int] = (), spans: bool = False,
                    extra: int = 0) -> Callable[[Sequence[KernelArg]], Any]:
    """The packer of launch arguments into 64-bit slots; ``names`` are the parameters'
    names, ``written`` the indices of the pointer parameters the kernel may write through;
    ``spans`` (checked mode): then two slots per pointer parameter, its memory's address
    and size (``failures.span_of``); ``extra`` slots more, left 0, follow."""
    names = list(names) or [f"#{i}" for i in range(len(arg_types))]
    converters = [_slot_converter(t, names[i], i in written) for i, t in enumerate(arg_types)]
    n = len(converters)
    pointers = [i for i, t in enumerate(arg_types) if isinstance(t, PointerType)] if spans else []
    array_type = ctypes.c_uint64 * max(n + 2 * len(pointers) + extra, 1)

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
    """``workers`` Python threads (large stacks) that each run one job per launch; ``handoff``
    is the seconds an empty launch on them takes (waking the threads and hearing back).  The
    pool where ``NativePool`` cannot run (not 64-bit Linux): its hand-off costs tens of
    microseconds, the threads waking through a ``threading.Condition``."""

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
        self.handoff = min(self._time_empty_launch() for _ in range(5))

    def _time_empty_launch(self) -> float:
        start = time.perf_counter()
        self.run([_nothing] * self.size, cancel=_nothing)
        return time.perf_counter() - start

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


def _nothing() -> None:
    pass


_POOL: Optional[ProgramPool | NativePool] = None
_POOL_LOCK = threading.Lock()
#: why the launches use ``ProgramPool`` rather than ``NativePool`` (None: they do not)
pool_fallback: Optional[str] = None


def _pool() -> ProgramPool | NativePool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = _new_pool()
        return _POOL


def _new_pool() -> ProgramPool | NativePool:
    """``NativePool`` (its workers and the caller: a thread per core) where it runs, else
    ``ProgramPool`` (a Python thread per core; the caller waits)."""
    global pool_fallback
    pool_fallback = native_pool_support()
    if pool_fallback is None:
        try:
            return NativePool(max(1, cpu_count() - 1), WORKER_STACK_BYTES)
        except Exception as e:  # noqa: BLE001 -- no threads, no JIT...: the Python pool
            pool_fallback = f"the native pool failed to start: {e!r}"
    return ProgramPool(max(1, cpu_count()))


def _forget_pool() -> None:
    """In a forked child: the parent's worker threads are not there; start anew."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


#: launches by the way they ran (``direct``: on the caller's thread; ``pool``: handed to the
#: workers) -- read by tests
launch_counts = {"direct": 0, "pool": 0}


class LoadedKernel:
    """A kernel ready to run: the JIT library (kept alive), its entry and packer."""

    def __init__(self, name: str, library: Any, entry: Any, arg_types: Sequence[Any],
                 asserts: Sequence[tuple], stack_bytes: int = 0, arg_names: Sequence[str] = (),
                 written: Collection[int] = (), checked: bool = False,
                 claiming_entry: Any = None, stream_bytes: int = 0) -> None:
        self.name = name
        self.library = library
        self.entry = entry
        install_interrupt_handler()            # Ctrl-C heard inside a long program
        self.entry_address = ctypes.cast(entry, ctypes.c_void_p).value
        self.claiming_entry = claiming_entry   # None: each worker runs one fixed range
        self.arg_types = list(arg_types)
        self.arg_names = list(arg_names) or [f"#{i}" for i in range(len(arg_types))]
        self.written = frozenset(written)
        self.checked = checked
        # a kernel with streaming stores has a slot after its arguments saying whether they
        # may be used: when this many programs write at least STREAM_LAUNCH_BYTES that way
        self.stream_programs = -(-STREAM_LAUNCH_BYTES // stream_bytes) if stream_bytes else 0
        self.pack = make_arg_packer(arg_types, arg_names, self.written, checked,
                                    1 if stream_bytes else 0)
        self.asserts = list(asserts)
        self.on_caller_stack = stack_bytes < CALLER_STACK_LIMIT
        # seconds one program took in the last multi-program launch (unknown: the pool)
        self.program_seconds = math.inf
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
        if self.stream_programs and total >= self.stream_programs:
            slots[len(self.arg_types)] = 1
        main = MAIN.take()           # the main thread's record: Ctrl-C cancels it at once
        error = main if main is not None else CheckRecord()
        try:
            self.run_programs(gx, gy, gz, total, ctypes.addressof(slots), error)
            failure = self._check_failure(error, args) if error.word else None
        finally:
            if main is not None:
                MAIN.busy = False
        if failure is not None:
            raise failure

    def run_programs(self, gx: int, gy: int, gz: int, total: int, slots: Any, error: Any) -> None:
        """Run the ``total`` programs of the grid with the packed arguments ``slots`` (an
        address or a ``bytes``); ``error`` (a ctypes word or ``CheckRecord``) receives the
        error word.  One program, or programs that took less than the pool's hand-off last
        time (``runs_on_caller``), run on the caller's thread; more on the pool."""
        err_ptr = ctypes.addressof(error)
        if total == 1 and self.on_caller_stack:     # one program: no hand-off to a worker
            launch_counts["direct"] += 1
            self.entry(slots, gx, gy, gz, 0, 1, err_ptr)
            return
        pool = _pool()
        start = time.perf_counter()
        if self.runs_on_caller(total, pool):
            launch_counts["direct"] += 1
            step = -(-total // CALLER_SLICES)
            for lo in range(0, total, step):
                self.entry(slots, gx, gy, gz, lo, min(lo + step, total), err_ptr)
            self.program_seconds = (time.perf_counter() - start) / total
            return
        launch_counts["pool"] += 1
        word = "value" if isinstance(error, ctypes.c_int32) else "word"

        def cancel() -> None:
            setattr(error, word, CANCELLED)
        if isinstance(pool, NativePool):
            helps = int(self.on_caller_stack)      # the caller claims programs too
            parts = min(total, pool.size + helps)
            grain = max(1, total // (parts * CLAIMS_PER_WORKER))
            pool.run(self.entry_address, slots, gx, gy, gz, total, err_ptr, grain,
                     self._caller_grain(grain) if helps else 0, cancel)
        else:
            parts = min(total, pool.size)
            claiming = self.claiming_entry
            if claiming is not None:
                counter = ctypes.c_int64(0)
                at, grain = ctypes.addressof(counter), max(1, total // (parts * CLAIMS_PER_WORKER))
                jobs = [lambda: claiming(slots, gx, gy, gz, at, total, err_ptr, grain)] * parts
            else:
                bounds = [total * i // parts for i in range(parts + 1)]
                entry = self.entry
                jobs = [(lambda lo=lo, hi=hi: entry(slots, gx, gy, gz, lo, hi, err_ptr))
                        for lo, hi in zip(bounds, bounds[1:])]
            pool.run(jobs, cancel=cancel)
        busy = time.perf_counter() - start - pool.handoff
        self.program_seconds = max(0.0, busy) * parts / total

    def _caller_grain(self, grain: int) -> int:
        """Programs the caller claims at a time in the native pool: the workers' ``grain``,
        or fewer where the last launch says they take more than ``CALLER_CLAIM_SECONDS``
        (one where unknown), so that the caller is back in Python soon to hear Ctrl-C."""
        if self.program_seconds * grain <= CALLER_CLAIM_SECONDS:
            return grain
        return max(1, int(CALLER_CLAIM_SECONDS / self.program_seconds))

    def runs_on_caller(self, total: int, pool: ProgramPool | NativePool) -> bool:
        """Whether ``total`` programs run on the caller's thread alone: their last launch
        says they take less than ``CALLER_WORK_SECONDS`` (and twice the pool's hand-off)
        there, so waking the workers would cost more than it saves.  A first launch goes to
        the pool; Ctrl-C is heard between the caller's ``CALLER_SLICES`` calls."""
        if not self.on_caller_stack:
            return False
        return total * self.program_seconds < min(CALLER_WORK_SECONDS, 2 * pool.handoff)

    def raw_launcher(self) -> Optional[Callable[..., None]]:
        """``run(gx, gy, gz, stream, owner, *values)`` for ``Backend.launcher``: one raw value
        per parameter (an ``int`` address or ``None`` for a pointer), packed by one
        ``struct`` call; ``None`` in checked mode (its spans need the buffers)."""
        if self.checked:
            return None
        codes, values, checks = ["<"], [], []
        for i, t in enumerate(self.arg_types):
            v = f"v{i}"
            if isinstance(t, PointerType):
                codes.append("Q")
                values.append(f"{v} or 0")
                if i in self.written:
                    checks.append(f"    if _read_only and {v}: _refuse({v}, {self.arg_names[i]!r})")
            elif t.is_bool:
                codes.append("Q")
                values.append(f"1 if {v} else 0")
            elif t.is_int:
                codes.append("Q")
                values.append(f"{v} & {_U64}")
            elif t.name == "f64":
                codes.append("d")
                values.append(v)
            elif t.name == "f32":
                codes.append("f4x")
                values.append(v)
            else:                   # f16, bf16, fp8: rounded by the general converter
                codes.append("Q")
                values.append(f"_conv{i}({v})")
        if self.stream_programs:
            codes.append("Q")
            values.append("total >= _stream_programs")
        names = [f"v{i}" for i in range(len(self.arg_types))]
        params = "".join(", " + n for n in names)
        # the main thread's launches use its record (``interrupt``): Ctrl-C cancels them
        src = "\n".join([
            f"def run(gx, gy, gz, stream, owner{params}):",
            *checks,
            "    total = gx * gy * gz",
            "    try:",
            f"        slots = _pack({', '.join(values)})" if values else "        slots = _pack()",
            "    except (TypeError, ValueError, OverflowError, struct.error):",
            f"        slots = _slow(({''.join(n + ', ' for n in names)}), total)",
            "    if _ident() == _main.ident and not _main.busy:",
            "        _main.busy = True",
            "        error = _main.word",
            "        error.value = 0",
            "        try:",
            "            if total == 1 and _direct:",
            "                _counts['direct'] += 1",
            "                _entry(slots, gx, gy, gz, 0, 1, _main.address)",
            "            else:",
            "                _many(gx, gy, gz, total, slots, error)",
            "            code = error.value",
            "        finally:",
            "            _main.busy = False",
            "    else:",
            "        error = _Word()",
            "        if total == 1 and _direct:",
            "            _counts['direct'] += 1",
            "            _entry(slots, gx, gy, gz, 0, 1, _addressof(error))",
            "        else:",
            "            _many(gx, gy, gz, total, slots, error)",
            "        code = error.value",
            "    if code:",
            f"        raise _failure(code, ({''.join(n + ', ' for n in names)}))",
            "",
        ])
        namespace: dict[str, Any] = {
            "_pack": struct.Struct("".join(codes)).pack, "_entry": self.entry,
            "_Word": ctypes.c_int32, "_addressof": ctypes.addressof,
            "_ident": threading.get_ident, "_main": MAIN,
            "_direct": self.on_caller_stack,
            "_many": self.run_programs, "_counts": launch_counts, "_read_only": _READ_ONLY,
            "_refuse": _refuse_read_only, "_slow": self._pack_raw, "_failure": self._raw_failure,
            "_stream_programs": self.stream_programs,
            "struct": struct,
            **{f"_conv{i}": _slot_converter(t) for i, t in enumerate(self.arg_types)
               if isinstance(t, ScalarType)}}
        exec(compile(src, f"<cpu launcher of {self.name}>", "exec"), namespace)
        return namespace["run"]

    def _pack_raw(self, values: tuple, total: int) -> Any:
        """The raw values packed by the general converters (their errors are the general
        path's), for what the ``struct`` packing refused (a float out of f32's range)."""
        slots = self.pack([KernelArg(t, v) for t, v in zip(self.arg_types, values)])
        if self.stream_programs and total >= self.stream_programs:
            slots[len(self.arg_types)] = 1
        return bytes(slots)

    def _raw_failure(self, code: int, values: tuple) -> BaseException:
        """The error for a raw launch whose error word is ``code`` (never in checked mode)."""
        record = CheckRecord()
        record.word = code
        args = [KernelArg(t, v) for t, v in zip(self.arg_types, values)]
        return self._check_failure(record, args)

    def _check_failure(self, record: CheckRecord, args: Sequence[KernelArg]) -> BaseException:
        """The error for the failed runtime check the record names (see
        ``lowering.control.RuntimeCheck``; entries cached before it had ``is_assert`` are
        asserts, before it had ``access`` no checked-mode check), or Ctrl-C's
        ``KeyboardInterrupt`` for a launch it cancelled."""
        if record.word == CANCELLED:
            return interrupted()
        message, loc, *kind = self.asserts[record.word - 1]
        line = (linecache.getline(loc.file, loc.line) if loc is not None else None) or None
        if len(kind) > 1 and kind[1] is not None:
            return checked_failure(kind[1], loc, line, record, args, self.arg_names)
        if kind and not kind[0]:
            return LaunchError(message, loc, line)
        return DeviceAssertError(f"device assertion failed: {message}" if message
                                 else "device assertion failed", loc, line)
