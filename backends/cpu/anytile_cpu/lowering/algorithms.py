"""Reductions, scans and ``dot``: the tile ops that are more than one loop over elements.

* ``reduce`` along the last axis: SIMD accumulators over W-lane chunks, then a shuffle tree
  (``combine`` inlined at each step) -- when ``combine`` is one commutative binary op;
  otherwise elements are combined one by one in index order.  Along another axis: the
  result is walked in SIMD chunks and the reduced axis is a scalar loop, so any combine
  keeps index order and still uses vectors.
* ``scan``: the same two shapes, sequential along the scanned axis.
* ``dot``: a register-blocked micro-kernel: MR rows x NV vectors of accumulators stay in
  registers across the k loop, each step one broadcast of A and NV vector loads of B
  feeding fused multiply-adds (integers: multiply + add in the accumulator type).  bf16
  inputs on a cpu with AVX-512 BF16 take two k steps per ``vdpbf16ps`` instead, from B
  repacked as pairs of rows.
"""
from __future__ import annotations

from llvmlite import ir

from anytile.codegen.llvm.types import (F32, I32, I64, const_like, intrinsic, splat,
                                        vector_width)
from anytile.ir import (BinaryOp, Block, ConstantOp, DotOp, ReduceOp, ScanOp, YieldOp,
                        elem_type)
from anytile.ir.types import i32 as i32_type

from .plan import ELEMENTWISE_OPS
from .values import Index, Point, TileBuffer

__all__ = ["TileAlgorithms"]


