"""What a launch reports when a checked-mode check fails (``lowering.checked``).

The native entry's ``error`` argument points to a ``CheckRecord``: its first word is the
launch's error word (0, ``i + 1`` for failed runtime check ``i``, or the launcher's
``CANCELLED``); the first failing bounds or division check also writes the program ids, the
lane (row-major, in the op's tile) and the address there.  The launcher turns that into
``OutOfBoundsError`` (or ``LaunchError`` for a division by zero) with the interpreter's
wording: the op, the program, where the address lies in the argument's memory, the lane.
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence

import numpy as np

from anytile.backend import KernelArg, PointerArg
from anytile.errors import LaunchError, OutOfBoundsError, describe_lane, describe_place
from anytile.ir import PointerType

__all__ = ["CheckRecord", "UNCHECKED_SPAN", "span_of", "checked_failure"]

#: the span given to a pointer passed as a raw integer address: nothing to check it against
UNCHECKED_SPAN = (0, (1 << 64) - 1)


class CheckRecord(ctypes.Structure):
    """The launch's error word and the facts of the first failed checked-mode check."""

    _fields_ = [("word", ctypes.c_int32), ("_pad", ctypes.c_int32),
                ("pid", ctypes.c_int64 * 3), ("lane", ctypes.c_int64),
                ("address", ctypes.c_uint64)]


def span_of(value: Any) -> tuple[int, int]:
    """``(address, size)`` of the memory a pointer argument may touch: its buffer (a NumPy
    view's own elements, an ``at.Array``'s allocation); ``(0, 0)`` for ``None``."""
    if value is None:
        return 0, 0
    if isinstance(value, PointerArg):
        return value.buffer.address or 0, value.buffer.nbytes
    return UNCHECKED_SPAN


def checked_failure(access: Any, loc: Any, source_line: Optional[str], record: CheckRecord,
                    args: Sequence[KernelArg], names: Sequence[str]) -> LaunchError:
    """The error for a failed checked-mode check ``access`` (a ``CheckedAccess``)."""
    pid = "(" + ", ".join(str(int(p)) for p in record.pid) + ")"
    shape = tuple(access.shape)
    lane = tuple(int(i) for i in np.unravel_index(int(record.lane), shape)) if shape else None
    if access.kind == "division":
        where = f" ({describe_lane(lane, shape, 'tile')})" if lane is not None else ""
        return LaunchError(f"integer {access.name} by zero in program {pid}{where}", loc,
                           source_line)
    address = int(record.address)
    pointers = [i for i, a in enumerate(args) if isinstance(a.type, PointerType)]
    candidates = list(access.params) if access.params is not None else pointers
    facts = []
    if address == 0:
        place = "the null pointer"
    elif candidates:
        nearest = min(candidates, key=lambda k: _distance(address, span_of(args[k].value)))
        base, nbytes = span_of(args[nearest].value)
        place = describe_place(address, base, nbytes, access.elem_bytes)
        facts.append(("argument" if len(candidates) == 1 else "nearest argument")
                     + f" '{names[nearest]}'")
    else:
        place = "outside every argument's memory (the kernel has no pointer arguments)"
    if lane is not None:
        facts.append(describe_lane(lane, shape))
    detail = f"address {address:#x} is {place}" + (f" ({'; '.join(facts)})" if facts else "")
    return OutOfBoundsError(f"out-of-bounds {access.name} in program {pid}: {detail}", loc,
                            source_line)


def _distance(address: int, span: tuple[int, int]) -> int:
    base, nbytes = span
    return base - address if address < base else max(0, address - (base + max(nbytes, 1) - 1))
