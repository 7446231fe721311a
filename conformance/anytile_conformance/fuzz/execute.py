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

from ..numerics import poison
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
    """Each stored variable's output as a host array, or the ``Crash`` the run raised."""
    import anytile as at
    try:
        kernel = load_kernel(program)
        args = [at.asarray(np.array(i.data, copy=True), device=device) for i in program.inputs]
        outs = {v.name: at.asarray(poison(program.output_shape(v), v.dtype), device=device)
                for v in program.stored()}
        kernel[(program.programs,)](*args, *outs.values(), program.n, BLOCK=program.block)
        return {name: out.numpy() for name, out in outs.items()}
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
    ``minnum`` and C's ``fmin`` do).  A generated kernel is well-defined by construction, so
    the interpreter raising is a failure too (of the generator, the frontend or the
    interpreter), reported as such."""
    if isinstance(reference, Crash):
        also = f"; backend raised {candidate}" if isinstance(candidate, Crash) else "; the backend ran"
        return Difference([], f"the reference interpreter rejected a generated kernel: {reference}{also}")
    if isinstance(candidate, Crash):
        return Difference([], f"backend raised {candidate}; the interpreter ran")
    bad, lines = [], []
    for v in program.stored():
        ref, got = reference[v.name], candidate[v.name]
        same = (ref.view(np.uint8) == got.view(np.uint8)).reshape(ref.size, -1).all(axis=1)
        if ref.dtype.kind == "f" or ref.dtype.name == "bfloat16":
            both_zero = (ref.astype(np.float64) == 0) & (got.astype(np.float64) == 0)
            same |= both_zero.ravel()
        if not same.all():
            wrong = np.flatnonzero(~same)
            bad.append(v.name)
            first = int(wrong[0])
            lines.append(f"{v.name} ({v.dtype} {v.kind}): {wrong.size} elements differ, first [{first}]: "
                         f"backend {got.ravel()[first]!r}, interpreter {ref.ravel()[first]!r}")
    if not bad:
        return None
    return Difference(bad, "\n".join(lines))


def differs(program: Program, device: Any, reference_device: Any) -> Optional[Difference]:
    """Run ``program`` on both devices and compare."""
    return compare_outcomes(program, run_program(program, reference_device),
                            run_program(program, device))
