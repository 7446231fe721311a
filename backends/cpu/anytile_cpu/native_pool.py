"""The native program pool: worker threads that wait and are woken without Python.

A launch handed to ``launch.ProgramPool`` costs tens of microseconds of hand-off: Python
threads woken through a ``threading.Condition``, each taking the GIL to hear of the job and
again to report back.  ``NativePool``'s workers are plain native threads (``pthread_create``,
large stacks, asynchronous signals blocked, named ``anytile-cpu-N``) running a small
dispatcher JIT-compiled here with llvmlite, so a launch never wakes a Python thread:

* the launching thread publishes the launch (the kernel's ``run`` entry, its packed arguments,
  the grid, the error word) in a ``PoolState``, opens it, bumps ``generation`` and wakes
  sleeping workers (``futex`` on ``generation``; no system call when none sleeps);
* a worker waits for ``generation`` to change: a bounded spin (``SPIN_SECONDS``, ``pause``
  between reads) and then a futex sleep with no timeout, so an idle pool burns no core; it
  then *joins* the launch (a compare-and-swap on ``users`` that fails once the launch is
  closed: a worker that wakes late finds nothing to do and is not waited for), claims
  ``grain`` programs at a time from the shared counter ``next`` and runs them, and leaves;
* whoever finds the counter exhausted or the error word set (a failed check, or
  ``CANCELLED`` on Ctrl-C) closes the launch;
* the launching thread claims programs too (``caller_grain`` at a time, returning to Python
  at least every ``CALLER_SLICE_SECONDS`` so Ctrl-C is heard), then waits until the launch
  is closed and its workers have left: a bounded spin, then a futex sleep on ``users``, woken
  by the last worker out, with a timeout (``WAIT_SECONDS``) after which Python checks for
  signals and it sleeps again.  The workers block Ctrl-C, and Python's handler does not
  restart system calls, so a Ctrl-C that reaches the sleeping caller ends its sleep at once.

The GIL is released for every native call (ctypes ``CFUNCTYPE``).  Launches from several
Python threads are serialised by a lock.  The futex and ``pthread_*`` calls are Linux's:
``native_pool_support`` says why not elsewhere, and ``launch`` then keeps ``ProgramPool``.
The dispatcher calls ``syscall`` and ``clock_gettime`` through function pointers taken from
the C library with ctypes, so the JIT needs no symbol resolution.
"""
from __future__ import annotations

import ctypes
import platform
import signal
import sys
import threading
import time
from typing import Any, Callable, Optional

from llvmlite import ir

from . import llvm_host

__all__ = ["NativePool", "native_pool_support", "PoolState"]

#: the futex system call's number on the 64-bit Linux targets the dispatcher supports
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
_CLOCK_MONOTONIC = 1
_CLOSED = 1 << 30                  # ``users``: the launch takes no more workers
_NEVER = (1 << 63) - 1             # a claim loop's deadline: none
_PTHREAD_CREATE_DETACHED = 1
#: signals a fault raises in the thread that faults: left unblocked in the workers, so a
#: crash in a kernel still reaches the default action or faulthandler
_SYNCHRONOUS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGTRAP,
                getattr(signal, "SIGSYS", signal.SIGSEGV)}

SPIN_SECONDS = 10e-6               # a worker or the caller spins this long before sleeping
CALLER_SLICE_SECONDS = 10e-3       # the caller's claims return to Python at least this often
WAIT_SECONDS = 50e-3               # the caller's futex sleeps return to Python this often


def native_pool_support() -> Optional[str]:
    """``None`` where ``NativePool`` can run, else why not."""
    if not sys.platform.startswith("linux"):
        return f"futexes are Linux's (this is {sys.platform})"
    if platform.machine() not in _SYS_FUTEX:
        return f"no futex system call number known for {platform.machine()}"
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return "the dispatcher assumes 64-bit pointers and time_t"
    return None


