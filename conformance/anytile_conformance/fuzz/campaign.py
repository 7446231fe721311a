"""``anytile conformance --fuzz N --seed S``: generate, compare, shrink, save reproducers."""
from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional

from ..runner import device_capabilities
from ..tolerances import MATH_ULPS
from .execute import Difference, differs
from .generator import generate
from .program import Program
from .shrink import shrink

_REPRO_RUNNER = '''

# -- data and launch (generated) ------------------------------------------------------------
import sys

import ml_dtypes
import numpy as np

DTYPES = {{"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
          "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16,
          "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}}
#: the allocations (name, dtype, elements), filled with 0xA5 bytes before the inputs go in
MEMORY = [
{memory}
]
#: the kernel's array parameters in order: (name, allocation, first element, elements)
PARAMS = [
{params}
]
INPUTS = [
{inputs}
]
#: what is compared: (label, parameter or allocation)
OUTPUTS = [
{outputs}
]
#: math results, within a ULP bound of the exact value: label -> (function, bound, argument)
MATH = {math}
#: some parameters share an allocation: they are passed as NumPy views of it
SHARED = {shared}
N, BLOCK, PROGRAMS = {n}, {block}, {programs}


def memory():
    """The allocations with the inputs in place, and each parameter's view of them."""
    bases = {{name: np.full(size * np.dtype(DTYPES[dtype]).itemsize, 0xA5, np.uint8)
             .view(DTYPES[dtype]) for name, dtype, size in MEMORY}}
    views = {{name: bases[group][first:first + size] for name, group, first, size in PARAMS}}
    for name, dtype, values in INPUTS:
        views[name][:] = np.array(values, dtype=DTYPES[dtype])
    return bases, views


def run(device):
    """Each output of the kernel on ``device``."""
    bases, views = memory()
    if SHARED:
        fuzz_kernel[(PROGRAMS,)](*views.values(), N, BLOCK=BLOCK, device=device)
        finals = {{**views, **bases}}
    else:
        arrays = {{name: at.asarray(view, device=device) for name, view in views.items()}}
        fuzz_kernel[(PROGRAMS,)](*arrays.values(), N, BLOCK=BLOCK)
        finals = {{name: array.numpy() for name, array in arrays.items()}}
    return [np.array(finals[where]) for _, where in OUTPUTS]


if __name__ == "__main__":
    device = at.device(sys.argv[1] if len(sys.argv) > 1 else {device!r})
    reference = run(at.device("interpreter"))
    got = run(device)
    bad = 0
    for (name, _), ref, out in zip(OUTPUTS, reference, got):
        if name in MATH:     # within the bound of the exact value, which anytile_conformance computes
            from anytile_conformance.fuzz.execute import math_errors
            fn, bound, argument = MATH[name]
            x = memory()[1][argument][:N]
            dtype = next(d for p, d, _ in INPUTS if p == argument)
            for who, values in ((device, out), ("interpreter", ref)):
                errors = math_errors(fn, dtype, x, values[:N])
                wrong = np.flatnonzero(errors > bound)
                if wrong.size:
                    bad += 1
                    i = int(wrong[0])
                    print(f"{{name}}: {{who}} is beyond {{bound}} ulp in {{wrong.size}} elements; "
                          f"first [{{i}}]: {{fn}}({{x[i]!r}}) = {{values[i]!r}}")
            ref, out = ref[N:], out[N:]         # the rest, never written: bit for bit
        if not ref.size:
            continue
        same = (ref.view(np.uint8).reshape(ref.size, -1) ==
                out.view(np.uint8).reshape(out.size, -1)).all(axis=1)
        if ref.dtype.kind == "f" or ref.dtype.name == "bfloat16":  # +0.0 == -0.0 (min/max)
            same |= ((ref.astype(np.float64) == 0) & (out.astype(np.float64) == 0)).ravel()
        wrong = np.flatnonzero(~same)
        if wrong.size:
            bad += 1
            i = int(wrong[0])
            print(f"{{name}}: {{wrong.size}} elements differ; first [{{i}}]: "
                  f"{{device}} {{out[i]!r}}, interpreter {{ref[i]!r}}")
    print("MISMATCH" if bad else "match")
    sys.exit(1 if bad else 0)
'''


