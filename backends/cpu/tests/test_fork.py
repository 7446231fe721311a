"""A process forked while another thread compiles a cpu kernel: the fork waits until that
thread is out of LLVM, and the child compiles and launches kernels of its own."""
import os
import signal
import threading
import warnings

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile_cpu import llvm_host

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")

HANG_GUARD = 300     # seconds; only a guard against a hang, never reached when things work


class _WatchedLock:
    """``llvm_host``'s lock, with ``waited`` set when a thread finds it held by another."""

    def __init__(self) -> None:
        self.inner = threading.RLock()
        self.waited = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.inner.acquire(blocking=False):
            return True
        self.waited.set()
        return self.inner.acquire(blocking, timeout)

    def release(self) -> None:
        self.inner.release()

    def __enter__(self) -> "_WatchedLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _scale(x_ptr, out_ptr, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * factor)


def _shift(x_ptr, out_ptr, amount, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + amount)


def _wait_for_child(pid: int) -> int:
    """The child's exit code; kills it (and fails) if it hangs."""
    status: list = []
    waiter = threading.Thread(target=lambda: status.append(os.waitpid(pid, 0)[1]))
    waiter.start()
    waiter.join(timeout=HANG_GUARD)
    if waiter.is_alive():
        os.kill(pid, signal.SIGKILL)
        waiter.join()
        pytest.fail("the forked child hung (on a lock held by the compiling thread?)")
    return os.waitstatus_to_exitcode(status[0])


def test_fork_while_another_thread_compiles(monkeypatch):
    monkeypatch.setenv("ANYTILE_NO_CACHE", "1")           # compile for real, in both processes
    lock = _WatchedLock()
    monkeypatch.setattr(llvm_host, "_LLVM_LOCK", lock)
    inside = threading.Event()
    compiling: list[int] = []
    real_parse = llvm_host.parse

    def parse_then_pause(text: str):
        # the compiling thread stops inside LLVM (the lock held) until the fork wants the lock
        module = real_parse(text)
        if compiling and threading.get_ident() == compiling[0] and not inside.is_set():
            inside.set()
            lock.waited.wait(timeout=HANG_GUARD)
        return module
    monkeypatch.setattr(llvm_host, "parse", parse_then_pause)

    rng = np.random.default_rng(11)
    x = rng.standard_normal(256).astype(np.float32)
    out = np.full(256, np.nan, np.float32)
    errors: list[BaseException] = []

    def compile_and_launch() -> None:
        compiling.append(threading.get_ident())
        try:
            at.jit(_scale)[(4,)](x, out, 3.0, BLOCK=64, device="cpu")
        except BaseException as exc:   # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=compile_and_launch)
    thread.start()
    assert inside.wait(timeout=HANG_GUARD)                 # a hang guard only
    with warnings.catch_warnings():                        # 3.12+: "multi-threaded, fork()..."
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:                                           # the child: compile and launch anew
        code = 1
        try:
            shifted = np.full(256, np.nan, np.float32)
            at.jit(_shift)[(4,)](x, shifted, 0.5, BLOCK=64, device="cpu")
            code = 0 if np.array_equal(shifted, x + np.float32(0.5)) else 2
        finally:
            os._exit(code)
    lock.waited.set()             # without the fork's wait, the compiling thread goes on now
    code = _wait_for_child(pid)
    thread.join(timeout=HANG_GUARD)
    assert not thread.is_alive() and not errors
    assert code == 0
    np.testing.assert_array_equal(out, x * np.float32(3.0))
