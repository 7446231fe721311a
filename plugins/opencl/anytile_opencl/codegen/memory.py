"""Loads, stores and atomics on global memory.

A chunk whose addresses are a ramp of one element is contiguous: ``vloadN``/``vstoreN`` when
every lane is active (known from the mask's ramp bound, or tested with ``all()``), lane by
lane otherwise; masked-off lanes never touch memory.  Stores and atomics skip the work-items
that hold copies of a small tile's chunks.  Atomics run lane by lane: OpenCL C 1.2 has 32-bit
integer atomics, 64-bit ones with ``cl_khr_int64_*_atomics``; the rest (floats, 8/16-bit
types, missing 64-bit kinds) are compare-and-swap loops, narrow types on their 32-bit word.
"""
from __future__ import annotations

from typing import Any, Optional

from anytile.errors import CompilationError
from anytile.ir import AtomicCASOp, LoadOp, ScalarType, StoreOp, TileType, Value

from .arith import Arith
from .chunk import Chunk, Point, Writer, uniform, vector
from .ctypes import memory_name, scalar_name, size_of, unsigned_name, vector_name

__all__ = ["MemoryEmitter"]

_NATIVE32 = {"add": "atomic_add", "xchg": "atomic_xchg", "min": "atomic_min",
             "max": "atomic_max", "and": "atomic_and", "or": "atomic_or", "xor": "atomic_xor"}
_BASE64 = {"add", "xchg"}


