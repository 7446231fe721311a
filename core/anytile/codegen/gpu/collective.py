"""Ops where threads exchange data: layout conversions, reductions, scans and ``dot``.

* conversion: every thread writes its registers to shared memory at their row-major index,
  a barrier, every thread reads the registers of the new layout;
* reduce: combine a thread's registers along the axis, then across lanes with butterfly
  shuffles (only over lanes holding different elements), then across warps through shared
  memory; every thread that held part of a row ends with the whole result (a
  ``SliceLayout`` of the operand's layout);
* scan: convert to a layout holding the whole scanned axis in each thread, scan there, convert
  back;
* dot: both operands go to shared memory; each thread accumulates its output registers with
  one FMA per (register, k), in fp32 for 16-bit inputs (exact products, fp32 accumulation).

Every use of shared memory starts with a barrier, so consecutive uses may share addresses.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...ir import ops
from ...ir.types import ScalarType, elem_type, shape_of
from ..llvm.types import I8, I32, I64
from .layouts import BlockedLayout, Layout, SliceLayout, blocked_of, default_blocked, dim_registers, register_indices


def _llvm_bytes(t: ir.Type) -> int:
    if isinstance(t, ir.IntType):
        return max(1, t.width // 8)
    if isinstance(t, ir.PointerType):
        return 8
    return {"half": 2, "float": 4, "double": 8}[str(t)]


class CollectiveLowering:
    """Mixin of ``KernelLowering``: convert, reduce, scan, dot, reshape (through shared)."""

    # -- shared memory -------------------------------------------------------------------------
    def reserve_shared(self, nbytes: int) -> None:
        """Scratch space of ``nbytes`` at ``smem_base`` (after the pipelined buffers)."""
        self.shared_bytes = max(self.shared_bytes, self.persistent_shared + (nbytes + 15) // 16 * 16)

    def shared_ptr(self, t: ir.Type, index: ir.Value, region: int = 0) -> ir.Value:
        base = self.smem_base if region == 0 else self.b.gep(self.smem_base, [ir.Constant(I32, region)],
                                                              source_etype=I8)
        return self.b.gep(base, [index], source_etype=self.shared_type(t))

    def shared_type(self, t: ir.Type) -> ir.Type:
        if isinstance(t, ir.IntType) and t.width == 1:
            return I8
        if isinstance(t, ir.PointerType):
            return I64
        return t

    def shared_store(self, value: ir.Value, index: ir.Value, region: int = 0) -> None:
        t = value.type
        if isinstance(t, ir.IntType) and t.width == 1:
            value = self.b.zext(value, I8)
        elif isinstance(t, ir.PointerType):
            value = self.b.ptrtoint(value, I64)
        self.b.store(value, self.shared_ptr(t, index, region))

    def shared_load(self, t: ir.Type, index: ir.Value, region: int = 0) -> ir.Value:
        raw = self.b.load(self.shared_ptr(t, index, region), typ=self.shared_type(t))
        if isinstance(t, ir.IntType) and t.width == 1:
            return self.b.trunc(raw, t)
        if isinstance(t, ir.PointerType):
            return self.b.inttoptr(raw, t)
        return raw

    def broadcast_from_first_thread(self, value: ir.Value) -> ir.Value:
        self.reserve_shared(8)
        self.target.barrier(self.b)
        with self.b.if_then(self.first_thread()):
            self.shared_store(value, ir.Constant(I32, 0))
        self.target.barrier(self.b)
        return self.shared_load(value.type, ir.Constant(I32, 0))

    # -- conversions ---------------------------------------------------------------------------
    def convert(self, regs: Any, want: Layout) -> Any:
        if regs.layout == want:
            return regs
        return self.through_shared(regs, want, regs.shape)

    def through_shared(self, src: Any, want: Layout, shape: tuple) -> Any:
        """``src`` re-distributed as ``want`` over ``shape`` (same row-major elements)."""
        t = src.values[0].type
        numel = 1
        for s in shape:
            numel *= s
        self.reserve_shared(numel * _llvm_bytes(self.shared_type(t)))
        self.target.barrier(self.b)
        for v, c in zip(src.values, self.coords(src.layout, src.shape)):
            self.shared_store(v, self.linear_index(c, src.shape))
        self.target.barrier(self.b)
        values = [self.shared_load(t, self.linear_index(c, shape)) for c in self.coords(want, shape)]
        return self.new_regs(want, shape, values)

    # -- combine regions -----------------------------------------------------------------------
    def apply_region(self, block: Any, args: list) -> list:
        self.scopes.append({})
        try:
            for a, v in zip(block.args, args):
                self.bind(a, v)
            self.lower_block(block)
            return [self.scalar(v) for v in block.terminator.values]
        finally:
            self.scopes.pop()

    def combine(self, op: ops.Op, lhs: list, rhs: list) -> list:
        return self.apply_region(op.combine, list(lhs) + list(rhs))

    def shuffle_xor(self, v: ir.Value, mask: int) -> ir.Value:
        b, t = self.b, v.type
        if t == I32:
            return self.target.shuffle_xor(b, v, mask)
        if isinstance(t, ir.PointerType):
            return b.inttoptr(self.shuffle_xor(b.ptrtoint(v, I64), mask), t)
        if isinstance(t, ir.FloatType):
            return b.bitcast(self.shuffle_xor(b.bitcast(v, I32), mask), t)
        if isinstance(t, ir.DoubleType):
            return b.bitcast(self.shuffle_xor(b.bitcast(v, I64), mask), t)
        if isinstance(t, ir.IntType) and t.width == 64:
            lo = self.shuffle_xor(b.trunc(v, I32), mask)
            hi = self.shuffle_xor(b.trunc(b.lshr(v, ir.Constant(I64, 32)), I32), mask)
            return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
        if isinstance(t, ir.IntType):
            return b.trunc(self.shuffle_xor(b.zext(v, I32), mask), t)
        raise NotImplementedError(f"shuffle of {t}")

    # -- reduce --------------------------------------------------------------------------------
    def lower_reduce(self, op: ops.ReduceOp) -> None:
        first = self.tile(op.srcs[0])
        layout, shape, axis = first.layout, first.shape, op.axis
        srcs = [first] + [self.tile(s, layout) for s in op.srcs[1:]]
        root, root_shape, dims = blocked_of(layout, shape)
        ra = dims[axis]
        distinct = min(dim_registers(layout, shape)[axis], shape[axis])
        out_shape = shape[:axis] + shape[axis + 1:]
        out_layout = SliceLayout(layout, axis)
        groups: dict[tuple, list[int]] = {}
        for i, j in enumerate(register_indices(layout, shape)):
            if j[axis] < distinct:
                groups.setdefault(j[:axis] + j[axis + 1:], []).append(i)
        keys = register_indices(out_layout, out_shape) if out_shape else [()]
        partial: dict[tuple, list] = {}
        for key in keys:
            regs = groups[key]
            acc = [s.values[regs[0]] for s in srcs]
            for i in regs[1:]:
                acc = self.combine(op, acc, [s.values[i] for s in srcs])
            partial[key] = acc
        bit, stride = 1, root.lane_stride(ra)
        while bit < root.distinct_lanes(root_shape, ra):
            for key in keys:
                other = [self.shuffle_xor(v, stride * bit) for v in partial[key]]
                partial[key] = self.combine(op, partial[key], other)
            bit *= 2
        n_warps = root.distinct_warps(root_shape, ra)
        if n_warps > 1:
            partial = self.reduce_across_warps(op, partial, keys, out_layout, out_shape, root, ra, n_warps)
        for r in range(len(op.results)):
            if out_shape:
                regs = self.new_regs(out_layout, out_shape, [partial[k][r] for k in keys])
                self.set_result(op, self.convert(regs, op.results[r].type.layout), r)
            else:
                self.set_result(op, partial[()][r], r)

    def reduce_across_warps(self, op: ops.Op, partial: dict, keys: list, out_layout: Layout,
                            out_shape: tuple, root: BlockedLayout, ra: int, n_warps: int) -> dict:
        b = self.b
        numel = 1
        for s in out_shape:
            numel *= s
        sizes = [_llvm_bytes(self.shared_type(v.type)) for v in partial[keys[0]]]
        regions, offset = [], 0
        for size in sizes:
            regions.append(offset)
            offset += (numel * n_warps * size + 15) // 16 * 16
        self.reserve_shared(offset)
        warp_a = b.and_(b.udiv(self.warp, ir.Constant(I32, root.warp_stride(ra))), ir.Constant(I32, n_warps - 1))
        elems = [self.linear_index(c, out_shape) for c in self.coords(out_layout, out_shape)] \
            if out_shape else [ir.Constant(I32, 0)]
        self.target.barrier(b)
        for key, e in zip(keys, elems):
            slot = b.add(b.mul(e, ir.Constant(I32, n_warps)), warp_a)
            for v, region in zip(partial[key], regions):
                self.shared_store(v, slot, region)
        self.target.barrier(b)
        out = {}
        for key, e in zip(keys, elems):
            base = b.mul(e, ir.Constant(I32, n_warps))
            acc = None
            for w in range(n_warps):
                slot = b.add(base, ir.Constant(I32, w))
                vals = [self.shared_load(v.type, slot, region) for v, region in zip(partial[key], regions)]
                acc = vals if acc is None else self.combine(op, acc, vals)
            out[key] = acc
        return out

    # -- scan ----------------------------------------------------------------------------------
    def axis_in_thread_layout(self, shape: tuple, axis: int) -> BlockedLayout:
        flat = tuple(1 if d == axis else s for d, s in enumerate(shape))
        base = default_blocked(flat, self.laid.num_warps, self.laid.warp_size)
        spt = list(base.size_per_thread)
        spt[axis] = shape[axis]
        return BlockedLayout(tuple(spt), base.threads_per_warp, base.warps_per_cta, base.order)

    def lower_scan(self, op: ops.ScanOp) -> None:
        shape, axis = shape_of(op.srcs[0].type), op.axis
        layout = self.axis_in_thread_layout(shape, axis)
        srcs = [self.tile(s, layout) for s in op.srcs]
        indices = register_indices(layout, shape)
        groups: dict[tuple, list[int]] = {}
        for i, j in enumerate(indices):
            groups.setdefault(j[:axis] + j[axis + 1:], []).append(i)
        results = [[None] * len(indices) for _ in srcs]
        for regs in groups.values():
            order = list(reversed(regs)) if op.reverse else regs
            acc = None
            for i in order:
                vals = [s.values[i] for s in srcs]
                acc = vals if acc is None else self.combine(op, acc, vals)
                for r, v in enumerate(acc):
                    results[r][i] = v
        for r, res in enumerate(op.results):
            regs = self.new_regs(layout, shape, results[r])
            self.set_result(op, self.convert(regs, res.type.layout), r)

    # -- dot -----------------------------------------------------------------------------------
    def lower_dot(self, op: ops.DotOp) -> None:
        from .mma import mma_layout, mma_warps, wgmma_operands
        if wgmma_operands(op) and self.target.has_wgmma:
            self.lower_dot_wgmma(op)
            return
        warps = mma_warps(op, self.laid.num_warps, self.laid.warp_size) if self.target.has_mma else None
        if warps is not None and op.result.type.layout == mma_layout(warps):
            self.lower_dot_mma(op, warps)
            return
        b = self.b
        layout = op.result.type.layout
        a, bm = self.tile(op.a), self.tile(op.b)
        acc = self.tile(op.acc, layout)
        (M, K), (_, N) = a.shape, bm.shape
        acc_elem = elem_type(op.acc.type)
        in_elem = elem_type(op.a.type)
        ta, tb = a.values[0].type, bm.values[0].type
        size_a = (M * K * _llvm_bytes(ta) + 15) // 16 * 16
        self.reserve_shared(size_a + K * N * _llvm_bytes(tb))
        self.target.barrier(b)
        for v, c in zip(a.values, self.coords(a.layout, a.shape)):
            self.shared_store(v, self.linear_index(c, a.shape))
        for v, c in zip(bm.values, self.coords(bm.layout, bm.shape)):
            self.shared_store(v, self.linear_index(c, bm.shape), size_a)
        self.target.barrier(b)
        indices = register_indices(layout, (M, N))
        coords = self.coords(layout, (M, N))
        row_of, col_of = {}, {}
        for j, c in zip(indices, coords):
            row_of.setdefault(j[0], c[0])
            col_of.setdefault(j[1], c[1])
        row_base = {j0: b.mul(m, ir.Constant(I32, K)) for j0, m in row_of.items()}
        values = list(acc.values)
        ct = values[0].type
        for k in range(K):
            kc = ir.Constant(I32, k)
            av = {j0: self.dot_operand(self.shared_load(ta, b.add(base, kc)), in_elem, acc_elem, ct)
                  for j0, base in row_base.items()}
            bv = {j1: self.dot_operand(self.shared_load(tb, b.add(ir.Constant(I32, k * N), n), size_a),
                                       elem_type(op.b.type), acc_elem, ct)
                  for j1, n in col_of.items()}
            for i, j in enumerate(indices):
                if acc_elem.is_float:
                    values[i] = self.ew.call("llvm.fma", [av[j[0]], bv[j[1]], values[i]])
                else:
                    values[i] = b.add(values[i], b.mul(av[j[0]], bv[j[1]]))
        if acc_elem.is_float and acc_elem.name in ("f16", "bf16"):
            values = [self.ew.round_to(acc_elem, v) for v in values]
        self.set_result(op, self.new_regs(layout, (M, N), values))

    def dot_operand(self, v: ir.Value, elem: ScalarType, acc_elem: ScalarType, t: ir.Type) -> ir.Value:
        """An operand value in the accumulator's compute type."""
        if v.type == t:
            return v
        return self.ew.cast(elem, acc_elem, v)
