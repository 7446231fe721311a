"""What the host says when a launch cannot run or a checked-mode test fails.

* ``bounds_error``: a failed bounds test (``codegen/checks.py`` wrote the error record)
  becomes ``OutOfBoundsError`` naming the access, the program, where the address lies in
  the argument's buffer and the lane, at the kernel's line.
* ``check_private_memory``: a CPU driver runs each work-group on one of its threads and
  keeps the work-item's tiles on that thread's stack; a kernel whose tiles do not fit would
  crash the process, so its launch is refused with the size of the largest tile and the
  room there is.
"""
from __future__ import annotations

import ctypes
import linecache
import resource
from typing import Any, Optional, Sequence

import numpy as np

from anytile.backend import KernelArg
from anytile.errors import LaunchError, OutOfBoundsError, describe_lane, describe_place
from anytile.ir import Loc

from .codegen.checks import ERROR_RECORD_INTS

__all__ = ["ERROR_RECORD_INTS", "bounds_error", "check_private_memory", "thread_stack_bytes"]


def bounds_error(check: Sequence[Any], facts: dict, record: np.ndarray,
                 args: Sequence[KernelArg]) -> OutOfBoundsError:
    """The error of failed bounds test ``check`` (``[message, file, line]``)."""
    _, file, line = check
    pid = f"({int(record[1])}, {int(record[2])}, {int(record[3])})"
    offset = int(record[6:8].view(np.int64)[0])
    param = int(facts["param"])
    nbytes = args[param].value.buffer.nbytes if param < len(args) else 0
    place = describe_place(offset, 0, nbytes, int(facts["elem"]))
    shape = tuple(facts["shape"])
    detail = f"argument '{facts['name']}'"
    if shape:
        lane = tuple(int(i) for i in np.unravel_index(int(record[4]), shape))
        detail += f"; {describe_lane(lane, shape)}"
    message = (f"out-of-bounds {facts['access']} in program {pid}: byte offset {offset} is "
               f"{place} ({detail}) (checked mode: the access was not made)")
    loc = Loc(file, int(line), int(facts.get("col", 0)), str(facts.get("func", "")))
    return OutOfBoundsError(message, loc, linecache.getline(file, int(line)) or None)


def thread_stack_bytes() -> int:
    """The stack a new thread of this process gets (the driver's worker threads): glibc's
    default thread attributes, else the stack limit (``ulimit -s``), else 8 MiB."""
    try:
        libc = ctypes.CDLL(None)
        attr = ctypes.create_string_buffer(256)          # larger than any pthread_attr_t
        size = ctypes.c_size_t()
        if libc.pthread_getattr_default_np(attr) == 0 and \
                libc.pthread_attr_getstacksize(attr, ctypes.byref(size)) == 0 and size.value:
            libc.pthread_attr_destroy(attr)
            return int(size.value)
    except (OSError, AttributeError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    return int(soft) if soft not in (resource.RLIM_INFINITY, -1) and soft > 0 else 8 << 20


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB"


def check_private_memory(record: Any, work_items: int, private_bytes: int,
                         largest: Optional[list]) -> None:
    """Refuse, with a clear ``LaunchError``, a kernel whose tiles would overflow the stack
    of a CPU driver's threads, which run a whole work-group each (``work_items`` times
    ``private_bytes``); an eighth of the stack is left to the driver and the code."""
    if record.arch.kind != "cpu" or not private_bytes:
        return
    stack = thread_stack_bytes()
    room = stack - stack // 8
    total = private_bytes * max(1, work_items)
    if total <= room:
        return
    nbytes, numel, dtype, file, line = largest or [private_bytes, 0, "?", None, None]
    loc = Loc(file, int(line), 0) if file else None
    source = linecache.getline(file, int(line)) if file else None
    raise LaunchError(
        f"this kernel keeps {_mib(total)} of tiles in each program's private memory (the "
        f"largest, a tile of {numel} {dtype} elements, takes {_mib(nbytes * max(1, work_items))}"
        f"), more than "
        f"the {_mib(room)} that {record.info.name} has room for: its driver runs each program "
        f"on a thread whose stack is {_mib(stack)} (the process's stack limit, ulimit -s). "
        f"Use smaller blocks and more programs, or raise the stack limit before starting "
        f"Python", loc, source or None)