class MemoryEmitter:
    """The part of ``KernelEmitter`` that reads and writes global memory."""

    w: Writer
    arith: Arith

    # -- conversions between registers and memory ---------------------------------------------
    @staticmethod
    def _from_memory(expr: str, elem: Any, lanes: int) -> str:
        if isinstance(elem, ScalarType) and elem.is_bool:       # any non-zero byte is true
            return f"((char)({expr} != 0))" if lanes == 1 else \
                f"(-({expr} != (uchar{lanes})0))"
        return expr

    @staticmethod
    def _to_memory(expr: str, elem: Any, lanes: int) -> str:
        if isinstance(elem, ScalarType) and elem.is_bool:
            return f"as_uchar{'' if lanes == 1 else lanes}({expr})"
        return expr

    @staticmethod
    def _address(expr: str, elem: Any, volatile: bool = False, const: bool = False) -> str:
        q = ("volatile " if volatile else "") + ("const " if const else "")
        return f"(({q}__global {memory_name(elem)}*)({expr}))"

    def _active(self, mask: Optional[Chunk]) -> Optional[str]:
        """A scalar condition under which every lane of ``mask`` is active."""
        if mask is None:
            return None
        if mask.is_uniform:
            return mask.expr
        if mask.all_true:
            return mask.all_true
        return f"all({mask.expr} != (char{mask.lanes})0)"

    # -- loads ---------------------------------------------------------------------------------
    def eval_load(self, op: LoadOp, point: Point) -> Chunk:
        elem = op.result.type.elem if isinstance(op.result.type, TileType) else op.result.type
        lanes = point.lanes
        p = self.chunk(op.ptr, point)
        mask = self.chunk(op.mask, point) if op.mask is not None else None
        other = self.chunk(op.other, point) if op.other is not None and mask is not None else None
        fill = other.as_vector() if other is not None else f"(({vector_name(elem, lanes)})0)"
        contiguous = p.is_ramp and p.step == size_of(elem)
        if lanes == 1 or p.is_uniform and (mask is None or mask.is_uniform):
            value = self._from_memory(f"*{self._address(p.expr, elem, op.volatile, True)}", elem, 1)
            if mask is not None:
                value = f"(({mask.expr}) ? {value} : {other.expr if other is not None else '0'})"
            return uniform(self.arith.let(value, elem, 1), elem, lanes)
        if contiguous:
            whole = self._from_memory(self._vector_read(p, elem, lanes, op.volatile), elem, lanes)
            out = self.w.fresh("ld")
            vtype = vector_name(elem, lanes)
            if mask is None:
                self.w.line(f"{vtype} {out} = {whole};")
                return vector(out, elem, lanes)
            if mask.is_uniform:
                self.w.line(f"{vtype} {out} = ({mask.expr}) ? {whole} : {fill};")
                return vector(out, elem, lanes)
            self.w.line(f"{vtype} {out};")
            with self.w.block(f"if ({self._active(mask)})"):
                self.w.line(f"{out} = {whole};")
            with self.w.block("else"):
                self._gather_into(out, p, mask, other, elem, lanes, op.volatile)
            return vector(out, elem, lanes)
        out = self.w.fresh("ld")
        self.w.line(f"{vector_name(elem, lanes)} {out};")
        self._gather_into(out, p, mask, other, elem, lanes, op.volatile)
        return vector(out, elem, lanes)

    def _vector_read(self, p: Chunk, elem: Any, lanes: int, volatile: bool) -> str:
        """A contiguous chunk: an aligned vector access when the address is known to allow
        it (GPUs then issue one wide load), else ``vloadN``."""
        if p.align % (lanes * size_of(elem)) == 0:
            q = "volatile " if volatile else ""
            return f"*(({q}const __global {memory_name(elem)}{lanes}*)({p.expr}))"
        return f"vload{lanes}(0, {self._address(p.expr, elem, volatile, True)})"

    def _gather_into(self, out: str, p: Chunk, mask: Optional[Chunk], other: Optional[Chunk],
                     elem: Any, lanes: int, volatile: bool) -> None:
        """``out = load`` lane by lane (masked-off lanes get ``other`` or 0)."""
        address, active = self.spill(p), self.spill(mask) if mask is not None else None
        fill = self.spill(other) if other is not None else (lambda j: "0")
        buffer = self.w.fresh("v")
        self.w.line(f"{scalar_name(elem)} {buffer}[{lanes}];")
        with self.w.block(f"for (int j = 0; j < {lanes}; j++)"):
            value = self._from_memory(f"*{self._address(address('j'), elem, volatile, True)}", elem, 1)
            if active is not None:
                value = f"({active('j')}) ? {value} : ({scalar_name(elem)})({fill('j')})"
            self.w.line(f"{buffer}[j] = {value};")
        self.w.line(f"{out} = vload{lanes}(0, {buffer});")

    # -- stores --------------------------------------------------------------------------------
    def emit_store(self, op: StoreOp) -> None:
        t = op.ptr.type
        self.note_write()
        if not isinstance(t, TileType):
            point = self.scalar_point()
            p, v = self.chunk(op.ptr, point), self.chunk(op.value, point)
            cond = self.chunk(op.mask, point).expr if op.mask is not None else None
            guard = " && ".join(c for c in (("lid == 0" if self.work_items > 1 else None), cond) if c)
            line = f"*{self._address(p.expr, op.value.type)} = {self._to_memory(v.expr, op.value.type, 1)};"
            self._guarded(guard, line)
            return
        elem = t.elem.pointee
        with self.owners_only(t.layout):
            with self.chunk_loop(t.layout, t.shape) as point:
                p, v = self.chunk(op.ptr, point), self.chunk(op.value, point)
                mask = self.chunk(op.mask, point) if op.mask is not None else None
                self._store_chunk(p, v, mask, elem, point.lanes)

    def _guarded(self, cond: Optional[str], line: str) -> None:
        if cond:
            with self.w.block(f"if ({cond})"):
                self.w.line(line)
        else:
            self.w.line(line)

    def _store_chunk(self, p: Chunk, v: Chunk, mask: Optional[Chunk], elem: Any,
                     lanes: int) -> None:
        if p.is_ramp and p.step == size_of(elem) and lanes > 1:
            value = self._to_memory(v.as_vector(), elem, lanes)
            active = self._active(mask)
            if mask is None or mask.is_uniform:
                with self.w.block(f"if ({active})" if active else ""):
                    self._vector_store(p, value, elem, lanes)
                return
            with self.w.block(f"if ({active})"):
                self._vector_store(p, value, elem, lanes)
            with self.w.block("else"):
                self._scatter(p, v, mask, elem, lanes)
            return
        self._scatter(p, v, mask, elem, lanes)

    def _vector_store(self, p: Chunk, value: str, elem: Any, lanes: int) -> None:
        """``vstoreN`` (an aligned vector store where the address allows); on CPUs, when the
        launch writes more than the cache holds, a streaming store that skips the cache (and
        the read of the line it would evict)."""
        vtype = f"{memory_name(elem)}{lanes}"
        if self.arch.kind == "cpu":
            self.uses_streaming = True
            aligned = f"(({p.expr}) & {lanes * size_of(elem) - 1}UL) == 0UL"
            self.w.line("#ifdef AT_STREAM")
            self.w.line(f"if (at_stream && {aligned}) "
                        f"__builtin_nontemporal_store({value}, (__global {vtype}*)({p.expr})); else")
            self.w.line("#endif")
        if p.align % (lanes * size_of(elem)) == 0:
            self.w.line(f"*((__global {vtype}*)({p.expr})) = {value};")
        else:
            self.w.line(f"vstore{lanes}({value}, 0, {self._address(p.expr, elem)});")

    def _scatter(self, p: Chunk, v: Chunk, mask: Optional[Chunk], elem: Any, lanes: int) -> None:
        address, value = self.spill(p), self.spill(v)
        active = self.spill(mask) if mask is not None else None
        with self.w.block(f"for (int j = 0; j < {lanes}; j++)"):
            line = f"*{self._address(address('j'), elem)} = {self._to_memory(value('j'), elem, 1)};"
            self._guarded(active("j") if active else None, line)

    # -- atomics -------------------------------------------------------------------------------
    def emit_atomic(self, op: Any) -> None:
        """``atomic_rmw`` / ``atomic_cas``: each active lane once, in lane order; the old
        values become the result."""
        t = op.result.type
        elem = t.elem if isinstance(t, TileType) else t
        helper = self._atomic_helper(op, elem)
        fenced = op.sem != "relaxed"
        self.note_write()
        if fenced:
            self.w.line("mem_fence(CLK_GLOBAL_MEM_FENCE);")
        if not isinstance(t, TileType):
            self._scalar_atomic(op, elem, helper)
        else:
            stored = self.declare_stored(t)
            with self.owners_only(t.layout):
                with self.chunk_loop(t.layout, t.shape) as point:
                    operands = [self.chunk(v, point) for v in self._atomic_operands(op)]
                    mask = self.chunk(op.mask, point) if getattr(op, "mask", None) is not None else None
                    self._atomic_chunk(stored, point, operands, mask, elem, helper)
            self.stored[op.result] = stored
            if t.layout.replicated:
                self.share_with_copies(op.result)
        if fenced:
            self.w.line("mem_fence(CLK_GLOBAL_MEM_FENCE);")

    @staticmethod
    def _atomic_operands(op: Any) -> list[Value]:
        return [op.ptr, op.cmp, op.value] if isinstance(op, AtomicCASOp) else [op.ptr, op.value]

    def _scalar_atomic(self, op: Any, elem: Any, helper: str) -> None:
        point = self.scalar_point()
        args = [self.chunk(v, point).expr for v in self._atomic_operands(op)]
        cond = self.chunk(op.mask, point).expr if getattr(op, "mask", None) is not None else None
        name = self.w.fresh("old")
        self.w.line(f"{scalar_name(elem)} {name} = 0;")
        guard = " && ".join(c for c in (("lid == 0" if self.work_items > 1 else None), cond) if c)
        self._guarded(guard, f"{name} = {helper}({', '.join(args)});")
        self.scalars[op.result] = self.broadcast_scalar(name, elem) if self.work_items > 1 else name

    def _atomic_chunk(self, stored: Any, point: Point, operands: list[Chunk],
                      mask: Optional[Chunk], elem: Any, helper: str) -> None:
        lanes = point.lanes
        k = point.natural[1]
        if lanes == 1:
            args = ", ".join(c.expr for c in operands)
            call = f"{helper}({args})"
            self.w.line(f"{stored.name}[{k}] = {f'({mask.expr}) ? {call} : 0' if mask else call};")
            return
        lanes_of = [self.spill(c) for c in operands]
        active = self.spill(mask) if mask is not None else None
        buffer = self.w.fresh("o")
        self.w.line(f"{scalar_name(elem)} {buffer}[{lanes}];")
        with self.w.block(f"for (int j = 0; j < {lanes}; j++)"):
            call = f"{helper}({', '.join(f('j') for f in lanes_of)})"
            value = f"({active('j')}) ? {call} : 0" if active else call
            self.w.line(f"{buffer}[j] = {value};")
        self.w.line(f"{stored.name}[{k}] = vload{lanes}(0, {buffer});")

    def _atomic_helper(self, op: Any, elem: Any) -> str:
        if not isinstance(elem, ScalarType) or elem.is_bool:
            raise CompilationError(f"atomics on {elem} are not defined", op.loc)
        kind = "cas" if isinstance(op, AtomicCASOp) else op.kind
        name = f"at_atomic_{kind}_{elem.name}"
        return self.helpers.define(name, lambda: self._atomic_source(name, kind, elem, op.loc))

    def _atomic_source(self, name: str, kind: str, t: ScalarType, loc: Any) -> str:
        c = scalar_name(t)
        width = size_of(t) * 8
        if width == 64:
            if not self.arch.atomics64:
                raise CompilationError("this OpenCL device has no 64-bit atomics "
                                       "(cl_khr_int64_base_atomics)", loc)
            self.extensions.add("cl_khr_int64_base_atomics")
        native = self._native_atomic(kind, t, width)
        if native is not None:
            if kind == "cas":
                return (f"{c} {name}(ulong a, {c} c, {c} v) {{\n  return {native}((volatile "
                        f"__global {c}*)a, c, v);\n}}")
            return f"{c} {name}(ulong a, {c} v) {{\n  return {native}((volatile __global {c}*)a, v);\n}}"
        return self._cas_loop(name, kind, t, width)

    def _native_atomic(self, kind: str, t: ScalarType, width: int) -> Optional[str]:
        if not t.is_int or width < 32:
            return "atomic_xchg" if kind == "xchg" and t.name == "f32" else None
        if width == 32:
            return "atomic_cmpxchg" if kind == "cas" else _NATIVE32[kind]
        if kind == "cas" or kind in _BASE64:
            return "atom_cmpxchg" if kind == "cas" else "atom_" + _NATIVE32[kind].split("_")[1]
        if self.arch.atomics64_ext:
            self.extensions.add("cl_khr_int64_extended_atomics")
            return "atom_" + kind
        return None

    def _cas_loop(self, name: str, kind: str, t: ScalarType, width: int) -> str:
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
            combined = Arith(body, self.helpers).binary(kind, uniform("o", t, 1), uniform("v", t, 1))
            lines += body.lines
            new = combined.expr
        if narrow:
            lines.append(f"    uint nw = (old & ~mask) | ((uint)as_{unsigned_name(t)}({new}) << shift);")
        else:
            lines.append(f"    {word} nw = as_{word}({new});")
        lines += [f"    {word} prev = {cmpxchg}(p, old, nw);", "    if (prev == old) return o;",
                  "    old = prev;", "  }", "}"]
        return "\n".join(lines)
