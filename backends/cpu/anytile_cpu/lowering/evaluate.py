"""Evaluating tile values at a point: lazy ops, buffer reads/writes, global loads/stores.

``ChunkEvaluator`` is a mixin of ``ProgramLowering``; see ``values`` for the vocabulary.
Masked-off lanes never touch memory: contiguous accesses use ``llvm.masked.load/store``,
scattered ones ``llvm.masked.gather/scatter``, single elements a branch.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np
from llvmlite import ir

from anytile.codegen.llvm.types import I1, I8, I32, I64, const_like, intrinsic, splat
from anytile.errors import CompilationError
from anytile.ir import (AddPtrOp, ArangeOp, BinaryOp, BitcastOp, BroadcastOp, CastOp,
                        CompareOp, ConstantOp, ExpandDimsOp, FmaOp, HintOp, LoadOp, Op,
                        PermuteOp, PointerType, ScalarType, SelectOp, SplatOp, TileType,
                        UMulHiOp, UnaryOp, Value, elem_type)

from .values import Chunk, Index, Lazy, Point, TileBuffer

__all__ = ["ChunkEvaluator"]

Elem = Union[ScalarType, PointerType]


class ChunkEvaluator:
    """Mixin: needs ``b``, ``ew``, ``types``, ``scalars``, ``tiles``, ``memo``."""

    # -- types ---------------------------------------------------------------------------------
    def ctype(self, elem: Elem) -> ir.Type:
        return self.types.compute(elem)

    def btype(self, elem: Elem) -> ir.Type:
        """Element type inside a stack buffer (compute form, ``i1`` as a byte)."""
        if isinstance(elem, ScalarType) and elem.is_bool:
            return I8
        return self.types.compute(elem)

    def stype(self, elem: Elem) -> ir.Type:
        return self.types.storage(elem)

    @staticmethod
    def nbytes(elem: Elem) -> int:
        return elem.nbytes

    # -- chunks --------------------------------------------------------------------------------
    def chunk(self, value: Value, point: Point) -> Chunk:
        """``value`` at ``point`` (scalars are uniform)."""
        if not isinstance(value.type, TileType):
            return Chunk.uniform(self.scalars[value])
        ref = self.tiles[value]
        if isinstance(ref, TileBuffer):
            return self.buffer_load(ref, point)
        key = (id(value), point.key)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.eval_lazy(ref, point)
            self.memo[key] = hit
        return hit

    def vec(self, c: Chunk, elem: Elem, width: int) -> ir.Value:
        """The chunk as a ``width``-lane vector (a scalar when ``width`` is 0)."""
        b = self.b
        if c.kind == "vector" or width == 0:
            return c.value
        if c.kind == "uniform":
            return splat(b, c.value, width)
        iota = ir.Constant(ir.VectorType(I64, width), list(range(width)))
        if isinstance(elem, PointerType):
            return b.gep(splat(b, c.value, width), [iota], source_etype=self.stype(elem.pointee))
        t = c.value.type
        lanes = ir.Constant(ir.VectorType(t, width), list(range(width)))
        return b.add(splat(b, c.value, width), lanes)

    def value_at(self, value: Value, point: Point) -> ir.Value:
        return self.vec(self.chunk(value, point), elem_type(value.type), point.width)

    # -- lazy ops ------------------------------------------------------------------------------
    def eval_lazy(self, ref: Lazy, point: Point) -> Chunk:
        op = ref.op
        b = self.b
        if isinstance(op, ConstantOp):
            return Chunk.uniform(self.constant(elem_type(op.result.type), op.value))
        if isinstance(op, SplatOp):
            return Chunk.uniform(self.scalars[op.src])
        if isinstance(op, ArangeOp):
            idx = point.indices[0]
            base = b.add(b.trunc(idx.base, I32), ir.Constant(I32, op.start))
            return Chunk.ramp(base) if idx.ramp else Chunk.uniform(base)
        if isinstance(op, HintOp):
            return self.chunk(op.src, point)
        if isinstance(op, (BroadcastOp, ExpandDimsOp, PermuteOp)):
            return self.chunk(op.src, self.source_point(op, point))
        if isinstance(op, LoadOp):
            return self.eval_load(op, point)
        return self.eval_elementwise(op, point)

    def source_point(self, op: Op, point: Point) -> Point:
        """The point of ``op.src`` that ``point`` of a broadcast/expand_dims/permute reads."""
        idx = point.indices
        if isinstance(op, BroadcastOp):
            src_shape = op.src.type.shape
            zero = Index(ir.Constant(I64, 0))
            new = tuple(zero if s == 1 and r != 1 else i
                        for s, r, i in zip(src_shape, op.result.type.shape, idx))
        elif isinstance(op, ExpandDimsOp):
            new = idx[:op.axis] + idx[op.axis + 1:]
        else:
            src_idx: list = [None] * len(idx)
            for i, d in enumerate(op.order):
                src_idx[d] = idx[i]
            new = tuple(src_idx)
        return Point(new, point.width)

    def eval_elementwise(self, op: Op, point: Point) -> Chunk:
        chunks = [self.chunk(v, point) for v in op.operands]
        if all(c.kind == "uniform" for c in chunks):
            return Chunk.uniform(self.scalar_op(op, [c.value for c in chunks], point))
        ramp = self._ramp_rule(op, chunks)
        if ramp is not None:
            return ramp
        vals = [self.vec(c, elem_type(v.type), point.width) for c, v in zip(chunks, op.operands)]
        return Chunk.vector(self.scalar_op(op, vals, point))

    def _ramp_rule(self, op: Op, chunks: list[Chunk]) -> Optional[Chunk]:
        """Keep ``ramp + uniform`` a ramp, so contiguous pointers stay recognisable."""
        kinds = [c.kind for c in chunks]
        if kinds.count("ramp") != 1 or any(k == "vector" for k in kinds):
            return None
        if isinstance(op, AddPtrOp):
            ptr, off = chunks
            return Chunk.ramp(self.scalar_op(op, [ptr.value, off.value]))
        if isinstance(op, BinaryOp) and op.kind in ("add", "sub") and (
                op.kind == "add" or kinds[0] == "ramp"):
            return Chunk.ramp(self.scalar_op(op, [c.value for c in chunks]))
        if isinstance(op, CastOp):
            src, dst = elem_type(op.src.type), elem_type(op.result.type)
            if isinstance(src, ScalarType) and isinstance(dst, ScalarType) and src.is_int and \
                    dst.is_int and not src.is_bool and dst.bits >= src.bits:
                return Chunk.ramp(self.scalar_op(op, [chunks[0].value]))
        return None

    def scalar_op(self, op: Op, vals: list[ir.Value], point: Optional[Point] = None) -> ir.Value:
        """An elementwise op on scalars or on equal-width vectors (at ``point`` of its tile,
        when known, which checked mode's reports number lanes by)."""
        try:
            return self._scalar_op(op, vals, point)
        except NotImplementedError as exc:   # lazy ops are emitted inside their consumer
            raise CompilationError(f"the cpu backend cannot lower op '{op.NAME}': {exc}",
                                   op.loc) from None

    def _scalar_op(self, op: Op, vals: list[ir.Value], point: Optional[Point]) -> ir.Value:
        ew, b = self.ew, self.b
        if isinstance(op, BinaryOp):
            if self.checks is not None and op.kind in ("div", "rem") and \
                    not elem_type(op.lhs.type).is_float:
                self.checks.divisor(op, vals[1], point)
            return ew.binary(op.kind, elem_type(op.lhs.type), *vals)
        if isinstance(op, UnaryOp):
            return ew.unary(op.kind, elem_type(op.src.type), *vals)
        if isinstance(op, CompareOp):
            return ew.compare(op.pred, elem_type(op.lhs.type), *vals)
        if isinstance(op, SelectOp):
            return b.select(*vals)
        if isinstance(op, CastOp):
            return ew.cast(elem_type(op.src.type), elem_type(op.result.type), vals[0])
        if isinstance(op, BitcastOp):
            return ew.bitcast(elem_type(op.src.type), elem_type(op.result.type), vals[0])
        if isinstance(op, FmaOp):
            return ew.fma(elem_type(op.a.type), *vals)
        if isinstance(op, UMulHiOp):
            return ew.umulhi(elem_type(op.lhs.type), *vals)
        if isinstance(op, AddPtrOp):
            ptr, off = vals
            off_elem = elem_type(op.offset.type)
            wide = off.type if off.type == I64 or getattr(off.type, "element", None) == I64 \
                else (ir.VectorType(I64, off.type.count) if isinstance(off.type, ir.VectorType)
                      else I64)
            if wide != off.type:
                off = b.sext(off, wide) if off_elem.is_signed else b.zext(off, wide)
            if isinstance(off.type, ir.VectorType) and not isinstance(ptr.type, ir.VectorType):
                ptr = splat(b, ptr, off.type.count)
            pointee = elem_type(op.ptr.type).pointee
            return b.gep(ptr, [off], source_etype=self.stype(pointee))
        if isinstance(op, HintOp):
            return vals[0]
        raise self.unsupported(op)

    def constant(self, elem: Elem, value: object) -> ir.Value:
        t = self.ctype(elem)
        if isinstance(elem, PointerType):
            return ir.Constant(t, None)
        if elem.is_float:
            if elem.bits < 32:     # a value of the narrow type, held as a float
                return ir.Constant(t, float(np.array(float(value)).astype(elem.np)))
            return ir.Constant(t, float(value))
        v = int(value)
        if elem.is_bool:
            return ir.Constant(I1, 1 if v else 0)
        return ir.Constant(t, v & ((1 << elem.bits) - 1))

    # -- stack buffers -------------------------------------------------------------------------
    def _offset(self, buf: TileBuffer, point: Point) -> tuple[ir.Value, Optional[int]]:
        b = self.b
        off: ir.Value = ir.Constant(I64, 0)
        ramp_stride = None
        for idx, stride in zip(point.indices, buf.strides):
            if idx.ramp:
                ramp_stride = stride
            if isinstance(idx.base, ir.Constant) and idx.base.constant == 0:
                continue
            term = idx.base if stride == 1 else b.mul(idx.base, ir.Constant(I64, stride))
            off = term if isinstance(off, ir.Constant) and off.constant == 0 else b.add(off, term)
        return off, ramp_stride

    def buffer_load(self, buf: TileBuffer, point: Point) -> Chunk:
        b = self.b
        bt = self.btype(buf.elem)
        off, ramp_stride = self._offset(buf, point)
        ptr = b.gep(buf.ptr, [off], source_etype=bt)
        align = self.nbytes(buf.elem) if not isinstance(buf.elem, PointerType) else 8
        if ramp_stride is None:
            raw = b.load(ptr, typ=bt, align=align)
            kind = "uniform"
        elif ramp_stride == 1:
            raw = b.load(ptr, typ=ir.VectorType(bt, point.width), align=align)
            kind = "vector"
        else:
            w = point.width
            steps = ir.Constant(ir.VectorType(I64, w), [i * ramp_stride for i in range(w)])
            ptrs = b.gep(splat(b, ptr, w), [steps], source_etype=bt)
            raw = self.masked_gather(ptrs, bt, align, None)
            kind = "vector"
        if isinstance(buf.elem, ScalarType) and buf.elem.is_bool:
            raw = b.icmp_unsigned("!=", raw, const_like(raw, 0))
        return Chunk(kind, raw)

    def buffer_store(self, buf: TileBuffer, point: Point, value: ir.Value) -> None:
        """Store a compute-form value (``point.width`` lanes along the last dim)."""
        b = self.b
        bt = self.btype(buf.elem)
        if isinstance(buf.elem, ScalarType) and buf.elem.is_bool:
            value = b.zext(value, ir.VectorType(I8, point.width) if point.width else I8)
        off, _ = self._offset(buf, point)
        align = self.nbytes(buf.elem) if not isinstance(buf.elem, PointerType) else 8
        b.store(value, b.gep(buf.ptr, [off], source_etype=bt), align=align)

    # -- global memory -------------------------------------------------------------------------
    def when_all_on(self, mask: ir.Value):
        """``b.if_else`` on every lane of the vector ``mask`` being on: contiguous accesses
        then use plain vector loads and stores, which stream far faster than masked ones
        (measured 1.5x on vector add, Zen 5) -- most chunks of a masked tile are whole."""
        fn = intrinsic(self.module, "llvm.vector.reduce.and", I1, [mask.type], [mask.type])
        return self.b.if_else(self.b.call(fn, [mask]), likely=True)

    def masked_gather(self, ptrs: ir.Value, et: ir.Type, align: int,
                      mask: Optional[ir.Value]) -> ir.Value:
        w = ptrs.type.count
        vt = ir.VectorType(et, w)
        mt = ir.VectorType(I1, w)
        mask = mask if mask is not None else ir.Constant(mt, [1] * w)
        fn = intrinsic(self.module, "llvm.masked.gather", vt, [ptrs.type, I32, mt, vt],
                       [vt, ptrs.type])
        return self.b.call(fn, [ptrs, ir.Constant(I32, align), mask, ir.Constant(vt, None)])

    def eval_load(self, op: LoadOp, point: Point) -> Chunk:
        b = self.b
        elem = elem_type(op.result.type)
        st = self.stype(elem)
        align = self.nbytes(elem)
        p = self.chunk(op.ptr, point)
        m = self.chunk(op.mask, point) if op.mask is not None else None
        other = self.chunk(op.other, point) if op.other is not None else None
        w = point.width
        if self.checks is not None:
            self.check_access(op, p, m, align, point)
        if p.kind == "uniform" and (m is None or m.kind == "uniform"):
            loaded = self.guarded_scalar_load(p.value, st, align, None if m is None else m.value)
            value = self.ew.from_storage(elem, loaded)
            if m is not None and other is not None and other.kind == "uniform":
                return Chunk.uniform(b.select(m.value, value, other.value))
            if m is not None and other is not None:
                return Chunk.vector(b.select(m.value, splat(b, value, w), self.vec(other, elem, w)))
            return Chunk.uniform(value)
        mask = self.vec(m, elem_type(op.mask.type), w) if m is not None else None
        vt = ir.VectorType(st, w)
        if p.kind == "ramp":
            if mask is None:
                raw = b.load(p.value, typ=vt, align=align)
            else:
                mt = mask.type
                fn = intrinsic(self.module, "llvm.masked.load", vt, [p.value.type, I32, mt, vt],
                               [vt, p.value.type])
                with self.when_all_on(mask) as (full, partial):
                    with full:
                        whole = b.load(p.value, typ=vt, align=align)
                        whole_block = b.block
                    with partial:
                        some = b.call(fn, [p.value, ir.Constant(I32, align), mask,
                                           ir.Constant(vt, None)])
                        some_block = b.block
                raw = b.phi(vt)
                raw.add_incoming(whole, whole_block)
                raw.add_incoming(some, some_block)
        else:
            ptrs = self.vec(p, elem_type(op.ptr.type), w)
            raw = self.masked_gather(ptrs, st, align, mask)
        value = self.ew.from_storage(elem, raw)
        if mask is not None and other is not None:
            value = b.select(mask, value, self.vec(other, elem, w))
        return Chunk.vector(value)

    def check_access(self, op: Op, p: Chunk, m: Optional[Chunk], elem_bytes: int,
                     point: Point) -> None:
        """Checked mode: the access of ``op`` through ``p`` where ``m`` is on (one address
        when both are uniform, else every lane of the chunk)."""
        if p.kind == "uniform" and (m is None or m.kind == "uniform"):
            self.checks.access(op, p.value, None if m is None else m.value, elem_bytes, point)
            return
        w = point.width
        mask = self.vec(m, elem_type(op.mask.type), w) if m is not None else None
        self.checks.access(op, self.vec(p, elem_type(op.ptr.type), w), mask, elem_bytes, point)

    def guarded_scalar_load(self, ptr: ir.Value, st: ir.Type, align: int,
                            mask: Optional[ir.Value]) -> ir.Value:
        """Load one element, only when ``mask`` (if any) is 1; zero otherwise."""
        b = self.b
        if mask is None:
            return b.load(ptr, typ=st, align=align)
        before = b.block
        with b.if_then(mask):
            loaded = b.load(ptr, typ=st, align=align)
            then_block = b.block
        phi = b.phi(st)
        phi.add_incoming(ir.Constant(st, None), before)
        phi.add_incoming(loaded, then_block)
        return phi

    def emit_store(self, elem: Elem, p: Chunk, v: Chunk, m: Optional[Chunk], ptr_elem: Elem,
                   mask_elem: Optional[Elem], w: int) -> None:
        """Store ``v`` through ``p`` where ``m`` is 1 (the shared core of store ops)."""
        b = self.b
        align = self.nbytes(elem)
        if p.kind == "uniform" and v.kind == "uniform" and (m is None or m.kind == "uniform"):
            raw = self.ew.to_storage(elem, v.value)
            if m is None:
                b.store(raw, p.value, align=align)
            else:
                with b.if_then(m.value):
                    b.store(raw, p.value, align=align)
            return
        raw = self.ew.to_storage(elem, self.vec(v, elem, w))
        mask = self.vec(m, mask_elem, w) if m is not None else None
        mt = ir.VectorType(I1, w)
        if p.kind == "ramp":
            if mask is None:
                b.store(raw, p.value, align=align)
                return
            fn = intrinsic(self.module, "llvm.masked.store", ir.VoidType(),
                           [raw.type, p.value.type, I32, mt], [raw.type, p.value.type])
            with self.when_all_on(mask) as (full, partial):
                with full:
                    b.store(raw, p.value, align=align)
                with partial:
                    b.call(fn, [raw, p.value, ir.Constant(I32, align), mask])
            return
        ptrs = self.vec(p, ptr_elem, w)
        mask = mask if mask is not None else ir.Constant(mt, [1] * w)
        fn = intrinsic(self.module, "llvm.masked.scatter", ir.VoidType(),
                       [raw.type, ptrs.type, I32, mt], [raw.type, ptrs.type])
        b.call(fn, [raw, ptrs, ir.Constant(I32, align), mask])
