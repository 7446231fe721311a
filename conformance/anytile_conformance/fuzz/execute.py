"""Running a generated program on a device and comparing two runs bit for bit."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from .program import Program

_MODULE_DIR: Optional[str] = None


def module_dir() -> str:
    """A private temporary folder for generated kernel modules (one per process)."""
    global _MODULE_DIR
    if _MODULE_DIR is None:
        _MODULE_DIR = tempfile.mkdtemp(prefix="anytile-fuzz-")
    return _MODULE_DIR


def load_kernel(program: Program) -> Any:
    """Write the program's source to a module file and import it (``@at.jit`` reads the
    source of what it decorates, so the kernel must live in a real file)."""
    source = program.source()
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    name = f"anytile_fuzz_{digest}"
    path = os.path.join(module_dir(), name + ".py")
    if name in sys.modules:
        return sys.modules[name].fuzz_kernel
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.fuzz_kernel


@dataclass
class Crash:
    """A run that raised: the exception's type and message."""

    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


Outcome = Union[dict[str, np.ndarray], Crash]


def run_program(program: Program, device: Any) -> Outcome:
    """Each stored variable's output as a host array (and, where parameters share an
    allocation, the whole allocation as ``memory <group>``), or the ``Crash`` the run
    raised.  Parameters sharing memory are passed as NumPy views of one array, so what is
    tested is the backend's own handling of host memory passed twice or overlapping."""
    import anytile as at
    try:
        kernel = load_kernel(program)
        layout = program.layout()
        bases = {group: initial.copy() for group, (_, initial) in layout.groups.items()}
        views = layout.views(bases)
        shared = layout.shared_groups()
        grid = (program.programs,)
        if shared:
            kernel[grid](*views.values(), program.n, BLOCK=program.block, device=device)
            finals = views
        else:
            arrays = {name: at.asarray(view, device=device) for name, view in views.items()}
            kernel[grid](*arrays.values(), program.n, BLOCK=program.block)
            finals = {name: array.numpy() for name, array in arrays.items()}
        outcome = {v.name: np.array(finals[f"out_{v.name}"]) for v in program.stored()}
        outcome.update({f"memory {group}": bases[group].copy() for group in shared})
        return outcome
    except Exception as exc:  # any failure of the frontend or backend is an outcome
        return Crash(type(exc).__name__, str(exc).strip().splitlines()[-1] if str(exc).strip() else "")


@dataclass
class Difference:
    """How a backend's run differs from the interpreter's."""

    variables: list[str]      # stored variables whose bits differ, in definition order
    detail: str

    def __str__(self) -> str:
        return self.detail


def compare_outcomes(program: Program, reference: Outcome, candidate: Outcome) -> Optional[Difference]:
    """``None`` when both runs agree bit for bit, except that +0.0 and -0.0 are equal (the
    IR leaves the sign of ``min``/``max`` of two opposite zeros unspecified, as LLVM's
    ``minnum`` and C's ``fmin`` do) and that a math function's result need only be within
    its ULP bound of the exact value (on both devices).  A generated kernel is well-defined
    by construction, so the interpreter raising is a failure too (of the generator, the
    frontend or the interpreter), reported as such."""
    if isinstance(reference, Crash):
        also = f"; backend raised {candidate}" if isinstance(candidate, Crash) else "; the backend ran"
        return Difference([], f"the reference interpreter rejected a generated kernel: {reference}{also}")
    if isinstance(candidate, Crash):
        return Difference([], f"backend raised {candidate}; the interpreter ran")
    bad, lines = [], []
    for v in program.stored():
        ref, got = reference[v.name], candidate[v.name]
        found = math_difference(program, v, ref, got) if v.math else \
            bits_difference(f"{v.name} ({v.dtype} {v.kind})", ref, got)
        if found:
            bad.append(v.name)
            lines.append(found)
    for key in sorted(k for k in reference if k.startswith("memory ")):
        found = bits_difference(f"{key} (the allocation its parameters share)", reference[key],
                                candidate[key])
        if found:
            lines.append(found)
    if not lines:
        return None
    return Difference(bad, "\n".join(lines))


def bits_difference(what: str, ref: np.ndarray, got: np.ndarray) -> str:
    """Where ``got`` differs from ``ref`` bit for bit (+0.0 == -0.0), or ""."""
    if ref.size == 0:
        return ""
    same = (ref.view(np.uint8) == got.view(np.uint8)).reshape(ref.size, -1).all(axis=1)
    if ref.dtype.kind == "f" or ref.dtype.name == "bfloat16":
        both_zero = (ref.astype(np.float64) == 0) & (got.astype(np.float64) == 0)
        same |= both_zero.ravel()
    if same.all():
        return ""
    wrong = np.flatnonzero(~same)
    first = int(wrong[0])
    return (f"{what}: {wrong.size} elements differ, first [{first}]: backend "
            f"{got.ravel()[first]!r}, interpreter {ref.ravel()[first]!r}")


def math_errors(fn: str, dtype: str, x: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Per element, how many ULPs ``got`` is from the exact ``fn(x)``."""
    from ..catalogue.math_fns import _reference
    from ..numerics import ulp_error, wide_float
    exact = _reference(fn, np.asarray(x).astype(wide_float(dtype)))
    return ulp_error(got, exact, dtype)


def math_difference(program: Program, var: Any, ref: np.ndarray, got: np.ndarray) -> str:
    """Lanes of math result ``var`` beyond its ULP bound on either device, or ""; lanes past
    ``n`` (never written) must agree bit for bit."""
    from ..tolerances import MATH_ULPS
    stmt = program.defining(var.name)
    argument = program.input_named(stmt.args[0]) if stmt is not None else None
    if argument is None:     # the shrinker made it an input: compared as data
        return bits_difference(f"{var.name} ({var.dtype} {var.kind})", ref, got)
    n = program.n
    x = argument.data[:n]
    bound = MATH_ULPS[var.math][var.dtype]
    lines = []
    for who, values in (("backend", got), ("interpreter", ref)):
        with np.errstate(all="ignore"):       # huge arguments overflow the reference on purpose
            errors = math_errors(var.math, var.dtype, x, values[:n])
        wrong = np.flatnonzero(errors > bound)
        if wrong.size:
            i = int(wrong[np.argmax(errors[wrong])])
            lines.append(f"{var.name} ({var.dtype} tl.{var.math}, mixed magnitudes): {who} is "
                         f"beyond {bound:g} ulp in {wrong.size} of {n} elements, worst [{i}]: "
                         f"{var.math}({x[i]!r}) = {values[i]!r} ({errors[i]:.3g} ulp)")
    tail = bits_difference(f"{var.name} past n", ref[n:], got[n:])
    return "\n".join(lines + ([tail] if tail else []))


def differs(program: Program, device: Any, reference_device: Any) -> Optional[Difference]:
    """Run ``program`` on both devices and compare."""
    return compare_outcomes(program, run_program(program, reference_device),
                            run_program(program, device))