class PoolState(ctypes.Structure):
    """What the launching thread and the workers share (the dispatcher reads the fields at
    these offsets).  ``next`` sits on a cache line of its own: every claim writes it."""

    _fields_ = [
        ("generation", ctypes.c_uint32),      # futex: bumped when a launch is published
        ("sleepers", ctypes.c_int32),         # workers asleep on ``generation``
        ("users", ctypes.c_uint32),           # futex: _CLOSED | workers inside the launch
        ("caller_waiting", ctypes.c_int32),   # the caller sleeps on ``users``
        ("run", ctypes.c_void_p),             # the kernel's ``run`` entry
        ("args", ctypes.c_void_p),
        ("error", ctypes.c_void_p),
        ("end", ctypes.c_int64),              # programs in the launch
        ("grain", ctypes.c_int64),            # programs a worker claims at a time
        ("gx", ctypes.c_int32), ("gy", ctypes.c_int32), ("gz", ctypes.c_int32),
        ("_pad", ctypes.c_int32),
        ("spin_ns", ctypes.c_int64),
        ("syscall", ctypes.c_void_p),         # the C library's, for the futex
        ("clock_gettime", ctypes.c_void_p),
        ("_line", ctypes.c_char * 64),
        ("next", ctypes.c_int64),             # the next program to claim
        ("_tail", ctypes.c_char * 56),
    ]


# -- the dispatcher's LLVM IR -------------------------------------------------------------------
_I1, _I32, _I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
_PTR = ir.PointerType()
# the types of what is called through pointers, loaded as ``ir.PointerType(type)`` so that
# llvmlite knows the callee's type (it spells that pointer ``type*``, which LLVM reads as ``ptr``)
_RUN = ir.FunctionType(ir.VoidType(), [_PTR, _I32, _I32, _I32, _I64, _I64, _PTR])
_SYSCALL = ir.FunctionType(_I64, [_I64], var_arg=True)
_CLOCK = ir.FunctionType(_I32, [_I32, _PTR])


def _c(value: int, t: ir.IntType = _I64) -> ir.Constant:
    return ir.Constant(t, value)