def reproducer_source(program: Program, device_name: str, header: str) -> str:
    """A standalone script: the kernel, its inputs, and a comparison with the interpreter."""
    layout = program.layout()
    shared = layout.shared_groups()
    memory = ",\n".join(f"    ({g!r}, {dtype!r}, {len(initial)})"
                         for g, (dtype, initial) in layout.groups.items())
    params = ",\n".join(f"    ({name!r}, {g!r}, {first}, {size})"
                         for name, g, first, size in layout.params)
    inputs = ",\n".join(f"    ('in_{i.var.name}', {i.var.dtype!r}, {i.data.tolist()!r})"
                         for i in program.inputs)
    outputs = [(v.name, f"out_{v.name}") for v in program.stored()] + \
        [(f"memory {g}", g) for g in shared]
    math = {v.name: (v.math, MATH_ULPS[v.math][v.dtype], f"in_{program.defining(v.name).args[0]}")
            for v in program.stored() if v.math and program.defining(v.name) is not None}
    doc = '"""' + header.replace('"""', "'''") + '\n"""\n'
    return doc + program.source() + _REPRO_RUNNER.format(
        memory=memory, params=params, inputs=inputs,
        outputs=",\n".join(f"    {o!r}" for o in outputs), math=repr(math),
        shared=bool(shared), n=program.n, block=program.block, programs=program.programs,
        device=device_name)


@dataclass
class FuzzFailure:
    """One generated kernel on which the backend disagreed with the interpreter."""

    index: int
    seed: int
    difference: Difference
    statements_before: int
    statements_after: int
    path: str


def program_seed(seed: int, index: int) -> int:
    return int.from_bytes(hashlib.sha256(f"fuzz:{seed}:{index}".encode()).digest()[:8], "little")


def fuzz_one(device: Any, reference: Any, seed: int, capabilities: frozenset,
             out_dir: str, index: int = 0) -> Optional[FuzzFailure]:
    """Generate program ``seed``, compare, and on a difference shrink and save it."""
    program = generate(seed, capabilities)
    difference = differs(program, device, reference)
    if difference is None:
        return None
    first = difference.variables[0] if difference.variables else None

    def still_fails(candidate: Program) -> bool:
        found = differs(candidate, device, reference)
        return found is not None and (first is None or first in found.variables)

    small = shrink(program, still_fails, first)
    final = differs(small, device, reference) or difference
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"repro_seed{seed}.py")
    header = (f"anytile fuzz reproducer: program seed {seed} (index {index}), backend "
              f"{device.backend.name} on {device.info.name}.\n{final}\n"
              f"Run: python {os.path.basename(path)} [DEVICE]")
    with open(path, "w", encoding="utf-8") as f:
        f.write(reproducer_source(small, device.info.name, header))
    return FuzzFailure(index, seed, final, len(program.stmts), len(small.stmts), path)


def run_campaign(device: Any, count: int, seed: int, out_dir: str) -> int:
    """Fuzz ``count`` programs; print each failure and a summary; 0 when none failed."""
    import anytile as at
    reference = at.device("interpreter")
    capabilities = device_capabilities(device)
    print(f"fuzzing {device.info.name} ({device.backend.name}) against the interpreter: "
          f"{count} kernels, seed {seed}", flush=True)
    failures = []
    start = time.perf_counter()
    done = 0
    try:
        for index in range(count):
            failure = fuzz_one(device, reference, program_seed(seed, index), capabilities,
                               out_dir, index)
            done += 1
            if failure is not None:
                failures.append(failure)
                print(f"MISMATCH kernel {index} (program seed {failure.seed}): shrunk "
                      f"{failure.statements_before} -> {failure.statements_after} statements, "
                      f"saved {failure.path}\n  " + str(failure.difference).replace("\n", "\n  "),
                      flush=True)
            elif not sys.stdout.isatty():
                print(f"[{index + 1:>5}/{count}] match", flush=True)
    except KeyboardInterrupt:
        print(f"fuzz: INTERRUPTED after {done} of {count} kernels: {done - len(failures)} "
              f"passed, {len(failures)} failed", file=sys.stderr)
        return 130
    elapsed = time.perf_counter() - start
    print(f"fuzz: {count - len(failures)} passed, {len(failures)} failed ({elapsed:.1f} s)")
    return 1 if failures else 0
