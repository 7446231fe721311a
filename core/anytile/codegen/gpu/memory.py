"""Global memory ops of the GPU lowering: vectorised, masked loads and stores, and atomics.

A thread's registers along the fastest dimension come in runs of ``size_per_thread``
consecutive elements; when the axis analysis proved ``vector`` consecutive, aligned
addresses and a mask uniform over them (``assign.py`` recorded the width), a run is read or
written with one ``<vector x T>`` access (``ld.global.v4.f32``).  A masked access is a branch
around it (the backend turns it into a predicated instruction); masked-off registers of a
load take ``other``.  Replicated elements are stored and updated by one thread only.
"""
from __future__ import annotations

from typing import Optional

from llvmlite import ir

from ...ir import ops
from ...ir.types import TileType, elem_type, shape_of
from ..llvm.types import I32
from .layouts import BlockedLayout, Layout, register_indices


class MemoryLowering:
    """Mixin of ``KernelLowering``: load, store, atomic_rmw, atomic_cas."""

    # -- helpers -------------------------------------------------------------------------------
    def access_groups(self, op: ops.Op, layout: Layout, shape: tuple) -> tuple[int, list[list[int]]]:
        """(vector width, register indices grouped into accesses)."""
        width = self.laid.vector.get(op, 1)
        n = len(register_indices(layout, shape))
        if isinstance(layout, BlockedLayout):
            width = min(width, layout.size_per_thread[-1])
        if not isinstance(layout, BlockedLayout) or width <= 1 or \
                layout.order[0] != len(shape) - 1 or layout.size_per_thread[-1] % width or \
                shape[-1] < layout.size_per_thread[-1]:
            return 1, [[i] for i in range(n)]
        return width, [list(range(i, i + width)) for i in range(0, n, width)]

    def predicate(self, parts: list) -> Optional[ir.Value]:
        pred = None
        for p in parts:
            if p is not None:
                pred = p if pred is None else self.b.and_(pred, p)
        return pred

    def first_thread(self) -> ir.Value:
        key = ("first-thread",)
        if key not in self._thread_consts:
            self._thread_consts[key] = self.entry_b.icmp_unsigned("==", self.tid, ir.Constant(I32, 0))
        return self._thread_consts[key]

    def guarded(self, pred: Optional[ir.Value], emit, fallback: list) -> list:
        """Run ``emit()`` (returning values) only where ``pred``; elsewhere ``fallback``."""
        if pred is None:
            return emit()
        before = self.b.block
        with self.b.if_then(pred):
            values = emit()
            inside = self.b.block
        out = []
        for v, other in zip(values, fallback):
            phi = self.b.phi(v.type)
            phi.add_incoming(v, inside)
            phi.add_incoming(other, before)
            out.append(phi)
        return out

    def zero_of(self, t: ir.Type) -> ir.Constant:
        if isinstance(t, ir.PointerType):
            return ir.Constant(t, None)
        return ir.Constant(t, 0.0 if isinstance(t, (ir.FloatType, ir.DoubleType, ir.HalfType)) else 0)

    # -- load ----------------------------------------------------------------------------------
    def lower_load(self, op: ops.LoadOp) -> None:
        pointee = elem_type(op.ptr.type).pointee
        storage = self.types.storage(pointee)
        compute = self.types.compute(pointee)
        if not isinstance(op.ptr.type, TileType):
            ptr = self.scalar(op.ptr)
            mask = self.scalar(op.mask) if op.mask is not None else None
            other = self.scalar(op.other) if op.other is not None else self.zero_of(compute)

            def emit_scalar() -> list:
                return [self.ew.from_storage(pointee, self.b.load(ptr, typ=storage))]
            self.set_result(op, self.guarded(mask, emit_scalar, [other])[0])
            return
        layout = op.result.type.layout
        shape = shape_of(op.result.type)
        ptrs = self.tile(op.ptr, layout).values
        masks = self.tile(op.mask, layout).values if op.mask is not None else None
        others = self.operand(op.other, layout) if op.other is not None else None
        width, groups = self.access_groups(op, layout, shape)
        values: list = [None] * len(ptrs)
        for group in groups:
            first = group[0]
            fallback = [others.values[i] if others is not None else self.zero_of(compute)
                        for i in group] if others is not None or masks is not None else []

            def emit(group=group, first=first) -> list:
                if width == 1:
                    return [self.ew.from_storage(pointee, self.b.load(ptrs[first], typ=storage))]
                vt = ir.VectorType(storage, width)
                vec = self.b.load(ptrs[first], typ=vt)
                vec.align = width * pointee.nbytes
                return [self.ew.from_storage(pointee, self.b.extract_element(vec, ir.Constant(I32, k)))
                        for k in range(width)]
            loaded = self.guarded(masks[first] if masks is not None else None, emit, fallback)
            for i, v in zip(group, loaded):
                values[i] = v
        self.set_result(op, self.new_regs(layout, shape, values))

    def new_regs(self, layout, shape, values):
        from .lowering import Regs
        return Regs(layout, shape, values)

    # -- store ---------------------------------------------------------------------------------
    def lower_store(self, op: ops.StoreOp) -> None:
        pointee = elem_type(op.ptr.type).pointee
        if not isinstance(op.ptr.type, TileType):
            ptr, value = self.scalar(op.ptr), self.scalar(op.value)
            mask = self.scalar(op.mask) if op.mask is not None else None
            pred = self.predicate([self.first_thread(), mask])

            def emit_scalar() -> list:
                self.b.store(self.ew.to_storage(pointee, value), ptr)
                return []
            self.guarded(pred, emit_scalar, [])
            return
        layout = self.laid.store_layout[op]
        shape = shape_of(op.ptr.type)
        ptrs = self.tile(op.ptr, layout).values
        vals = self.operand(op.value, layout)
        vals = vals.values if not isinstance(vals, ir.Value) else [vals] * len(ptrs)
        masks = self.tile(op.mask, layout).values if op.mask is not None else None
        owner = self.owner_predicate(layout, shape)
        width, groups = self.access_groups(op, layout, shape)
        indices = register_indices(layout, shape)
        for group in groups:
            first = group[0]
            if self.register_is_replica(layout, shape, indices[first]):
                continue
            pred = self.predicate([owner, masks[first] if masks is not None else None])

            def emit(group=group, first=first) -> list:
                if width == 1:
                    self.b.store(self.ew.to_storage(pointee, vals[first]), ptrs[first])
                    return []
                vt = ir.VectorType(self.types.storage(pointee), width)
                vec = ir.Constant(vt, ir.Undefined)
                for k, i in enumerate(group):
                    vec = self.b.insert_element(vec, self.ew.to_storage(pointee, vals[i]), ir.Constant(I32, k))
                st = self.b.store(vec, ptrs[first])
                st.align = width * pointee.nbytes
                return []
            self.guarded(pred, emit, [])

    # -- atomics -------------------------------------------------------------------------------
    _RMW = {"add": ("add", "add", "fadd"), "max": ("max", "umax", "fmax"),
            "min": ("min", "umin", "fmin"), "xchg": ("xchg", "xchg", "xchg"),
            "and": ("and", "and", None), "or": ("or", "or", None), "xor": ("xor", "xor", None)}
    _ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release",
              "acq_rel": "acq_rel"}

    def atomic_each(self, op: ops.Op, emit_one) -> None:
        """Run ``emit_one(ptr, *operands) -> old`` per element on its owner thread."""
        result_t = op.results[0].type
        elem = elem_type(result_t)
        zero = self.zero_of(self.types.compute(elem))
        if not isinstance(result_t, TileType):
            operands = [self.scalar(v) if v is not None else None for v in self.atomic_operands(op)]
            pred = self.predicate([self.first_thread(), operands[-1]])
            old = self.guarded(pred, lambda: [emit_one(*operands[:-1])], [zero])[0]
            self.set_result(op, self.broadcast_from_first_thread(old))
            return
        layout, shape = result_t.layout, result_t.shape
        operands = [self.tile(v, layout).values if v is not None else None
                    for v in self.atomic_operands(op)]
        owner = self.owner_predicate(layout, shape)
        indices = register_indices(layout, shape)
        values = []
        for i, j in enumerate(indices):
            if self.register_is_replica(layout, shape, j):
                values.append(zero)
                continue
            mask = operands[-1][i] if operands[-1] is not None else None
            args = [o[i] for o in operands[:-1]]
            values.append(self.guarded(self.predicate([owner, mask]), lambda args=args: [emit_one(*args)],
                                       [zero])[0])
        self.set_result(op, self.new_regs(layout, shape, values))

    def atomic_operands(self, op: ops.Op) -> list:
        if isinstance(op, ops.AtomicRMWOp):
            return [op.ptr, op.value, op.mask]
        return [op.ptr, op.cmp, op.value, None]

    def lower_atomic_rmw(self, op: ops.AtomicRMWOp) -> None:
        elem = elem_type(op.value.type)
        kinds = self._RMW[op.kind]
        name = kinds[2] if elem.is_float else kinds[1] if elem.is_unsigned else kinds[0]
        if name is None or elem.name == "bf16" or elem.is_bool:
            self.fail(op, f"atomic '{op.kind}' on {elem} is not supported by the GPU backend")
        order = self._ORDER.get(op.sem, "seq_cst")

        def emit(ptr: ir.Value, value: ir.Value) -> ir.Value:
            # 16-bit operands stay 16-bit in memory: LLVM widens them to a 32-bit CAS loop
            # where the target has no such atomic
            stored = self.ew.to_storage(elem, value)
            old = self.b.atomic_rmw(name, ptr, stored, order)
            return self.ew.from_storage(elem, old)
        self.atomic_each(op, emit)

    def lower_atomic_cas(self, op: ops.AtomicCASOp) -> None:
        elem = elem_type(op.value.type)
        if elem.is_bool:
            self.fail(op, f"atomic_cas on {elem} is not supported by the GPU backend")
        order = self._ORDER.get(op.sem, "seq_cst")
        failure = {"acq_rel": "acquire", "release": "monotonic"}.get(order, order)
        as_int = ir.IntType(elem.bits)

        def emit(ptr: ir.Value, cmp: ir.Value, value: ir.Value) -> ir.Value:
            if elem.is_float:  # compare bit patterns, as the hardware does
                cmp = self.b.bitcast(self.ew.to_storage(elem, cmp), as_int)
                value = self.b.bitcast(self.ew.to_storage(elem, value), as_int)
            pair = self.b.cmpxchg(ptr, cmp, value, order, failure)
            old = self.b.extract_value(pair, 0)
            if not elem.is_float:
                return old
            return self.ew.from_storage(elem, self.b.bitcast(old, self.types.storage(elem)))
        self.atomic_each(op, emit)
