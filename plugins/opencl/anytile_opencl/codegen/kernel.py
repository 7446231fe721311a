"""A laid-out kernel ``Function`` as one OpenCL C ``__kernel``.

The kernel's parameters are the IR's runtime parameters (a pointer becomes its buffer and a
byte offset), then the grid size per axis, how many programs each work-group runs in turn
along axis 0 (several on CPUs: starting a work-group costs PoCL microseconds) and, when the
kernel checks something at run time, the error record (``checks.py``).  In checked mode
each pointer parameter also gets the size of its buffer (its start is the buffer itself).
Every program starts with
``#pragma OPENCL FP_CONTRACT OFF``: ``a*b + c`` is rounded twice, as the IR says, never fused.

The body is written op by op by ``EmitContext`` (``context.py``) and the per-op functions
of its tables.  With several work-items, a program that reads global memory after writing
it first waits at a barrier (another work-item may have written what it reads).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from anytile.errors import CompilationError
from anytile.ir import AtomicCASOp, AtomicRMWOp, Module, PointerType, StoreOp, TileType, elem_type

from ..layout import LayoutPolicy
from ..target import OpenCLArch
from .context import EmitContext
from .ctypes import scalar_name, size_of

__all__ = ["EmittedKernel", "emit_kernel"]


@dataclass(frozen=True)
class EmittedKernel:
    """The ``opencl-c`` stage's result: the source, its ``__kernel``'s name, the scratch
    memory one work-group uses, the run-time checks (``[message, file, line]``), the
    parameters written (a launch writing more than the cache holds streams its stores) and
    the private memory a work-item's tiles take (a CPU driver keeps them on its threads'
    stacks)."""

    name: str
    source: str
    scratch_bytes: int
    checks: list
    written: list               # the pointer parameters it may write through
    check_facts: list = field(default_factory=list)   # per check: how to word a failure
    private_bytes: int = 0      # the private arrays of one work-item
    largest_private: Optional[list] = None   # the largest: [bytes, elements, dtype, file, line]


def emit_kernel(module: Module, arch: OpenCLArch, policy: LayoutPolicy,
                debug: bool = False, spans: Sequence[int] = ()) -> EmittedKernel:
    """``module``'s kernel (after the ``laid-out ir`` stage) as OpenCL C; ``spans``: the
    pointer parameters whose ``(lo, size)`` checked mode added after the others."""
    ctx = EmitContext(module.kernel, arch, policy, debug)
    _require_extensions(ctx)
    params, setup = _parameters(ctx, spans)
    ctx.emit_block(ctx.fn.body)
    name = "at_" + re.sub(r"\W", "_", ctx.fn.name)
    if ctx.helpers.uses_fp64:
        ctx.extensions.add("cl_khr_fp64")
    lines = ["#pragma OPENCL FP_CONTRACT OFF"]
    lines += [f"#pragma OPENCL EXTENSION {e} : enable" for e in sorted(ctx.extensions)]
    if ctx.uses_streaming:
        lines += ["#if defined(__has_builtin)", "#if __has_builtin(__builtin_nontemporal_store)",
                  "#define AT_STREAM 1", "#endif", "#endif"]
    prelude = ctx.helpers.prelude()
    if prelude:
        lines += ["", prelude]
    extra = ["const int at_gx", "const int at_gy", "const int at_gz", "const int at_per_group",
             "const int at_stream"]
    if ctx.checks:
        extra.append("__global int* at_error")
    lines += ["", f"__kernel __attribute__((reqd_work_group_size({ctx.work_items}, 1, 1)))",
              f"void {name}({', '.join(params + extra)}) {{"]
    if ctx.scratch_bytes:
        lines.append(f"  __local ulong at_scratch[{-(-ctx.scratch_bytes // 8)}];")
    lines.append("  const int lid = get_local_id(0);" if ctx.work_items > 1 else
                 "  const int lid = 0;")
    lines += [f"  const int own{m} = lid & {m - 1};" for m in sorted(ctx.own_masks)]
    lines += setup
    lines += ["  for (int at_p = 0; at_p < at_per_group; at_p++) {",
              "    const int pid0 = (int)get_group_id(0) * at_per_group + at_p;",
              "    if (pid0 >= at_gx) break;",
              "    const int pid1 = (int)get_group_id(1), pid2 = (int)get_group_id(2);"]
    lines += ctx.w.lines
    if ctx.scratch_bytes and ctx.work_items > 1:
        lines.append("    barrier(CLK_LOCAL_MEM_FENCE);")
    lines += ["  }", "}", ""]
    return EmittedKernel(name, "\n".join(lines), ctx.scratch_bytes, ctx.checks,
                         _written_parameters(ctx), ctx.check_facts, ctx.private_bytes,
                         ctx.largest_private)


def _written_parameters(ctx: EmitContext) -> list[int]:
    """The pointer parameters a store or atomic may write through."""
    pointers = [i for i, a in enumerate(ctx.fn.args) if isinstance(a.type, PointerType)]
    written: set[int] = set()
    for op in ctx.fn.walk():
        if isinstance(op, (StoreOp, AtomicRMWOp, AtomicCASOp)):
            origins = ctx.plan.origins(op.ptr)
            if origins is None:
                return pointers
            written |= origins
    return sorted(written)


def _require_extensions(ctx: EmitContext) -> None:
    """Doubles anywhere (values, pointees) need ``cl_khr_fp64``."""
    for op in ctx.fn.walk():
        for r in op.results + [a for b in op.regions for a in b.args]:
            elem = elem_type(r.type)
            if isinstance(elem, PointerType):
                elem = elem.pointee
            if elem.name == "f64":
                ctx.helpers.require_fp64(op.loc)
                return


def _parameters(ctx: EmitContext, spans: Sequence[int]) -> tuple[list[str], list[str]]:
    """The C parameters, and the lines that turn buffers and offsets into addresses."""
    params, setup = [], []
    first_span = len(ctx.fn.args) - 2 * len(spans)
    starts = {first_span + 2 * k: p for k, p in enumerate(spans)}
    for i, arg in enumerate(ctx.fn.args):
        t = arg.type
        if i in starts:                  # a span's start: the buffer itself
            ctx.scalars[arg] = f"((long)(ulong)buf{starts[i]})"
            ctx.divisors[arg] = 1
            continue
        if isinstance(t, TileType):
            raise CompilationError("a kernel parameter cannot be a tile", ctx.fn.loc)
        divisible = (ctx.fn.arg_attrs[i] if i < len(ctx.fn.arg_attrs) else {}).get(
            "divisibility", 1)
        if isinstance(t, PointerType):
            params += [f"__global uchar* buf{i}", f"const long off{i}"]
            setup.append(f"  const ulong ptr{i} = (ulong)(buf{i} + off{i});")
            ctx.scalars[arg] = f"ptr{i}"
            ctx.divisors[arg] = max(divisible, size_of(t.pointee))
        else:
            if t.name == "f64":
                ctx.helpers.require_fp64(ctx.fn.loc)
            params.append(f"const {scalar_name(t)} arg{i}")
            ctx.scalars[arg] = f"arg{i}"
            ctx.divisors[arg] = divisible
    return params, setup
