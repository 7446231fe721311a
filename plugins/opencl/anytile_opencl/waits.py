"""Waiting for the OpenCL driver, as a Python program needs it: never in a forked child the
driver cannot serve.

* ``ensure_usable()``: a process forked after its parent used OpenCL inherits the driver's
  state but not its threads (PoCL's workers), so any use hangs: every entry point asks
  first, and such a child gets a ``BackendError`` saying to use the 'spawn' start method.
"""
from __future__ import annotations

import os

from anytile.errors import BackendError

__all__ = ["ensure_usable", "note_initialised", "forked_child"]

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
    global _forked_child
    _forked_child = _initialised


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