class _BFloatType(ir.Type):
    """LLVM's ``bfloat``, which llvmlite lacks: here only the operand type of ``vdpbf16ps``."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloatType)

    def __hash__(self) -> int:
        return hash(_BFloatType)


_BFLOAT = _BFloatType()


def _bf16_pair(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """Two f32s (scalars or vectors) holding bf16 values as i32s of two bf16s, ``lo`` in
    the low half: a bf16 is the high half of its f32, so no rounding happens."""
    t = ir.VectorType(I32, lo.type.count) if isinstance(lo.type, ir.VectorType) else I32
    lo, hi = b.bitcast(lo, t), b.bitcast(hi, t)
    return b.or_(b.lshr(lo, const_like(lo, 16)), b.and_(hi, const_like(hi, 0xFFFF0000)))


def _insert(indices: tuple, axis: int, index: Index) -> tuple:
    return indices[:axis] + (index,) + indices[axis:]


def _pow2_divisor(n: int, limit: int) -> int:
    d = 1
    while d * 2 <= limit and n % (d * 2) == 0:
        d *= 2
    return d


class TileAlgorithms:
    """Mixin of ``ProgramLowering``."""

    # -- combine regions -----------------------------------------------------------------------
    def combine(self, region: Block, lhs: list, rhs: list) -> list:
        """Inline ``region`` on scalars or equal-width vectors; returns the yielded values."""
        values = list(lhs) + list(rhs)
        width = max(vector_width(v) for v in values)    # an operand may be uniform (scalar)
        for arg, v in zip(region.args, values):
            self.scalars[arg] = splat(self.b, v, width) if width and not vector_width(v) else v
        for op in region.ops:
            if isinstance(op, YieldOp):
                return [self.scalars[v] for v in op.values]
            if isinstance(op, ConstantOp):
                self.scalars[op.result] = splat(self.b, self.constant(op.result.type, op.value),
                                                width)
            elif isinstance(op, ELEMENTWISE_OPS):
                vals = [self.scalars[v] for v in op.operands]
                if width:           # a value made from constants alone is still a scalar
                    vals = [v if vector_width(v) else splat(self.b, v, width) for v in vals]
                self.scalars[op.result] = self.scalar_op(op, vals)
            else:
                raise self.unsupported(op)
        raise self.unsupported(region.ops[-1] if region.ops else YieldOp())

    @staticmethod
    def is_simple_commutative(region: Block) -> bool:
        ops = region.ops
        if len(ops) != 2 or not isinstance(ops[0], BinaryOp) or not isinstance(ops[1], YieldOp):
            return False
        first = ops[0]
        return first.is_commutative and len(region.args) == 2 and \
            {id(first.lhs), id(first.rhs)} == {id(a) for a in region.args} and \
            len(ops[1].values) == 1 and ops[1].values[0] is first.result

    def _slots_for(self, values: list) -> list:
        slots = [self.stack_slot(v.type) for v in values]
        for s, v in zip(slots, values):
            self.b.store(v, s)
        return slots

    def _fold_into(self, region: Block, slots: list, values: list, values_first: bool = False):
        acc = [self.load_slot(s) for s in slots]
        new = self.combine(region, values, acc) if values_first else \
            self.combine(region, acc, values)
        for s, v in zip(slots, new):
            self.b.store(v, s)

    # -- reduce --------------------------------------------------------------------------------
    def lower_reduce(self, op: ReduceOp) -> None:
        shape = op.srcs[0].type.shape
        axis = op.axis
        out_shape = shape[:axis] + shape[axis + 1:]
        outs = [self.new_buffer(out_shape, elem_type(s.type)) for s in op.srcs] if out_shape \
            else None
        if axis == len(shape) - 1:
            def row(p: Point) -> None:
                vals = self._reduce_last_axis(op, p.indices, shape[-1])
                if outs is None:
                    for r, v in zip(op.results, vals):
                        self.scalars[r] = v
                else:
                    for buf, v in zip(outs, vals):
                        self.buffer_store(buf, p, v)
            if out_shape:
                self.for_each_point(out_shape, row, vector=False)
            else:
                self.memo = {}
                row(Point((), 0))
        else:
            def column(p: Point) -> None:
                at = lambda k: Point(_insert(p.indices, axis, Index(k)), p.width)  # noqa: E731
                slots = self._slots_for([self.value_at(s, at(ir.Constant(I64, 0))) for s in op.srcs])
                if shape[axis] > 1:
                    with self.loop(shape[axis] - 1) as k:
                        kk = self.b.add(k, ir.Constant(I64, 1))
                        self._fold_into(op.combine, slots, [self.value_at(s, at(kk)) for s in op.srcs])
                for buf, s in zip(outs, slots):
                    self.buffer_store(buf, p, self.load_slot(s))
            self.for_each_point(out_shape, column)
        if outs is not None:
            for r, buf in zip(op.results, outs):
                self.tiles[r] = buf

    def _reduce_last_axis(self, op: ReduceOp, outer: tuple, n: int) -> list:
        b = self.b
        w = self.chunk_width(n) if self.is_simple_commutative(op.combine) else 0
        at = lambda j, ramp: Point(outer + (Index(j, ramp),), w if ramp else 0)  # noqa: E731
        zero = ir.Constant(I64, 0)
        step = w or 1
        slots = self._slots_for([self.value_at(s, at(zero, w > 0)) for s in op.srcs])
        if n > step:
            with self.loop(n - step, step) as j:
                jj = b.add(j, ir.Constant(I64, step))
                self._fold_into(op.combine, slots, [self.value_at(s, at(jj, w > 0)) for s in op.srcs])
        acc = [self.load_slot(s) for s in slots]
        while w > 1:
            h = w // 2
            lo = [b.shuffle_vector(v, ir.Constant(v.type, None),
                                   ir.Constant(ir.VectorType(I32, h), list(range(h)))) for v in acc]
            hi = [b.shuffle_vector(v, ir.Constant(v.type, None),
                                   ir.Constant(ir.VectorType(I32, h), list(range(h, w)))) for v in acc]
            acc = self.combine(op.combine, lo, hi)
            w = h
        return [b.extract_element(v, ir.Constant(I32, 0)) if vector_width(v) else v for v in acc]

    # -- scan ----------------------------------------------------------------------------------
    def lower_scan(self, op: ScanOp) -> None:
        b = self.b
        shape = op.srcs[0].type.shape
        axis, n = op.axis, shape[op.axis]
        outs = [self.new_buffer(shape, elem_type(s.type)) for s in op.srcs]
        rest = shape[:axis] + shape[axis + 1:]
        vector = axis != len(shape) - 1

        def line(p: Point) -> None:
            at = lambda k: Point(_insert(p.indices, axis, Index(k)), p.width)  # noqa: E731
            first = ir.Constant(I64, n - 1 if op.reverse else 0)
            vals = [self.value_at(s, at(first)) for s in op.srcs]
            for buf, v in zip(outs, vals):
                self.buffer_store(buf, at(first), v)
            slots = self._slots_for(vals)
            if n > 1:
                with self.loop(n - 1) as k:
                    kk = b.sub(ir.Constant(I64, n - 2), k) if op.reverse else \
                        b.add(k, ir.Constant(I64, 1))
                    self._fold_into(op.combine, slots, [self.value_at(s, at(kk)) for s in op.srcs])
                    for buf, s in zip(outs, slots):
                        self.buffer_store(buf, at(kk), self.load_slot(s))
        self.for_each_point(rest, line, vector=vector)
        for r, buf in zip(op.results, outs):
            self.tiles[r] = buf

    # -- dot -----------------------------------------------------------------------------------
    def lower_dot(self, op: DotOp) -> None:
        b = self.b
        a, bm = self.buffer_of(op.a), self.buffer_of(op.b)
        (m_size, k_size), n_size = a.shape, bm.shape[1]
        acc_elem = elem_type(op.acc.type)
        a_elem, b_elem = elem_type(op.a.type), elem_type(op.b.type)
        mr = _pow2_divisor(m_size, 4)
        vw = self.chunk_width(n_size) or 1
        nv = _pow2_divisor(n_size // vw, 4 if self.lanes >= 16 else 2)
        is_float = acc_elem.is_float
        fma = None
        acc_value, result = op.acc, op.result
        folded = self.plan.dot_accumulates.get(id(op))
        if folded is not None:      # x + dot(a, b, 0): accumulate onto x
            add, acc_value = folded
            result = add.result
            self.lowered_with_other.add(id(add))
        if id(op) in self.plan.dot_in_place:   # each block of acc is read before it is written
            out = self.tiles[acc_value]
        else:
            out = self.new_buffer((m_size, n_size), acc_elem)
        pairs = self._bf16_pairs_of(bm) if self._uses_bf16_pairs(op, vw, k_size) else None
        with self.loop(m_size, mr) as m0:
            with self.loop(n_size, vw * nv) as n0:
                rows = [b.add(m0, ir.Constant(I64, i)) for i in range(mr)]
                cols = [b.add(n0, ir.Constant(I64, j * vw)) for j in range(nv)]
                points = [[Point((Index(r), Index(c, True)), vw) for c in cols] for r in rows]
                slots = [self._slots_for([self._as_vector(self.value_at(acc_value, p), vw)
                                          for p in prow]) for prow in points]
                if pairs is not None:
                    self._bf16_pair_steps(a, pairs, rows, cols, slots)
                else:
                    with self.loop(k_size) as k:
                        bvec = [self._as_vector(self.ew.cast(b_elem, acc_elem, self.buffer_load(
                            bm, Point((Index(k), Index(c, True)), vw)).value), vw) for c in cols]
                        for i, r in enumerate(rows):
                            av = self.buffer_load(a, Point((Index(r), Index(k)), 0)).value
                            av = splat(b, self.ew.cast(a_elem, acc_elem, av), vw)
                            for j in range(nv):
                                acc = self.load_slot(slots[i][j])
                                if is_float:
                                    fma = fma or intrinsic(self.module, "llvm.fma", acc.type,
                                                           [acc.type] * 3, [acc.type])
                                    acc = b.call(fma, [av, bvec[j], acc])
                                else:
                                    acc = b.add(acc, b.mul(av, bvec[j]))
                                b.store(acc, slots[i][j])
                for i, prow in enumerate(points):
                    for j, p in enumerate(prow):
                        v = self.load_slot(slots[i][j])
                        if is_float:
                            v = self.ew.round_to(acc_elem, v)
                        self.buffer_store(out, p, v)
        self.tiles[result] = out

    # -- dot on AVX-512 BF16 --------------------------------------------------------------------
    def _uses_bf16_pairs(self, op: DotOp, vw: int, k_size: int) -> bool:
        """bf16 x bf16 -> f32 on ``vdpbf16ps`` (16 lanes, two k steps per instruction) where the
        target has it.  Products of bf16 values are exact in f32, so only the order of the
        additions differs from the FMA loop (and denormal inputs/outputs flush to zero)."""
        return self.bf16_pairs and vw == 16 and k_size % 2 == 0 and \
            elem_type(op.a.type).name == elem_type(op.b.type).name == "bf16" and \
            elem_type(op.acc.type).name == "f32"

    def _bf16_pairs_of(self, bm: TileBuffer) -> TileBuffer:
        """B (k x n, f32 holding bf16 values) as (k/2 x n) i32: rows 2p and 2p+1 of a column
        side by side as bf16 (low half: row 2p), the operand layout of ``vdpbf16ps``."""
        b = self.b
        k_size, n_size = bm.shape
        pairs = self.new_buffer((k_size // 2, n_size), i32_type)

        def pack(p: Point) -> None:
            kp, col = p.indices
            lo, hi = (self.buffer_load(bm, Point((Index(b.add(b.mul(kp.base, ir.Constant(
                I64, 2)), ir.Constant(I64, d))), col), p.width)).value for d in (0, 1))
            self.buffer_store(pairs, p, _bf16_pair(b, lo, hi))
        self.for_each_point(pairs.shape, pack)
        return pairs

    def _bf16_pair_steps(self, a: TileBuffer, pairs: TileBuffer, rows: list, cols: list,
                         slots: list) -> None:
        """The k loop of one register block, two k steps per ``vdpbf16ps``: each row's pair
        of A values broadcast against each column vector of B pairs."""
        b = self.b
        f32x16, bf16x32 = ir.VectorType(F32, 16), ir.VectorType(_BFLOAT, 32)
        dp = intrinsic(self.module, "llvm.x86.avx512bf16.dpbf16ps.512", f32x16,
                       [f32x16, bf16x32, bf16x32])
        with self.loop(pairs.shape[0]) as kp:
            bvec = [b.bitcast(self.buffer_load(pairs, Point((Index(kp), Index(c, True)), 16))
                              .value, bf16x32) for c in cols]
            k0 = b.mul(kp, ir.Constant(I64, 2))
            ks = (k0, b.add(k0, ir.Constant(I64, 1)))
            for i, r in enumerate(rows):
                lo, hi = (self.buffer_load(a, Point((Index(r), Index(k)), 0)).value for k in ks)
                av = b.bitcast(splat(b, _bf16_pair(b, lo, hi), 16), bf16x32)
                for j, bv in enumerate(bvec):
                    b.store(b.call(dp, [self.load_slot(slots[i][j]), av, bv]), slots[i][j])

    def _as_vector(self, v: ir.Value, width: int) -> ir.Value:
        return v if vector_width(v) else splat(self.b, v, width)
