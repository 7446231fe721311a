"""Ctrl-C heard while a long program runs on the main thread.

Python runs its SIGINT handler in the main thread only, between bytecodes: while the main
thread is inside a native call (a launch of one program runs on it; in a pool launch it
claims programs too) Ctrl-C waits until that program ends.  So the main thread's launches
use one error record of their own, ``MAIN``, and on 64-bit Linux (where the native pool
runs) a small native SIGINT handler is put in front of Python's: it writes
``CANCELLED`` into that record's error word (unless a check failed first), then calls
Python's handler as before.  Programs read the word between programs and at each loop
iteration (``lowering.kernel``, ``lowering.control``), so the launch stops at once and the
launcher raises ``KeyboardInterrupt`` as it returns.  A cancelled launch leaves its outputs
partly written: the programs that ended wrote everything, a program that was stopped wrote
what its stores before the stop wrote, the others nothing.

The handler is put in place (when a kernel is loaded) only while Python's SIGINT handler is
``signal.default_int_handler``, in front of the handler the OS calls then: Python's, or a
library's put there before ours (LLVM's, which PoCL brings, puts back the one it replaced
and raises the signal again).  A handler put in front of ours later may put ours back and
raise again, so ours never calls it: ours then stays out until Python's is back.
``signal.signal`` replaces ours at the OS level; then (or where it is not in place)
Ctrl-C is heard between programs, and in a pool launch at once, the workers' programs
stopping at their next loop iteration.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from typing import Optional

from llvmlite import ir

from . import llvm_host
from .failures import CheckRecord
from .native_pool import native_pool_support

__all__ = ["CANCELLED", "MAIN", "MainRecord", "install", "interrupted"]

CANCELLED = -1                     # the error word's value that stops a launch (Ctrl-C)
_SA_SIGINFO, _SA_ONSTACK = 4, 0x08000000      # Linux (x86-64, AArch64)
_SIG_DFL, _SIG_IGN = 0, 1


class MainRecord:
    """The main thread's error record: ``take()`` gives it to a launch (its word reset), or
    ``None`` on another thread or while a launch holds it (a launch from a signal handler
    running in between); the launch sets ``busy`` back to False when it is done with it."""

    def __init__(self) -> None:
        self.record = CheckRecord()
        self.address = ctypes.addressof(self.record)
        self.word = ctypes.c_int32.from_address(self.address)     # the record's first field
        self.busy = False
        self.ident = threading.main_thread().ident

    def take(self) -> Optional[CheckRecord]:
        if self.busy or threading.get_ident() != self.ident:
            return None
        self.busy = True
        self.record.word = 0
        return self.record

    def after_fork_in_child(self) -> None:
        self.busy = False
        self.ident = threading.get_ident()     # the forking thread is the child's main thread


MAIN = MainRecord()
os.register_at_fork(after_in_child=MAIN.after_fork_in_child)


def interrupted() -> KeyboardInterrupt:
    """For a launch whose error word says ``CANCELLED``: Python's handler raises Ctrl-C's
    ``KeyboardInterrupt`` on entering this function; failing that, the one returned."""
    return KeyboardInterrupt()


# -- the native handler ----------------------------------------------------------------------
class _HookState(ctypes.Structure):
    """What the native handler reads: the handler it calls after its own work (and whether
    that one takes three arguments) and the address of the error word it cancels."""

    _fields_ = [("previous", ctypes.c_void_p), ("previous_siginfo", ctypes.c_int32),
                ("_pad", ctypes.c_int32), ("word", ctypes.c_void_p)]


class _SigAction(ctypes.Structure):
    """Linux's ``struct sigaction`` (glibc and musl, x86-64 and AArch64)."""

    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


class _DlInfo(ctypes.Structure):
    """``Dl_info``, what ``dladdr`` says of an address."""

    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]


def _object_base(libc: ctypes.CDLL, address: Optional[int]) -> Optional[int]:
    """The load address of the executable or shared library holding ``address``."""
    info = _DlInfo()
    if not address or not libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)):
        return None
    return info.fbase


