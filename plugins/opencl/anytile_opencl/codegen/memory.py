"""Loads, stores and atomics on global memory.

A chunk whose addresses are a ramp of one element is contiguous: ``vloadN``/``vstoreN`` when
every lane is active (known from the mask's ramp bound, or tested with ``all()``), lane by
lane otherwise; masked-off lanes never touch memory.  Stores and atomics skip the work-items
that hold copies of a small tile's chunks.  Atomics run lane by lane: OpenCL C 1.2 has 32-bit
integer atomics, 64-bit ones with ``cl_khr_int64_*_atomics``; the rest (floats, 8/16-bit
types, missing 64-bit kinds) are compare-and-swap loops, narrow types on their 32-bit word.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from anytile.errors import CompilationError
from anytile.ir import AtomicCASOp, AtomicRMWOp, LoadOp, ScalarType, StoreOp, TileType, Value

from .arith import Arith
from .chunk import Chunk, Point, Writer, scalar_point, uniform, vector
from .collective import broadcast_scalar, owners_only, share_with_copies
from .ctypes import memory_name, scalar_name, size_of, unsigned_name, vector_name
from .values import chunk_loop, declare_stored, spill

if TYPE_CHECKING:
    from .context import EmitContext

__all__ = ["EMITTERS", "CHUNKS", "eval_load", "emit_store", "emit_atomic"]

_NATIVE32 = {"add": "atomic_add", "xchg": "atomic_xchg", "min": "atomic_min",
             "max": "atomic_max", "and": "atomic_and", "or": "atomic_or", "xor": "atomic_xor"}
_BASE64 = {"add", "xchg"}


# -- conversions between registers and memory ---------------------------------------------
def _from_memory(expr: str, elem: Any, lanes: int) -> str:
    if isinstance(elem, ScalarType) and elem.is_bool:       # any non-zero byte is true
        return f"((char)({expr} != 0))" if lanes == 1 else \
            f"(-({expr} != (uchar{lanes})0))"
    return expr


def _to_memory(expr: str, elem: Any, lanes: int) -> str:
    if isinstance(elem, ScalarType) and elem.is_bool:
        return f"as_uchar{'' if lanes == 1 else lanes}({expr})"
    return expr


def _address(expr: str, elem: Any, volatile: bool = False, const: bool = False) -> str:
    q = ("volatile " if volatile else "") + ("const " if const else "")
    return f"(({q}__global {memory_name(elem)}*)({expr}))"


def _active(mask: Optional[Chunk]) -> Optional[str]:
    """A scalar condition under which every lane of ``mask`` is active."""
    if mask is None:
        return None
    if mask.is_uniform:
        return mask.expr
    if mask.all_true:
        return mask.all_true
    return f"all({mask.expr} != (char{mask.lanes})0)"


# -- loads ---------------------------------------------------------------------------------
def eval_load(ctx: "EmitContext", op: LoadOp, point: Point) -> Chunk:
    elem = op.result.type.elem if isinstance(op.result.type, TileType) else op.result.type
    lanes = point.lanes
    p = ctx.chunk(op.ptr, point)
    mask = ctx.chunk(op.mask, point) if op.mask is not None else None
    other = ctx.chunk(op.other, point) if op.other is not None and mask is not None else None
    fill = other.as_vector() if other is not None else f"(({vector_name(elem, lanes)})0)"
    contiguous = p.is_ramp and p.step == size_of(elem)
    if lanes == 1 or p.is_uniform and (mask is None or mask.is_uniform):
        value = _from_memory(f"*{_address(p.expr, elem, op.volatile, True)}", elem, 1)
        if mask is not None:
            value = f"(({mask.expr}) ? {value} : {other.expr if other is not None else '0'})"
        return uniform(ctx.arith.let(value, elem, 1), elem, lanes)
    if contiguous:
        whole = _from_memory(_vector_read(ctx, p, elem, lanes, op.volatile), elem, lanes)
        out = ctx.w.fresh("ld")
        vtype = vector_name(elem, lanes)
        if mask is None:
            ctx.w.line(f"{vtype} {out} = {whole};")
            return vector(out, elem, lanes)
        if mask.is_uniform:
            ctx.w.line(f"{vtype} {out} = ({mask.expr}) ? {whole} : {fill};")
            return vector(out, elem, lanes)
        ctx.w.line(f"{vtype} {out};")
        with ctx.w.block(f"if ({_active(mask)})"):
            ctx.w.line(f"{out} = {whole};")
        with ctx.w.block("else"):
            _gather_into(ctx, out, p, mask, other, elem, lanes, op.volatile)
        return vector(out, elem, lanes)
    out = ctx.w.fresh("ld")
    ctx.w.line(f"{vector_name(elem, lanes)} {out};")
    _gather_into(ctx, out, p, mask, other, elem, lanes, op.volatile)
    return vector(out, elem, lanes)


def _vector_read(ctx: "EmitContext", p: Chunk, elem: Any, lanes: int, volatile: bool) -> str:
    """A contiguous chunk: an aligned vector access when the address is known to allow
    it (GPUs then issue one wide load), else ``vloadN``."""
    if p.align % (lanes * size_of(elem)) == 0:
        q = "volatile " if volatile else ""
        return f"*(({q}const __global {memory_name(elem)}{lanes}*)({p.expr}))"
    return f"vload{lanes}(0, {_address(p.expr, elem, volatile, True)})"


def _gather_into(ctx: "EmitContext", out: str, p: Chunk, mask: Optional[Chunk], other: Optional[Chunk],
                 elem: Any, lanes: int, volatile: bool) -> None:
    """``out = load`` lane by lane (masked-off lanes get ``other`` or 0)."""
    address, active = spill(ctx, p), spill(ctx, mask) if mask is not None else None
    fill = spill(ctx, other) if other is not None else (lambda j: "0")
    buffer = ctx.w.fresh("v")
    ctx.w.line(f"{scalar_name(elem)} {buffer}[{lanes}];")
    with ctx.w.block(f"for (int j = 0; j < {lanes}; j++)"):
        value = _from_memory(f"*{_address(address('j'), elem, volatile, True)}", elem, 1)
        if active is not None:
            value = f"({active('j')}) ? {value} : ({scalar_name(elem)})({fill('j')})"
        ctx.w.line(f"{buffer}[j] = {value};")
    ctx.w.line(f"{out} = vload{lanes}(0, {buffer});")


# -- stores --------------------------------------------------------------------------------
def emit_store(ctx: "EmitContext", op: StoreOp) -> None:
    t = op.ptr.type
    ctx.note_write()
    if not isinstance(t, TileType):
        point = scalar_point()
        p, v = ctx.chunk(op.ptr, point), ctx.chunk(op.value, point)
        cond = ctx.chunk(op.mask, point).expr if op.mask is not None else None
        guard = " && ".join(c for c in (("lid == 0" if ctx.work_items > 1 else None), cond) if c)
        line = f"*{_address(p.expr, op.value.type)} = {_to_memory(v.expr, op.value.type, 1)};"
        _guarded(ctx, guard, line)
        return
    elem = t.elem.pointee
    with owners_only(ctx, t.layout):
        with chunk_loop(ctx, t.layout, t.shape) as point:
            p, v = ctx.chunk(op.ptr, point), ctx.chunk(op.value, point)
            mask = ctx.chunk(op.mask, point) if op.mask is not None else None
            _store_chunk(ctx, p, v, mask, elem, point.lanes)


def _guarded(ctx: "EmitContext", cond: Optional[str], line: str) -> None:
    if cond:
        with ctx.w.block(f"if ({cond})"):
            ctx.w.line(line)
    else:
        ctx.w.line(line)


def _store_chunk(ctx: "EmitContext", p: Chunk, v: Chunk, mask: Optional[Chunk], elem: Any,
                 lanes: int) -> None:
    if p.is_ramp and p.step == size_of(elem) and lanes > 1:
        value = _to_memory(v.as_vector(), elem, lanes)
        active = _active(mask)
        if mask is None or mask.is_uniform:
            with ctx.w.block(f"if ({active})" if active else ""):
                _vector_store(ctx, p, value, elem, lanes)
            return
        with ctx.w.block(f"if ({active})"):
            _vector_store(ctx, p, value, elem, lanes)
        with ctx.w.block("else"):
            _scatter(ctx, p, v, mask, elem, lanes)
        return
    _scatter(ctx, p, v, mask, elem, lanes)


def _vector_store(ctx: "EmitContext", p: Chunk, value: str, elem: Any, lanes: int) -> None:
    """``vstoreN`` (an aligned vector store where the address allows); on CPUs, when the
    launch writes more than the cache holds, a streaming store that skips the cache (and
    the read of the line it would evict)."""
    vtype = f"{memory_name(elem)}{lanes}"
    if ctx.arch.kind == "cpu":
        ctx.uses_streaming = True
        aligned = f"(({p.expr}) & {lanes * size_of(elem) - 1}UL) == 0UL"
        ctx.w.line("#ifdef AT_STREAM")
        ctx.w.line(f"if (at_stream && {aligned}) "
                    f"__builtin_nontemporal_store({value}, (__global {vtype}*)({p.expr})); else")
        ctx.w.line("#endif")
    if p.align % (lanes * size_of(elem)) == 0:
        ctx.w.line(f"*((__global {vtype}*)({p.expr})) = {value};")
    else:
        ctx.w.line(f"vstore{lanes}({value}, 0, {_address(p.expr, elem)});")


def _scatter(ctx: "EmitContext", p: Chunk, v: Chunk, mask: Optional[Chunk], elem: Any, lanes: int) -> None:
    address, value = spill(ctx, p), spill(ctx, v)
    active = spill(ctx, mask) if mask is not None else None
    with ctx.w.block(f"for (int j = 0; j < {lanes}; j++)"):
        line = f"*{_address(address('j'), elem)} = {_to_memory(value('j'), elem, 1)};"
        _guarded(ctx, active("j") if active else None, line)


# -- atomics -------------------------------------------------------------------------------
def emit_atomic(ctx: "EmitContext", op: Any) -> None:
    """``atomic_rmw`` / ``atomic_cas``: each active lane once, in lane order; the old
    values become the result."""
    t = op.result.type
    elem = t.elem if isinstance(t, TileType) else t
    helper = _atomic_helper(ctx, op, elem)
    fenced = op.sem != "relaxed"
    ctx.note_write()
    if fenced:
        ctx.w.line("mem_fence(CLK_GLOBAL_MEM_FENCE);")
    if not isinstance(t, TileType):
        _scalar_atomic(ctx, op, elem, helper)
    else:
        stored = declare_stored(ctx, t)
        with owners_only(ctx, t.layout):
            with chunk_loop(ctx, t.layout, t.shape) as point:
                operands = [ctx.chunk(v, point) for v in _atomic_operands(op)]
                mask = ctx.chunk(op.mask, point) if getattr(op, "mask", None) is not None else None
                _atomic_chunk(ctx, stored, point, operands, mask, elem, helper)
        ctx.stored[op.result] = stored
        if t.layout.replicated:
            share_with_copies(ctx, op.result)
    if fenced:
        ctx.w.line("mem_fence(CLK_GLOBAL_MEM_FENCE);")


def _atomic_operands(op: Any) -> list[Value]:
    return [op.ptr, op.cmp, op.value] if isinstance(op, AtomicCASOp) else [op.ptr, op.value]


def _scalar_atomic(ctx: "EmitContext", op: Any, elem: Any, helper: str) -> None:
    point = scalar_point()
    args = [ctx.chunk(v, point).expr for v in _atomic_operands(op)]
    cond = ctx.chunk(op.mask, point).expr if getattr(op, "mask", None) is not None else None
    name = ctx.w.fresh("old")
    ctx.w.line(f"{scalar_name(elem)} {name} = 0;")
    guard = " && ".join(c for c in (("lid == 0" if ctx.work_items > 1 else None), cond) if c)
    _guarded(ctx, guard, f"{name} = {helper}({', '.join(args)});")
    ctx.scalars[op.result] = broadcast_scalar(ctx, name, elem) if ctx.work_items > 1 else name


def _atomic_chunk(ctx: "EmitContext", stored: Any, point: Point, operands: list[Chunk],
                  mask: Optional[Chunk], elem: Any, helper: str) -> None:
    lanes = point.lanes
    k = point.natural[1]
    if lanes == 1:
        args = ", ".join(c.expr for c in operands)
        call = f"{helper}({args})"
        ctx.w.line(f"{stored.name}[{k}] = {f'({mask.expr}) ? {call} : 0' if mask else call};")
        return
    lanes_of = [spill(ctx, c) for c in operands]
    active = spill(ctx, mask) if mask is not None else None
    buffer = ctx.w.fresh("o")
    ctx.w.line(f"{scalar_name(elem)} {buffer}[{lanes}];")
    with ctx.w.block(f"for (int j = 0; j < {lanes}; j++)"):
        call = f"{helper}({', '.join(f('j') for f in lanes_of)})"
        value = f"({active('j')}) ? {call} : 0" if active else call
        ctx.w.line(f"{buffer}[j] = {value};")
    ctx.w.line(f"{stored.name}[{k}] = vload{lanes}(0, {buffer});")


def _atomic_helper(ctx: "EmitContext", op: Any, elem: Any) -> str:
    if not isinstance(elem, ScalarType) or elem.is_bool:
        raise CompilationError(f"atomics on {elem} are not defined", op.loc)
    kind = "cas" if isinstance(op, AtomicCASOp) else op.kind
    name = f"at_atomic_{kind}_{elem.name}"
    return ctx.helpers.define(name, lambda: _atomic_source(ctx, name, kind, elem, op.loc))


def _atomic_source(ctx: "EmitContext", name: str, kind: str, t: ScalarType, loc: Any) -> str:
    c = scalar_name(t)
    width = size_of(t) * 8
    if width == 64:
        if not ctx.arch.atomics64:
            raise CompilationError("this OpenCL device has no 64-bit atomics "
                                   "(cl_khr_int64_base_atomics)", loc)
        ctx.extensions.add("cl_khr_int64_base_atomics")
    native = _native_atomic(ctx, kind, t, width)
    if native is not None:
        if kind == "cas":
            return (f"{c} {name}(ulong a, {c} c, {c} v) {{\n  return {native}((volatile "
                    f"__global {c}*)a, c, v);\n}}")
        return f"{c} {name}(ulong a, {c} v) {{\n  return {native}((volatile __global {c}*)a, v);\n}}"
    return _cas_loop(ctx, name, kind, t, width)


def _native_atomic(ctx: "EmitContext", kind: str, t: ScalarType, width: int) -> Optional[str]:
    if not t.is_int or width < 32:
        return "atomic_xchg" if kind == "xchg" and t.name == "f32" else None
    if width == 32:
        return "atomic_cmpxchg" if kind == "cas" else _NATIVE32[kind]
    if kind == "cas" or kind in _BASE64:
        return "atom_cmpxchg" if kind == "cas" else "atom_" + _NATIVE32[kind].split("_")[1]
    if ctx.arch.atomics64_ext:
        ctx.extensions.add("cl_khr_int64_extended_atomics")
        return "atom_" + kind
    return None


def _cas_loop(ctx: "EmitContext", name: str, kind: str, t: ScalarType, width: int) -> str:
    """A compare-and-swap loop on the element, or on the 32-bit word holding it."""
    c, narrow = scalar_name(t), width < 32
    word = "uint" if narrow else unsigned_name(t)
    cmpxchg = "atom_cmpxchg" if width == 64 else "atomic_cmpxchg"
    body = Writer(indent=2)
    lines = [f"{c} {name}(ulong a{f', {c} c' if kind == 'cas' else ''}, {c} v) {{"]
    if narrow:
        lines += ["  volatile __global uint* p = (volatile __global uint*)(a & ~3UL);",
                  "  uint shift = (uint)(a & 3UL) * 8u;",
                  f"  uint mask = {(1 << width) - 1}u << shift;"]
        extract = f"as_{c}(({unsigned_name(t)})(old >> shift))"
    else:
        lines.append(f"  volatile __global {word}* p = (volatile __global {word}*)a;")
        extract = f"as_{c}(old)"
    lines += [f"  {word} old = *p;", "  while (1) {", f"    {c} o = {extract};"]
    if kind == "cas":
        same = f"as_{unsigned_name(t)}(o) == as_{unsigned_name(t)}(c)"
        lines.append(f"    if (!({same})) return o;")
        new = "v"
    elif kind == "xchg":
        new = "v"
    else:
        combined = Arith(body, ctx.helpers).binary(kind, uniform("o", t, 1), uniform("v", t, 1))
        lines += body.lines
        new = combined.expr
    if narrow:
        lines.append(f"    uint nw = (old & ~mask) | ((uint)as_{unsigned_name(t)}({new}) << shift);")
    else:
        lines.append(f"    {word} nw = as_{word}({new});")
    lines += [f"    {word} prev = {cmpxchg}(p, old, nw);", "    if (prev == old) return o;",
              "    old = prev;", "  }", "}"]
    return "\n".join(lines)


EMITTERS = {StoreOp: emit_store, AtomicRMWOp: emit_atomic, AtomicCASOp: emit_atomic}
CHUNKS = {LoadOp: eval_load}