class _Dispatcher:
    """Builds the dispatcher module: ``worker_main``, ``pool_launch``, ``pool_continue`` and
    ``nothing`` (an empty ``run`` entry, for timing the hand-off)."""

    def __init__(self, machine: str, triple: str, data_layout: str) -> None:
        self.m = ir.Module(name="anytile_cpu_pool")
        self.m.triple, self.m.data_layout = triple, data_layout
        self.sys_futex = _SYS_FUTEX[machine]
        self.machine = machine
        self.now = self._now()
        self.futex = self._futex()
        self.pause = self._pause()
        self.wait_generation = self._wait_generation()
        self.join, self.leave = self._join(), self._leave()
        self.claim = self._claim()
        self.pool_continue = self._pool_continue()
        self._worker_main()
        self._pool_launch()
        nothing = ir.Function(self.m, _RUN, "nothing")
        ir.IRBuilder(nothing.append_basic_block("entry")).ret_void()

    # helpers
    def _function(self, name: str, ret: ir.Type, args: list, internal: bool = True
                  ) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(self.m, ir.FunctionType(ret, args), name)
        if internal:
            fn.linkage = "internal"
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    @staticmethod
    def field(b: ir.IRBuilder, state: ir.Value, name: str) -> ir.Value:
        offset = getattr(PoolState, name).offset
        return b.gep(state, [_c(offset)], source_etype=ir.IntType(8))

    def load(self, b: ir.IRBuilder, state: ir.Value, name: str, t: ir.Type,
             ordering: Optional[str] = None) -> ir.Value:
        align = 4 if t == _I32 else 8
        slot = self.field(b, state, name)
        if ordering is None:
            return b.load(slot, typ=t, align=align)
        return b.load_atomic(slot, ordering, align, typ=t)

    # building blocks
    def _now(self) -> ir.Function:
        """``i64 now(state)``: CLOCK_MONOTONIC in nanoseconds."""
        fn, b = self._function("now", _I64, [_PTR])
        ts = b.alloca(_I64, size=2)        # a struct timespec
        clock = self.load(b, fn.args[0], "clock_gettime", ir.PointerType(_CLOCK))
        b.call(clock, [_c(_CLOCK_MONOTONIC, _I32), ts])
        sec = b.load(ts, typ=_I64)
        nsec = b.load(b.gep(ts, [_c(1)]), typ=_I64)
        b.ret(b.add(b.mul(sec, _c(1_000_000_000)), nsec))
        return fn

    def _futex(self) -> ir.Function:
        """``futex(state, word, op, value, timeout)``: the system call; its result is not
        needed (every caller reads the word again)."""
        fn, b = self._function("futex", ir.VoidType(), [_PTR, _PTR, _I64, _I64, _PTR])
        state, word, op, value, timeout = fn.args
        syscall = self.load(b, state, "syscall", ir.PointerType(_SYSCALL))
        b.call(syscall, [_c(self.sys_futex), word, op, value, timeout, ir.Constant(_PTR, None),
                         _c(0)])
        b.ret_void()
        return fn

    def _pause(self) -> ir.Function:
        """``pause()``: the spin-wait hint (x86 ``pause``, AArch64 ``yield``)."""
        fn, b = self._function("pause", ir.VoidType(), [])
        if self.machine == "x86_64":
            b.call(ir.Function(self.m, ir.FunctionType(ir.VoidType(), []),
                               "llvm.x86.sse2.pause"), [])
        else:
            b.call(ir.Function(self.m, ir.FunctionType(ir.VoidType(), [_I32]),
                               "llvm.aarch64.hint"), [_c(1, _I32)])
        b.ret_void()
        return fn

    def _spin_until(self, b: ir.IRBuilder, state: ir.Value, ready: Callable[[ir.IRBuilder],
                    ir.Value], fn: ir.Function) -> tuple[ir.Block, ir.Block]:
        """Spin (``pause`` between reads) until ``ready(b)`` or ``spin_ns`` have passed;
        returns the blocks reached (ready, spin over), ``b`` in neither."""
        start = b.call(self.now, [state])
        limit = self.load(b, state, "spin_ns", _I64)
        spin, ready_block = fn.append_basic_block("spin"), fn.append_basic_block("ready")
        pausing, over = fn.append_basic_block("pausing"), fn.append_basic_block("spun")
        b.branch(spin)
        b.position_at_end(spin)
        b.cbranch(ready(b), ready_block, pausing)
        b.position_at_end(pausing)
        for _ in range(4):
            b.call(self.pause, [])
        elapsed = b.sub(b.call(self.now, [state]), start)
        b.cbranch(b.icmp_signed("<", elapsed, limit), spin, over)
        return ready_block, over

    def _wait_generation(self) -> ir.Function:
        """``i32 wait_generation(state, seen)``: ``generation`` once it is not ``seen``."""
        fn, b = self._function("wait_generation", _I32, [_PTR, _I32])
        state, seen = fn.args
        gen = self.field(b, state, "generation")
        changed, over = self._spin_until(
            b, state, lambda b: b.icmp_unsigned("!=", b.load_atomic(gen, "acquire", 4, typ=_I32),
                                                seen), fn)
        b.position_at_end(changed)
        b.ret(b.load_atomic(gen, "acquire", 4, typ=_I32))
        b.position_at_end(over)
        sleep = fn.append_basic_block("sleep")
        b.branch(sleep)
        b.position_at_end(sleep)
        sleepers = self.field(b, state, "sleepers")
        b.atomic_rmw("add", sleepers, _c(1, _I32), "seq_cst")
        b.call(self.futex, [state, gen, _c(_FUTEX_WAIT_PRIVATE), b.zext(seen, _I64),
                            ir.Constant(_PTR, None)])
        b.atomic_rmw("sub", sleepers, _c(1, _I32), "seq_cst")
        now = b.load_atomic(gen, "acquire", 4, typ=_I32)
        woken = fn.append_basic_block("woken")
        b.cbranch(b.icmp_unsigned("!=", now, seen), woken, sleep)
        b.position_at_end(woken)
        b.ret(now)
        return fn

    def _join(self) -> ir.Function:
        """``i1 join(state)``: count this worker into the open launch; false once closed."""
        fn, b = self._function("join", _I1, [_PTR])
        users = self.field(b, fn.args[0], "users")
        first = b.load_atomic(users, "monotonic", 4, typ=_I32)
        entry = b.block
        loop, attempt = fn.append_basic_block("loop"), fn.append_basic_block("attempt")
        closed, joined = fn.append_basic_block("closed"), fn.append_basic_block("joined")
        b.branch(loop)
        b.position_at_end(loop)
        seen = b.phi(_I32)
        seen.add_incoming(first, entry)
        is_closed = b.icmp_unsigned("!=", b.and_(seen, _c(_CLOSED, _I32)), _c(0, _I32))
        b.cbranch(is_closed, closed, attempt)
        b.position_at_end(attempt)
        pair = b.cmpxchg(users, seen, b.add(seen, _c(1, _I32)), "seq_cst", "monotonic")
        seen.add_incoming(b.extract_value(pair, 0), attempt)
        b.cbranch(b.extract_value(pair, 1), joined, loop)
        b.position_at_end(closed)
        b.ret(_c(0, _I1))
        b.position_at_end(joined)
        b.ret(_c(1, _I1))
        return fn

    def _leave(self) -> ir.Function:
        """``leave(state)``: the last worker out of a closed launch wakes a sleeping caller."""
        fn, b = self._function("leave", ir.VoidType(), [_PTR])
        state = fn.args[0]
        users = self.field(b, state, "users")
        old = b.atomic_rmw("sub", users, _c(1, _I32), "seq_cst")
        with b.if_then(b.icmp_unsigned("==", old, _c(_CLOSED + 1, _I32))):
            waiting = self.load(b, state, "caller_waiting", _I32, "seq_cst")
            with b.if_then(b.icmp_signed("!=", waiting, _c(0, _I32))):
                b.call(self.futex, [state, users, _c(_FUTEX_WAKE_PRIVATE), _c(1),
                                    ir.Constant(_PTR, None)])
        b.ret_void()
        return fn

    def _claim(self) -> ir.Function:
        """``i1 claim(state, grain, deadline)``: run programs ``grain`` at a time from the
        shared counter; true once none are left (or the error word is set: the launch is
        then closed, no more workers join it), false when ``deadline`` (``now`` nanoseconds;
        ``_NEVER``: none) passed first."""
        fn, b = self._function("claim", _I1, [_PTR, _I64, _I64])
        state, grain, deadline = fn.args
        run = self.load(b, state, "run", ir.PointerType(_RUN))
        args, error = self.load(b, state, "args", _PTR), self.load(b, state, "error", _PTR)
        end = self.load(b, state, "end", _I64)
        gx, gy, gz = (self.load(b, state, g, _I32) for g in ("gx", "gy", "gz"))
        counter = self.field(b, state, "next")
        loop, claimed = fn.append_basic_block("loop"), fn.append_basic_block("claimed")
        timed, done = fn.append_basic_block("timed"), fn.append_basic_block("done")
        late = fn.append_basic_block("late")
        b.branch(loop)
        b.position_at_end(loop)
        stopped = b.icmp_signed("!=", b.load_atomic(error, "monotonic", 4, typ=_I32), _c(0, _I32))
        first = b.atomic_rmw("add", counter, grain, "monotonic")
        b.cbranch(b.or_(stopped, b.icmp_signed(">=", first, end)), done, claimed)
        b.position_at_end(claimed)
        last = b.add(first, grain)
        last = b.select(b.icmp_signed("<", last, end), last, end)
        b.call(run, [args, gx, gy, gz, first, last, error])
        b.cbranch(b.icmp_signed("==", deadline, _c(_NEVER)), loop, timed)
        b.position_at_end(timed)
        b.cbranch(b.icmp_signed("<", b.call(self.now, [state]), deadline), loop, late)
        b.position_at_end(done)
        b.atomic_rmw("or", self.field(b, state, "users"), _c(_CLOSED, _I32), "seq_cst")
        b.ret(_c(1, _I1))
        b.position_at_end(late)
        b.ret(_c(0, _I1))
        return fn

    def _worker_main(self) -> None:
        """``ptr worker_main(state)``, a thread's start routine: join the open launch if
        there is one, claim, leave, wait for the next, forever.  (A thread that starts late
        tries to join first: a launch published before it ran is still to be helped.)"""
        fn, b = self._function("worker_main", _PTR, [_PTR], internal=False)
        state = fn.args[0]
        gen = self.field(b, state, "generation")
        attempt, work = fn.append_basic_block("attempt"), fn.append_basic_block("work")
        idle = fn.append_basic_block("idle")
        b.branch(attempt)
        b.position_at_end(attempt)
        before = b.load_atomic(gen, "acquire", 4, typ=_I32)
        b.cbranch(b.call(self.join, [state]), work, idle)
        b.position_at_end(work)
        current = b.load_atomic(gen, "acquire", 4, typ=_I32)    # the launch joined
        b.call(self.claim, [state, self.load(b, state, "grain", _I64), _c(_NEVER)])
        b.call(self.leave, [state])
        b.branch(idle)
        b.position_at_end(idle)
        # the launch of ``seen`` is closed, or was done here: wait for a newer one
        seen = b.phi(_I32)
        seen.add_incoming(before, attempt)
        seen.add_incoming(current, work)
        b.call(self.wait_generation, [state, seen])
        b.branch(attempt)

    def _pool_continue(self) -> ir.Function:
        """``i32 pool_continue(state, caller_grain, slice_ns, wait_ns)``: the caller claims
        programs (``caller_grain`` at a time; 0: none) for up to ``slice_ns``, then waits up
        to about ``wait_ns`` for the launch to be closed (its programs all claimed) and left
        by the workers in it.  0: the launch is over; 1: programs are left (call again); 2:
        workers are still running (call again)."""
        fn, b = self._function("pool_continue", _I32, [_PTR, _I64, _I64, _I64], internal=False)
        state, grain, slice_ns, wait_ns = fn.args
        users = self.field(b, state, "users")
        wait = fn.append_basic_block("wait")
        with b.if_then(b.icmp_signed(">", grain, _c(0))):
            deadline = b.add(b.call(self.now, [state]), slice_ns)
            more = fn.append_basic_block("more")
            after = fn.append_basic_block("claimed")
            b.cbranch(b.call(self.claim, [state, grain, deadline]), after, more)
            b.position_at_end(more)
            b.ret(_c(1, _I32))
            b.position_at_end(after)
        b.branch(wait)
        b.position_at_end(wait)

        def over(b: ir.IRBuilder, ordering: str = "acquire") -> ir.Value:
            return b.icmp_unsigned("==", b.load_atomic(users, ordering, 4, typ=_I32),
                                   _c(_CLOSED, _I32))
        done, spun = self._spin_until(b, state, over, fn)
        b.position_at_end(done)
        b.ret(_c(0, _I32))
        b.position_at_end(spun)                 # sleep once (the last worker out wakes it)
        flag = self.field(b, state, "caller_waiting")
        b.atomic_rmw("xchg", flag, _c(1, _I32), "seq_cst")
        seen = b.load_atomic(users, "seq_cst", 4, typ=_I32)
        sleep, woken = fn.append_basic_block("sleep"), fn.append_basic_block("woken")
        b.cbranch(b.icmp_unsigned("==", seen, _c(_CLOSED, _I32)), woken, sleep)
        b.position_at_end(sleep)
        ts = b.alloca(_I64, size=2)        # a struct timespec
        b.store(b.sdiv(wait_ns, _c(1_000_000_000)), ts)
        b.store(b.srem(wait_ns, _c(1_000_000_000)), b.gep(ts, [_c(1)]))
        b.call(self.futex, [state, users, _c(_FUTEX_WAIT_PRIVATE), b.zext(seen, _I64), ts])
        b.branch(woken)
        b.position_at_end(woken)
        b.atomic_rmw("xchg", flag, _c(0, _I32), "seq_cst")
        b.ret(b.select(over(b), _c(0, _I32), _c(2, _I32)))
        return fn

    def _pool_launch(self) -> None:
        """``i32 pool_launch(state, run, args, gx, gy, gz, end, error, grain, wake,
        caller_grain, slice_ns, wait_ns)``: publish a launch, wake up to ``wake`` sleeping
        workers, then ``pool_continue``."""
        fn, b = self._function("pool_launch", _I32,
                               [_PTR, _PTR, _PTR, _I32, _I32, _I32, _I64, _PTR, _I64, _I64,
                                _I64, _I64, _I64], internal=False)
        state, run, args, gx, gy, gz, end, error, grain, wake, caller_grain, slice_ns, wait_ns \
            = fn.args
        for name, value in (("run", run), ("args", args), ("error", error), ("end", end),
                            ("grain", grain), ("gx", gx), ("gy", gy), ("gz", gz)):
            b.store(value, self.field(b, state, name), align=4 if value.type == _I32 else 8)
        # (atomic stores: llvmlite's store_atomic wants typed pointers)
        b.atomic_rmw("xchg", self.field(b, state, "next"), _c(0), "monotonic")
        b.atomic_rmw("xchg", self.field(b, state, "users"), _c(0, _I32), "seq_cst")   # open
        gen = self.field(b, state, "generation")
        b.atomic_rmw("add", gen, _c(1, _I32), "seq_cst")
        sleepers = self.load(b, state, "sleepers", _I32, "seq_cst")
        wanted = b.and_(b.icmp_signed(">", sleepers, _c(0, _I32)), b.icmp_signed(">", wake, _c(0)))
        with b.if_then(wanted):
            b.call(self.futex, [state, gen, _c(_FUTEX_WAKE_PRIVATE), wake,
                                ir.Constant(_PTR, None)])
        b.ret(b.call(self.pool_continue, [state, caller_grain, slice_ns, wait_ns]))


