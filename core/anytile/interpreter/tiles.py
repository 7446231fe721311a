"""Whole-tile algorithms: reductions and scans with a combine function, and ``dot``.

``combine(lhs, rhs)`` takes two lists of arrays (one per reduced tile) and returns a list;
it is the op's combine region, run on whole slices at once when the region is elementwise
(the executor decides), so a reduction of ``n`` elements costs ``log2(n)`` region runs.
Both algorithms only ever combine neighbouring runs of elements, left operand first, so
they honour the IR's rule that non-commutative combines see elements in index order.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..ir.types import ScalarType
from .arith import round_f64_to

Combine = Callable[[list, list], list]


def _fit(values: Sequence[Any], like: np.ndarray) -> list:
    """Region results may be scalars (a yielded constant); give them the slice's shape."""
    return [v if np.shape(v) == like.shape else np.broadcast_to(v, like.shape)
            for v in values]


def tree_reduce(srcs: Sequence[np.ndarray], axis: int, combine: Combine) -> list:
    """Reduce ``srcs`` along ``axis`` by combining adjacent pairs until one is left."""
    vals = [np.moveaxis(np.asarray(s), axis, -1) for s in srcs]
    n = vals[0].shape[-1]
    while n > 1:
        half = n // 2
        lhs = [v[..., 0:2 * half:2] for v in vals]
        rhs = [v[..., 1:2 * half:2] for v in vals]
        out = _fit(combine(lhs, rhs), lhs[0])
        if n % 2:                            # the odd last element waits for the next round
            out = [np.concatenate([o, v[..., -1:]], axis=-1) for o, v in zip(out, vals)]
        vals, n = out, (n + 1) // 2
    return [_scalar_or_array(v[..., 0]) for v in vals]


def tree_scan(srcs: Sequence[np.ndarray], axis: int, reverse: bool,
              combine: Combine) -> list:
    """Inclusive scan along ``axis`` (Hillis-Steele doubling).  ``reverse`` scans from the
    last element: flip, scan, flip back, so the left operand holds the later elements."""
    vals = [np.moveaxis(np.asarray(s), axis, -1) for s in srcs]
    if reverse:
        vals = [v[..., ::-1] for v in vals]
    n = vals[0].shape[-1]
    step = 1
    while step < n:
        lhs = [v[..., :n - step] for v in vals]
        rhs = [v[..., step:] for v in vals]
        out = _fit(combine(lhs, rhs), rhs[0])
        vals = [np.concatenate([v[..., :step], o], axis=-1) for v, o in zip(vals, out)]
        step *= 2
    if reverse:
        vals = [v[..., ::-1] for v in vals]
    return [np.ascontiguousarray(np.moveaxis(v, -1, axis)) for v in vals]


def sequential_reduce(srcs: Sequence[np.ndarray], axis: int, combine: Combine) -> list:
    """Element-by-element reduction, for combine regions that cannot run on slices."""
    moved = [np.moveaxis(np.asarray(s), axis, -1) for s in srcs]
    outer, n = moved[0].shape[:-1], moved[0].shape[-1]
    outs = [np.empty(outer, m.dtype) for m in moved]
    for idx in np.ndindex(*outer):
        acc = [m[idx + (0,)] for m in moved]
        for k in range(1, n):
            acc = combine(acc, [m[idx + (k,)] for m in moved])
        for o, a in zip(outs, acc):
            o[idx] = a
    return [_scalar_or_array(o) for o in outs]


def sequential_scan(srcs: Sequence[np.ndarray], axis: int, reverse: bool,
                    combine: Combine) -> list:
    """Element-by-element inclusive scan, for combine regions that cannot run on slices."""
    moved = [np.moveaxis(np.asarray(s), axis, -1) for s in srcs]
    outer, n = moved[0].shape[:-1], moved[0].shape[-1]
    outs = [np.empty_like(m) for m in moved]
    order = range(n - 1, -1, -1) if reverse else range(n)
    for idx in np.ndindex(*outer):
        acc: list = []
        for k in order:
            here = [m[idx + (k,)] for m in moved]
            acc = here if not acc else combine(acc, here)
            for o, a in zip(outs, acc):
                o[idx + (k,)] = a
    return [np.ascontiguousarray(np.moveaxis(o, -1, axis)) for o in outs]


def _scalar_or_array(v: Any) -> Any:
    v = np.asarray(v)
    return v[()] if v.ndim == 0 else np.ascontiguousarray(v)


def dot(a: np.ndarray, b: np.ndarray, acc: np.ndarray, acc_elem: ScalarType) -> np.ndarray:
    """``acc + a @ b``: floats summed in f64 and rounded once to the accumulator type;
    integers summed exactly in 64 bits and wrapped to the accumulator type."""
    if acc_elem.is_float:
        total = np.matmul(a.astype(np.float64), b.astype(np.float64)) + acc.astype(np.float64)
        return np.asarray(round_f64_to(total, acc_elem))
    wide = np.uint64 if acc_elem.is_unsigned else np.int64
    total = np.matmul(a.astype(wide), b.astype(wide)) + acc.astype(wide)   # wraps mod 2^64
    return total.astype(acc_elem.np)
