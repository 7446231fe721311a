"""Atomic read-modify-write and compare-and-swap on the interpreter's memory.

Programs of a launch run one after another, so atomics between them are trivially atomic.
Launches of different kernels may run at the same time from several threads and touch the
same memory: every atomic op holds ``ATOMICS_LOCK``, one lock for the whole process, from
its read to its write.  Within one op, lanes that hit the same address are applied one by
one in row-major lane order, each seeing the previous lane's result (as if the hardware
serialised them in that order); lanes that hit distinct addresses are applied together.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

import numpy as np

from ..ir.types import ScalarType
from .arith import UnsupportedOp, binary_fn
from .memory import (AccessSite, Group, VirtualMemory, check_writeable, lane_indices,
                     memory_dtype)

Combine = Callable[[Any, Any], Any]

#: held by each atomic op from its read to its write (a NumPy read, then a write)
ATOMICS_LOCK = threading.Lock()


def _fresh_lock_in_child() -> None:
    global ATOMICS_LOCK
    # a thread of the parent may have held it at the fork; that thread is gone in the child
    ATOMICS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)


def rmw_combine(kind: str, elem: ScalarType) -> Combine:
    """``new = combine(old, value)`` for ``AtomicRMWOp`` kind ``kind`` on ``elem``."""
    if elem.is_bool:
        raise UnsupportedOp("atomics on i1 are not defined")
    if kind == "xchg":
        return lambda old, value: value
    if kind in ("and", "or", "xor") and elem.is_float:
        raise UnsupportedOp(f"atomic '{kind}' is not defined on {elem}")
    if kind not in ("add", "max", "min", "and", "or", "xor"):
        raise UnsupportedOp(f"unknown atomic kind '{kind}'")
    return binary_fn(kind, elem)


def _occurrence_rank(elems: np.ndarray) -> np.ndarray:
    """For each lane, how many earlier lanes (in lane order) hit the same element."""
    order = np.argsort(elems, kind="stable")
    ordered = elems[order]
    starts = np.ones(ordered.size, bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    positions = np.arange(ordered.size)
    group_start = np.maximum.accumulate(np.where(starts, positions, 0))
    rank = np.empty(ordered.size, np.int64)
    rank[order] = positions - group_start
    return rank


def _serialised(groups: list[Group], dtype: np.dtype, apply: Callable[..., None]) -> None:
    """Call ``apply(view, elems, lanes)`` in rounds whose lanes hit distinct elements."""
    check_writeable(groups, "atomic")
    planned = []
    for lanes, alloc, elems in groups:
        rank = _occurrence_rank(elems)
        rounds = int(rank.max()) + 1 if rank.size else 0
        planned.append((lane_indices(lanes, elems.size), alloc.typed(dtype), elems, rank, rounds))
    with ATOMICS_LOCK:
        for lanes, view, elems, rank, rounds in planned:
            if rounds == 1:
                apply(view, elems, lanes)
                continue
            for r in range(rounds):
                sel = rank == r
                apply(view, elems[sel], lanes[sel])


def atomic_rmw(memory: VirtualMemory, combine: Combine, elem: ScalarType, ptrs: Any,
               values: Any, mask: Any, site: AccessSite) -> Any:
    """Apply ``combine`` at each active lane's address; the old contents (0 where masked)."""
    dtype = memory_dtype(elem)
    shape = np.shape(ptrs)
    flat_values = np.broadcast_to(values, shape).reshape(-1)
    old = np.zeros(flat_values.size, dtype)

    def apply(view: np.ndarray, elems: np.ndarray, lanes: np.ndarray) -> None:
        current = view[elems]
        old[lanes] = current
        view[elems] = combine(current, flat_values[lanes])

    _serialised(memory.resolve(ptrs, mask, dtype.itemsize, site), dtype, apply)
    out = old.reshape(shape)
    return out[()] if out.ndim == 0 else out


def atomic_cas(memory: VirtualMemory, elem: ScalarType, ptrs: Any, cmp: Any,
               values: Any, site: AccessSite) -> Any:
    """Compare-and-swap per lane; floats compare by bit pattern (as hardware does)."""
    dtype = memory_dtype(elem)
    bits = np.dtype(f"u{dtype.itemsize}")
    shape = np.shape(ptrs)
    flat_values = np.broadcast_to(values, shape).reshape(-1)
    flat_cmp = np.ascontiguousarray(np.broadcast_to(cmp, shape).reshape(-1)).view(bits)
    old = np.zeros(flat_values.size, dtype)

    def apply(view: np.ndarray, elems: np.ndarray, lanes: np.ndarray) -> None:
        current = view[elems]
        old[lanes] = current
        hit = current.view(bits) == flat_cmp[lanes]
        view[elems[hit]] = flat_values[lanes[hit]]

    _serialised(memory.resolve(ptrs, None, dtype.itemsize, site), dtype, apply)
    out = old.reshape(shape)
    return out[()] if out.ndim == 0 else out
