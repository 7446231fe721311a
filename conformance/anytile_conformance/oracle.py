"""Comparing a kernel's output with the reference under a tolerance from the one table.

``compare`` returns ``None`` when the output conforms, else a ``Mismatch`` that says how many
elements are wrong, shows the first few (index, got, expected, error) and flags elements the
kernel never wrote (still poisoned)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .numerics import (FLOAT_DTYPES, FLOAT_FORMATS, is_poison, np_dtype, round_to_format,
                       ulp_error, ulp_of, wide_float)
from .tolerances import Accumulation, Exact, Relative, Tolerance, Ulps

MAX_SHOWN = 5


@dataclass(frozen=True)
class Mismatch:
    """Why an output does not conform."""

    label: str
    bad: int
    total: int
    unwritten: int
    tolerance: str
    examples: tuple[str, ...]

    def __str__(self) -> str:
        head = f"{self.label}: {self.bad} of {self.total} elements differ ({self.tolerance})"
        if self.unwritten:
            head += f"; {self.unwritten} never written (still poison)"
        return head + "".join(f"\n    {e}" for e in self.examples)


def _fmt(value) -> str:
    if isinstance(value, (float, np.floating)):
        return repr(float(value))      # shortest text that round-trips: 1-ulp differences show
    return str(value)


def compare(label: str, got: np.ndarray, expected: np.ndarray, dtype: str, tolerance: Tolerance,
            magnitude: Optional[np.ndarray] = None,
            poisoned: Optional[np.ndarray] = None) -> Optional[Mismatch]:
    """Compare ``got`` (the kernel's output, of ``dtype``) with ``expected`` (wide exact
    values for floats, exact values for integers).  ``magnitude`` is ``sum|terms|`` per
    element for ``Accumulation`` tolerances.  ``poisoned`` marks elements expected to stay
    unwritten (masked off); default: none."""
    got = np.asarray(got)
    expected = np.broadcast_to(np.asarray(expected), got.shape)
    if got.shape != expected.shape:
        return Mismatch(label, got.size, got.size, 0, "shape",
                        (f"shape {got.shape} != expected {expected.shape}",))
    holds_poison = is_poison(got, dtype)
    # an element equal to the poison is "unwritten" unless the reference is the poison too
    unwritten = holds_poison & ~_equals_poison(expected, dtype)
    if poisoned is None:
        poisoned = np.zeros(got.shape, dtype=bool)
    ok, errors = _within(got, expected, dtype, tolerance, magnitude)
    ok = np.where(poisoned, holds_poison, ok & ~unwritten)
    if ok.all():
        return None
    bad_index = np.argwhere(~ok)
    examples = []
    for idx in bad_index[:MAX_SHOWN]:
        idx = tuple(int(i) for i in idx)
        where = idx if len(idx) > 1 else idx[0]
        if poisoned[idx]:
            examples.append(f"[{where}] should stay unwritten (masked off) but holds {_fmt(got[idx])}")
            continue
        note = " (never written)" if unwritten[idx] else ""
        err = f", error {_fmt(errors[idx])}" if errors is not None else ""
        examples.append(f"[{where}] got {_fmt(got[idx])}{note}, expected {_fmt(expected[idx])}{err}")
    return Mismatch(label, int((~ok).sum()), int(got.size), int((unwritten & ~poisoned).sum()),
                    tolerance.describe(), tuple(examples))


def _equals_poison(expected: np.ndarray, dtype: str) -> np.ndarray:
    if expected.dtype == object:
        return np.zeros(expected.shape, dtype=bool)
    if dtype in FLOAT_DTYPES:
        with np.errstate(invalid="ignore", over="ignore"):
            return is_poison(np.asarray(expected).astype(np_dtype(dtype)), dtype)
    return is_poison(np.asarray(expected), dtype)


def _within(got: np.ndarray, expected: np.ndarray, dtype: str, tol: Tolerance,
            magnitude: Optional[np.ndarray]) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Elementwise conformance and, for float tolerances, the error shown to the user."""
    if dtype not in FLOAT_DTYPES:
        exp = np.asarray(expected).astype(np_dtype(dtype)) if expected.dtype != object else expected
        return np.asarray(got == exp, dtype=bool), None
    wide = wide_float(dtype)
    g = got.astype(wide)
    x = np.asarray(expected).astype(wide)
    nan_match = np.isnan(g) & np.isnan(x)
    if isinstance(tol, Exact):
        return (g == x) | nan_match, None
    if isinstance(tol, Ulps):
        err = ulp_error(g, x, dtype)
        return err <= tol.ulps, err
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - x)
        if isinstance(tol, Relative):
            bound = tol.atol + tol.rtol * np.abs(x)
        elif isinstance(tol, Accumulation):
            mag = np.abs(x) if magnitude is None else np.broadcast_to(magnitude, x.shape)
            bound = tol.factor * mag.astype(wide) + ulp_of(x, dtype)
        else:
            raise TypeError(f"unknown tolerance {tol!r}")
        inf_match = np.isinf(g) & np.isinf(x) & (np.sign(g) == np.sign(x))
        return (diff <= bound) | nan_match | inf_match, diff


def reference_round(exact: np.ndarray, dtype: str) -> np.ndarray:
    """``exact`` rounded once into ``dtype``, as a host array of that dtype (for references
    that feed a following step, e.g. a stored intermediate)."""
    if dtype in FLOAT_FORMATS:
        return round_to_format(np.asarray(exact, dtype=wide_float(dtype)), dtype).astype(np_dtype(dtype))
    return np.asarray(exact).astype(np_dtype(dtype))
