"""Waiting for the OpenCL driver, as a Python program needs it: interruptibly, and never in
a forked child the driver cannot serve.

* ``settle(record)``: before anything that blocks on the device's queue (copies, finishing
  it), wait for the last kernel launched there with ``wait_for``: the calling thread waits on
  a Python event set by one waiter thread (which makes the driver's blocking call), so
  Ctrl-C raises ``KeyboardInterrupt`` at once.  What is left in the queue then (copies) is
  short, and is waited for directly.  OpenCL cannot stop a kernel that is running: after an
  interrupt it runs to its end in the background, and whatever is queued after it on the
  device's in-order queue waits for it.
* ``ensure_usable()``: a process forked after its parent used OpenCL inherits the driver's
  state but not its threads (PoCL's workers), so any use hangs: every entry point asks
  first, and such a child gets a ``BackendError`` saying to use the 'spawn' start method.
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Any, Optional

from anytile.errors import BackendError, LaunchError

__all__ = ["wait_for", "settle", "ensure_usable", "note_initialised", "forked_child"]

#: how long one slice of a wait lasts: the thread that waits wakes this often at most
#: (Ctrl-C does not wait for a slice to end)
_SLICE_S = 0.25

_initialised = False          # this process has called into the driver
_forked_child = False         # forked after the parent had


def note_initialised() -> None:
    """The driver has been called (platforms listed): a fork from now on leaves a child
    that must not use it."""
    global _initialised
    _initialised = True


def forked_child() -> bool:
    """Whether this process was forked after its parent used OpenCL."""
    return _forked_child


def ensure_usable() -> None:
    """Raise a clear ``BackendError`` in a child forked after its parent used OpenCL."""
    if _forked_child:
        raise BackendError(
            "this process was forked after its parent used OpenCL: the OpenCL driver's state "
            "(its threads, contexts and queues) does not survive fork(), and any use of it in "
            "the child would hang. Start worker processes with the 'spawn' method instead "
            "(multiprocessing.get_context('spawn'), or set_start_method('spawn') before "
            "creating them; concurrent.futures.ProcessPoolExecutor(mp_context=...)), or fork "
            "before the parent first uses an OpenCL device")


def _after_fork_in_child() -> None:
    global _forked_child, _waiter
    _forked_child = _initialised
    _waiter = None                      # its thread stayed in the parent


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Waiter:
    """One daemon thread making the driver's blocking waits for the others."""

    def __init__(self) -> None:
        self.jobs: "queue.SimpleQueue[tuple[Any, threading.Event]]" = queue.SimpleQueue()
        threading.Thread(target=self._run, name="anytile-opencl-waiter", daemon=True).start()

    def _run(self) -> None:
        while True:
            event, done = self.jobs.get()
            try:
                event.wait()
            except Exception:  # noqa: BLE001 -- the waiting thread asks the event again
                pass
            done.set()


_waiter: Optional[_Waiter] = None
_waiter_lock = threading.Lock()


def wait_for(event: Any) -> None:
    """Wait until the command of the pyopencl ``event`` has finished (see the module
    docstring); a command that failed raises ``LaunchError``."""
    global _waiter
    import pyopencl as cl
    if event.command_execution_status != cl.command_execution_status.COMPLETE:
        with _waiter_lock:
            if _waiter is None:
                _waiter = _Waiter()
            waiter = _waiter
        done = threading.Event()
        waiter.jobs.put((event, done))
        while not done.wait(_SLICE_S):
            pass
    try:
        event.wait()                      # finished: returns at once, or raises its error
    except cl.Error as exc:
        raise LaunchError(f"the OpenCL device reported an error running a command: "
                          f"{exc}") from None


def settle(record: Any) -> None:
    """Wait (interruptibly) for the last kernel launched on ``record``'s queue, if it has
    not finished: what follows it there may then be waited for directly."""
    ensure_usable()
    event = record.last_kernel
    if event is None:
        return
    wait_for(event)
    if record.last_kernel is event:
        record.last_kernel = None