def _is_pythons(libc: ctypes.CDLL, handler: Optional[int]) -> bool:
    """Whether ``handler`` lies in Python itself (its signal module's C handler)."""
    python = ctypes.cast(ctypes.pythonapi.PyErr_CheckSignals, ctypes.c_void_p).value
    base = _object_base(libc, handler)
    return base is not None and base == _object_base(libc, python)


def _compile_handler(state: int) -> llvm_host.JitLibrary:
    """``on_sigint(sig, info, context)``, reading the ``_HookState`` at ``state``."""
    i32, i64, ptr = ir.IntType(32), ir.IntType(64), ir.PointerType()
    host = llvm_host.host_info()
    m = ir.Module(name="anytile_cpu_sigint")
    m.triple = host.triple
    m.data_layout = str(llvm_host.host_target_machine().target_data)
    one_arg = ir.FunctionType(ir.VoidType(), [i32])
    three_args = ir.FunctionType(ir.VoidType(), [i32, ptr, ptr])
    fn = ir.Function(m, three_args, "on_sigint")
    sig, info, context = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    base = b.inttoptr(ir.Constant(i64, state), ptr)

    def field(name: str) -> ir.Value:
        offset = getattr(_HookState, name).offset
        return b.gep(base, [ir.Constant(i64, offset)], source_etype=ir.IntType(8))
    word = b.load(field("word"), typ=ptr, align=8)
    # a failed check's number stays: only a word still 0 becomes CANCELLED
    b.cmpxchg(word, ir.Constant(i32, 0), ir.Constant(i32, CANCELLED), "monotonic", "monotonic")
    # loaded as a pointer to its function type, so that llvmlite knows the callee's type
    siginfo = b.load(field("previous_siginfo"), typ=i32, align=4)
    with b.if_else(b.icmp_unsigned("!=", siginfo, ir.Constant(i32, 0))) as (three, one):
        with three:
            previous = b.load(field("previous"), typ=ir.PointerType(three_args), align=8)
            b.call(previous, [sig, info, context])
        with one:
            previous = b.load(field("previous"), typ=ir.PointerType(one_arg), align=8)
            b.call(previous, [sig])
    b.ret_void()
    ref = llvm_host.optimize(str(m))
    return llvm_host.JitLibrary(llvm_host.emit_asm_and_object(ref)[1])


_lock = threading.Lock()
_state: Optional[_HookState] = None
_handler = 0                       # the native handler's address, once compiled
_library: Optional[llvm_host.JitLibrary] = None    # kept alive with the handler


def _supported() -> bool:
    return sys.platform.startswith("linux") and native_pool_support() is None


def install() -> bool:
    """Put the native handler in front of Python's SIGINT handler (module docstring);
    whether it is in place."""
    global _state, _handler, _library
    if not _supported() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    with _lock:
        libc = ctypes.CDLL(None, use_errno=True)
        current = _SigAction()
        if libc.sigaction(signal.SIGINT, None, ctypes.byref(current)):
            return False
        if _handler and current.handler == _handler:
            return True
        if current.handler in (None, _SIG_DFL, _SIG_IGN) or (
                _handler and not _is_pythons(libc, current.handler)):
            return False
        if _state is None:
            _state = _HookState()
            _state.word = MAIN.address
            _library = _compile_handler(ctypes.addressof(_state))
            _handler = _library.address_of("on_sigint")
        # the state first: a Ctrl-C arriving meanwhile finds Python's handler to call
        _state.previous = current.handler
        _state.previous_siginfo = current.flags & _SA_SIGINFO
        ours = _SigAction()
        ctypes.memmove(ctypes.byref(ours), ctypes.byref(current), ctypes.sizeof(_SigAction))
        ours.handler = _handler
        ours.flags = _SA_SIGINFO | _SA_ONSTACK      # no SA_RESTART, as Python's (PEP 475)
        return libc.sigaction(signal.SIGINT, ctypes.byref(ours), None) == 0