def _compile_dispatcher() -> llvm_host.JitLibrary:
    host = llvm_host.host_info()
    tm = llvm_host.host_target_machine()
    module = _Dispatcher(platform.machine(), host.triple, str(tm.target_data)).m
    ref = llvm_host.optimize(str(module))
    return llvm_host.JitLibrary(llvm_host.emit_asm_and_object(ref)[1])


_LaunchFn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                             ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_int64, ctypes.c_int64)
_ContinueFn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                               ctypes.c_int64)


class NativePool:
    """``workers`` native threads with ``stack_bytes`` stacks, plus the launching thread.
    ``size`` is the workers; ``handoff`` the seconds an empty launch of ``size + 1``
    programs takes.  The threads, the dispatcher's code and the state are never freed: the
    threads live as long as the process."""

    def __init__(self, workers: int, stack_bytes: int) -> None:
        why = native_pool_support()
        if why is not None:
            raise OSError(f"no native pool here: {why}")
        self.size = workers
        library = _compile_dispatcher()
        libc = ctypes.CDLL(None, use_errno=True)
        memory = ctypes.create_string_buffer(ctypes.sizeof(PoolState) + 64)
        address = -(-ctypes.addressof(memory) // 64) * 64          # cache-line aligned
        state = PoolState.from_address(address)
        state.users = _CLOSED
        state.spin_ns = int(SPIN_SECONDS * 1e9)
        state.syscall = ctypes.cast(libc.syscall, ctypes.c_void_p).value
        state.clock_gettime = ctypes.cast(libc.clock_gettime, ctypes.c_void_p).value
        # what the workers run must outlive them: kept here and in _FOREVER, never freed
        _FOREVER.append((library, memory))
        self._state = address
        self._launch = _LaunchFn(library.address_of("pool_launch"))
        self._continue = _ContinueFn(library.address_of("pool_continue"))
        self._nothing = library.address_of("nothing")
        self._lock = threading.Lock()
        self._start_workers(libc, library.address_of("worker_main"), stack_bytes)
        self.handoff = min(self._time_empty_launch() for _ in range(5))

    def _start_workers(self, libc: Any, start: int, stack_bytes: int) -> None:
        attr = ctypes.create_string_buffer(256)          # a pthread_attr_t (56-64 bytes)
        thread = ctypes.c_ulong()
        if libc.pthread_attr_init(attr):
            raise OSError("pthread_attr_init failed")
        blocked = signal.valid_signals() - _SYNCHRONOUS
        # the workers inherit this mask: asynchronous signals (Ctrl-C) go to Python's threads
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            if libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(stack_bytes)) or \
                    libc.pthread_attr_setdetachstate(attr, _PTHREAD_CREATE_DETACHED):
                raise OSError("pthread_attr_setstacksize/setdetachstate failed")
            for i in range(self.size):
                err = libc.pthread_create(ctypes.byref(thread), attr, ctypes.c_void_p(start),
                                          ctypes.c_void_p(self._state))
                if err:
                    raise OSError(err, f"pthread_create failed (error {err})")
                libc.pthread_setname_np(thread, f"anytile-cpu-{i}".encode())
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            libc.pthread_attr_destroy(attr)

    def _time_empty_launch(self) -> float:
        error = ctypes.c_int32(0)
        start = time.perf_counter()
        self.run(self._nothing, None, self.size + 1, 1, 1, self.size + 1,
                 ctypes.addressof(error), 1, 1, lambda: None)
        return time.perf_counter() - start

    def run(self, entry: int, args: Any, gx: int, gy: int, gz: int, total: int, error: int,
            grain: int, caller_grain: int, cancel: Callable[[], None]) -> None:
        """Run the ``total`` programs of the kernel entry ``entry`` (an address; ``args`` its
        packed arguments, an address or ``bytes``; ``error`` the error word's address) on the
        workers, ``grain`` programs a claim, and on this thread ``caller_grain`` a claim (0:
        this thread only waits).  Ctrl-C (any exception raised while this thread is between
        native calls) calls ``cancel()``, waits for the workers to stop after their current
        program, and is raised."""
        wake = min(self.size, total - (1 if caller_grain else 0))
        slice_ns, wait_ns = int(CALLER_SLICE_SECONDS * 1e9), int(WAIT_SECONDS * 1e9)
        with self._lock:
            try:
                status = self._launch(self._state, entry, args, gx, gy, gz, total, error, grain,
                                      wake, caller_grain, slice_ns, wait_ns)
                while status:
                    status = self._continue(self._state, caller_grain if status == 1 else 0,
                                            slice_ns, wait_ns)
            except BaseException:
                cancel()
                self._finish(caller_grain, slice_ns, wait_ns)
                raise

    def _finish(self, caller_grain: int, slice_ns: int, wait_ns: int) -> None:
        """End the launch whatever is raised meanwhile (the workers read the arguments until
        it ends): this thread's claims see the error word that ``cancel`` set and close it,
        then it waits for the workers in it to stop."""
        while True:
            try:
                if not self._continue(self._state, caller_grain, slice_ns, wait_ns):
                    return
            except BaseException:     # noqa: BLE001 -- a second Ctrl-C: keep waiting
                continue


_FOREVER: list = []
