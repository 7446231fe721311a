"""Turns each op of a function into a ``step(frame)`` closure, once, at load time.

A *frame* is a Python list holding the current value of every SSA value of one function
call, at a slot number fixed here; a step reads its operands' slots and writes its results'.
Everything static about an op (its NumPy function, dtypes, shapes, constants) is resolved
while compiling, so running an op costs one closure call and the NumPy work itself.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..ir import ops as O
from ..ir.nodes import Block, Function, Op, Value
from ..ir.types import (PointerType, ScalarType, elem_type, float8_values, shape_of,
                        stored_as_code)
from . import arith, atomics, tiles
from .memory import AccessSite

if TYPE_CHECKING:
    from .executor import ModuleExecutor

Step = Callable[[list], None]


@dataclass(eq=False)
class CompiledBlock:
    """A block's argument slots, its steps, and its terminator's value slots."""

    arg_slots: list[int]
    steps: list[tuple[Op, Step]] = field(default_factory=list)
    result_slots: list[int] = field(default_factory=list)
    cond_slot: Optional[int] = None          # the ``condition`` of a while's before-region


@dataclass(eq=False)
class CompiledFunction:
    """A function ready to run: a fresh frame of ``num_slots`` per call."""

    name: str
    body: Optional[CompiledBlock] = None
    num_slots: int = 0


# Ops a combine region may hold for it to run on whole slices instead of element by element.
_SLICE_SAFE = (O.ConstantOp, O.BinaryOp, O.CompareOp, O.UnaryOp, O.FmaOp, O.UMulHiOp,
               O.SelectOp, O.CastOp, O.BitcastOp, O.HintOp)


def constant_value(value: Any, t: Any) -> Any:
    """The NumPy scalar or read-only tile of ``ConstantOp(value)`` with result type ``t``."""
    elem = elem_type(t)
    if isinstance(elem, PointerType):
        scalar: Any = np.int64(value)
    elif elem.is_bool:
        scalar = np.bool_(bool(value))
    elif elem.is_float:
        scalar = arith.round_f64_to(np.float64(value), elem)
    else:                                     # wrap out-of-range Python ints like the IR
        unsigned = np.dtype(f"u{elem.np.itemsize}")
        scalar = np.array(int(value) % (1 << elem.bits), unsigned).view(elem.np)[()]
    shape = shape_of(t)
    if not shape:
        return scalar
    tile = np.full(shape, scalar, arith.storage_dtype(elem))
    tile.flags.writeable = False
    return tile


class FunctionCompiler:
    """Compiles one IR function's blocks into steps for ``executor``."""

    def __init__(self, executor: "ModuleExecutor", fn: Function) -> None:
        self.executor = executor
        self.fn = fn
        self.slots: dict[Value, int] = {}

    def slot(self, value: Value) -> int:
        s = self.slots.get(value)
        if s is None:
            s = self.slots[value] = len(self.slots)
        return s

    def compile_into(self, target: CompiledFunction) -> None:
        target.body = self.block(self.fn.body)
        target.num_slots = len(self.slots)

    def block(self, block: Block) -> CompiledBlock:
        out = CompiledBlock([self.slot(a) for a in block.args])
        for op in block.ops:
            if isinstance(op, (O.YieldOp, O.ReturnOp)):
                out.result_slots = [self.slot(v) for v in op.values]
                break
            if isinstance(op, O.ConditionOp):
                out.cond_slot = self.slot(op.cond)
                out.result_slots = [self.slot(v) for v in op.values]
                break
            build = _BUILDERS.get(type(op))
            if build is None:
                raise arith.UnsupportedOp(f"unknown op '{op.NAME}'")
            step = self.executor.compiling(op, lambda: build(self, op))
            if step is not None:
                out.steps.append((op, step))
        return out

    # -- helpers -----------------------------------------------------------------------------
    def _unary(self, op: Op, src: Value, fn: Callable[[Any], Any]) -> Step:
        a, r = self.slot(src), self.slot(op.results[0])

        def step(frame: list) -> None:
            frame[r] = fn(frame[a])
        return step

    def _binary_step(self, op: Op, lhs: Value, rhs: Value, fn: Callable[[Any, Any], Any]) -> Step:
        a, b, r = self.slot(lhs), self.slot(rhs), self.slot(op.results[0])

        def step(frame: list) -> None:
            frame[r] = fn(frame[a], frame[b])
        return step

    def _set_results(self, op: Op) -> list[int]:
        return [self.slot(v) for v in op.results]

    # -- constants, ids, shapes --------------------------------------------------------------
    def constant(self, op: O.ConstantOp) -> Step:
        value, r = constant_value(op.value, op.result.type), self.slot(op.result)

        def step(frame: list) -> None:
            frame[r] = value
        return step

    def arange(self, op: O.ArangeOp) -> Step:
        value, r = np.arange(op.start, op.end, dtype=np.int32), self.slot(op.result)
        value.flags.writeable = False

        def step(frame: list) -> None:
            frame[r] = value
        return step

    def program_id(self, op: O.ProgramIdOp) -> Step:
        state, axis, r = self.executor.state, op.axis, self.slot(op.result)

        def step(frame: list) -> None:
            frame[r] = state.pid[axis]
        return step

    def num_programs(self, op: O.NumProgramsOp) -> Step:
        state, axis, r = self.executor.state, op.axis, self.slot(op.result)

        def step(frame: list) -> None:
            frame[r] = state.grid[axis]
        return step

    def splat(self, op: O.SplatOp) -> Step:
        t = op.result.type
        shape, dtype = shape_of(t), arith.storage_dtype(elem_type(t))
        source = op.src.owner
        if isinstance(source, O.ConstantOp):      # a splatted constant is a constant tile
            value, r = constant_value(source.value, t), self.slot(op.result)

            def constant_step(frame: list) -> None:
                frame[r] = value
            return constant_step

        def splat(x: Any) -> np.ndarray:
            tile = np.empty(shape, dtype)
            tile.fill(x)
            return tile
        return self._unary(op, op.src, splat)

    def broadcast(self, op: O.BroadcastOp) -> Step:
        shape = shape_of(op.result.type)
        return self._unary(op, op.src, lambda x: np.broadcast_to(x, shape))

    def expand_dims(self, op: O.ExpandDimsOp) -> Step:
        axis = op.axis
        return self._unary(op, op.src, lambda x: np.expand_dims(x, axis))

    def reshape(self, op: O.ReshapeOp) -> Step:
        shape = shape_of(op.result.type)
        return self._unary(op, op.src, lambda x: np.reshape(x, shape))

    def permute(self, op: O.PermuteOp) -> Step:
        order = tuple(op.order)
        return self._unary(op, op.src, lambda x: np.transpose(x, order))

    # -- elementwise -------------------------------------------------------------------------
    def binary(self, op: O.BinaryOp) -> Step:
        fn = arith.binary_fn(op.kind, elem_type(op.lhs.type))
        return self._binary_step(op, op.lhs, op.rhs, fn)

    def compare(self, op: O.CompareOp) -> Step:
        fn = arith.compare_fn(op.pred, elem_type(op.lhs.type))
        return self._binary_step(op, op.lhs, op.rhs, fn)

    def umulhi(self, op: O.UMulHiOp) -> Step:
        return self._binary_step(op, op.lhs, op.rhs, arith.umulhi_fn(elem_type(op.lhs.type)))

    def unary(self, op: O.UnaryOp) -> Step:
        return self._unary(op, op.src, arith.unary_fn(op.kind, elem_type(op.src.type)))

    def cast(self, op: O.CastOp) -> Step:
        fn = arith.cast_fn(elem_type(op.src.type), elem_type(op.result.type))
        return self._unary(op, op.src, fn)

    def bitcast(self, op: O.BitcastOp) -> Step:
        fn = arith.bitcast_fn(elem_type(op.src.type), elem_type(op.result.type))
        return self._unary(op, op.src, fn)

    def hint(self, op: O.HintOp) -> Step:
        return self._unary(op, op.src, lambda x: x)

    def fma(self, op: O.FmaOp) -> Step:
        fn = arith.fma_fn(elem_type(op.a.type))
        a, b, c, r = self.slot(op.a), self.slot(op.b), self.slot(op.c), self.slot(op.result)

        def step(frame: list) -> None:
            frame[r] = fn(frame[a], frame[b], frame[c])
        return step

    def select(self, op: O.SelectOp) -> Step:
        c, t, f = self.slot(op.cond), self.slot(op.true_value), self.slot(op.false_value)
        r = self.slot(op.result)

        def step(frame: list) -> None:
            frame[r] = arith.select(frame[c], frame[t], frame[f])
        return step

    # -- memory ------------------------------------------------------------------------------
    def addptr(self, op: O.AddPtrOp) -> Step:
        size = np.int64(elem_type(op.ptr.type).pointee.nbytes)
        return self._binary_step(op, op.ptr, op.offset,
                                 lambda p, off: p + off.astype(np.int64) * size)

    def load(self, op: O.LoadOp) -> Step:
        memory, elem, site = self.executor.memory, elem_type(op.result.type), AccessSite()
        p, r = self.slot(op.ptr), self.slot(op.result)
        m = self.slot(op.mask) if op.mask is not None else None
        o = self.slot(op.other) if op.other is not None and op.mask is not None else None

        def step(frame: list) -> None:
            mask = None if m is None else frame[m]
            value = memory.gather(frame[p], mask, elem, site)
            frame[r] = value if o is None else arith.select(mask, value, frame[o])
        return step

    def store(self, op: O.StoreOp) -> Step:
        memory, elem, site = self.executor.memory, elem_type(op.value.type), AccessSite()
        p, v = self.slot(op.ptr), self.slot(op.value)
        m = self.slot(op.mask) if op.mask is not None else None

        def step(frame: list) -> None:
            memory.scatter(frame[p], frame[v], None if m is None else frame[m], elem, site)
        return step

    def atomic_rmw(self, op: O.AtomicRMWOp) -> Step:
        memory, elem, site = self.executor.memory, elem_type(op.value.type), AccessSite()
        combine = atomics.rmw_combine(op.kind, elem)
        p, v, r = self.slot(op.ptr), self.slot(op.value), self.slot(op.result)
        m = self.slot(op.mask) if op.mask is not None else None

        def step(frame: list) -> None:
            mask = None if m is None else frame[m]
            frame[r] = atomics.atomic_rmw(memory, combine, elem, frame[p], frame[v], mask, site)
        return step

    def atomic_cas(self, op: O.AtomicCASOp) -> Step:
        memory, elem, site = self.executor.memory, elem_type(op.value.type), AccessSite()
        p, c, v, r = self.slot(op.ptr), self.slot(op.cmp), self.slot(op.value), self.slot(op.result)

        def step(frame: list) -> None:
            frame[r] = atomics.atomic_cas(memory, elem, frame[p], frame[c], frame[v], site)
        return step

    # -- reductions, scans, dot --------------------------------------------------------------
    def _combine(self, region: Block) -> tuple[CompiledBlock, bool]:
        body = self.block(region)
        on_slices = all(isinstance(o, _SLICE_SAFE) for o in region.ops
                        if not isinstance(o, O.YieldOp))
        return body, on_slices

    def _combiner(self, body: CompiledBlock, frame: list) -> Callable[[list, list], list]:
        run_block, arg_slots = self.executor.run_block, body.arg_slots

        def combine(lhs: list, rhs: list) -> list:
            for s, value in zip(arg_slots, lhs + rhs):
                frame[s] = value
            return run_block(body, frame)
        return combine

    def reduce(self, op: O.ReduceOp) -> Step:
        body, on_slices = self._combine(op.combine)
        algorithm = tiles.tree_reduce if on_slices else tiles.sequential_reduce
        srcs, outs, axis = [self.slot(s) for s in op.srcs], self._set_results(op), op.axis

        def step(frame: list) -> None:
            results = algorithm([frame[s] for s in srcs], axis, self._combiner(body, frame))
            for s, value in zip(outs, results):
                frame[s] = value
        return step

    def scan(self, op: O.ScanOp) -> Step:
        body, on_slices = self._combine(op.combine)
        algorithm = tiles.tree_scan if on_slices else tiles.sequential_scan
        srcs, outs = [self.slot(s) for s in op.srcs], self._set_results(op)
        axis, reverse = op.axis, bool(op.reverse)

        def step(frame: list) -> None:
            results = algorithm([frame[s] for s in srcs], axis, reverse,
                                self._combiner(body, frame))
            for s, value in zip(outs, results):
                frame[s] = value
        return step

    def dot(self, op: O.DotOp) -> Step:
        acc_elem = elem_type(op.acc.type)
        a, b, c, r = self.slot(op.a), self.slot(op.b), self.slot(op.acc), self.slot(op.result)

        def step(frame: list) -> None:
            frame[r] = tiles.dot(frame[a], frame[b], frame[c], acc_elem)
        return step

    # -- control flow and calls --------------------------------------------------------------
    def for_(self, op: O.ForOp) -> Step:
        body, run_block, executor = self.block(op.body), self.executor.run_block, self.executor
        lo, hi, st = self.slot(op.lower), self.slot(op.upper), self.slot(op.step)
        inits, outs = [self.slot(v) for v in op.inits], self._set_results(op)
        iv_slot, carried_slots = body.arg_slots[0], body.arg_slots[1:]
        iv_type: ScalarType = op.lower.type
        make_iv, signed = _iv_maker(iv_type), _signed_view(iv_type)

        def step(frame: list) -> None:
            lower, upper, stride = signed(frame[lo]), signed(frame[hi]), signed(frame[st])
            if stride <= 0:
                raise executor.error(op, "for-loop step must be positive", f"got {stride}")
            carried = [frame[s] for s in inits]
            for i in range(lower, upper, stride):
                frame[iv_slot] = make_iv(i)
                for s, value in zip(carried_slots, carried):
                    frame[s] = value
                carried = run_block(body, frame)
            for s, value in zip(outs, carried):
                frame[s] = value
        return step

    def if_(self, op: O.IfOp) -> Step:
        then_body, else_body = self.block(op.then_body), self.block(op.else_body)
        run_block, c, outs = self.executor.run_block, self.slot(op.cond), self._set_results(op)

        def step(frame: list) -> None:
            results = run_block(then_body if frame[c] else else_body, frame)
            for s, value in zip(outs, results):
                frame[s] = value
        return step

    def while_(self, op: O.WhileOp) -> Step:
        before, after = self.block(op.before), self.block(op.after)
        run_block = self.executor.run_block
        inits, outs = [self.slot(v) for v in op.inits], self._set_results(op)
        cond = before.cond_slot
        if cond is None:
            raise arith.UnsupportedOp("the before-region of a while must end with condition")

        def step(frame: list) -> None:
            values = [frame[s] for s in inits]
            while True:
                for s, value in zip(before.arg_slots, values):
                    frame[s] = value
                values = run_block(before, frame)
                if not frame[cond]:
                    break
                for s, value in zip(after.arg_slots, values):
                    frame[s] = value
                values = run_block(after, frame)
            for s, value in zip(outs, values):
                frame[s] = value
        return step

    def call(self, op: O.CallOp) -> Step:
        callee = self.executor.function(op.callee)
        call, outs = self.executor.call, self._set_results(op)
        args = [self.slot(v) for v in op.args]

        def step(frame: list) -> None:
            for s, value in zip(outs, call(callee, [frame[a] for a in args])):
                frame[s] = value
        return step

    def assert_(self, op: O.AssertOp) -> Step:
        c, executor = self.slot(op.cond), self.executor

        def step(frame: list) -> None:
            cond = frame[c]
            if not np.all(cond):
                raise executor.assert_failure(op, cond)
        return step

    def print_(self, op: O.PrintOp) -> Step:
        v, state = self.slot(op.value), self.executor.state
        line = print_formatter(elem_type(op.value.type), op.prefix, op.hex)

        def step(frame: list) -> None:
            pid = "pid ({}, {}, {})".format(*state.pid)
            value = np.asarray(frame[v])
            if value.ndim == 0:
                out = [f"{pid} {line(value[()])}"]
            else:
                out = [f"{pid} idx ({', '.join(map(str, idx))}) {line(value[idx])}"
                       for idx in np.ndindex(*value.shape)]
            sys.stdout.write("\n".join(out) + "\n")
            sys.stdout.flush()
        return step

    def barrier(self, op: O.BarrierOp) -> None:
        return None                           # programs and their ops already run in order

    def assume(self, op: O.AssumeOp) -> None:
        return None                           # a promise to optimise with: nothing to run


def _signed_view(t: ScalarType) -> Callable[[Any], int]:
    """A loop bound as a Python int, read as signed (``for`` compares signed)."""
    if not t.is_unsigned:
        return int
    half, full = 1 << (t.bits - 1), 1 << t.bits
    return lambda x: int(x) - full if int(x) >= half else int(x)


def _iv_maker(t: ScalarType) -> Callable[[int], Any]:
    """Python int -> the induction variable's NumPy scalar (unsigned ones wrap)."""
    if not t.is_unsigned:
        return t.np.type
    mask = (1 << t.bits) - 1
    return lambda i: t.np.type(i & mask)


_BUILDERS: dict[type, Callable[[FunctionCompiler, Any], Optional[Step]]] = {
    O.ConstantOp: FunctionCompiler.constant, O.ArangeOp: FunctionCompiler.arange,
    O.ProgramIdOp: FunctionCompiler.program_id, O.NumProgramsOp: FunctionCompiler.num_programs,
    O.SplatOp: FunctionCompiler.splat, O.BroadcastOp: FunctionCompiler.broadcast,
    O.ExpandDimsOp: FunctionCompiler.expand_dims, O.ReshapeOp: FunctionCompiler.reshape,
    O.PermuteOp: FunctionCompiler.permute, O.BinaryOp: FunctionCompiler.binary,
    O.CompareOp: FunctionCompiler.compare, O.UnaryOp: FunctionCompiler.unary,
    O.FmaOp: FunctionCompiler.fma, O.UMulHiOp: FunctionCompiler.umulhi,
    O.SelectOp: FunctionCompiler.select, O.CastOp: FunctionCompiler.cast,
    O.BitcastOp: FunctionCompiler.bitcast, O.HintOp: FunctionCompiler.hint,
    O.AddPtrOp: FunctionCompiler.addptr, O.LoadOp: FunctionCompiler.load,
    O.StoreOp: FunctionCompiler.store, O.AtomicRMWOp: FunctionCompiler.atomic_rmw,
    O.AtomicCASOp: FunctionCompiler.atomic_cas, O.ReduceOp: FunctionCompiler.reduce,
    O.ScanOp: FunctionCompiler.scan, O.DotOp: FunctionCompiler.dot,
    O.ForOp: FunctionCompiler.for_, O.IfOp: FunctionCompiler.if_,
    O.WhileOp: FunctionCompiler.while_, O.CallOp: FunctionCompiler.call,
    O.AssertOp: FunctionCompiler.assert_, O.BarrierOp: FunctionCompiler.barrier,
    O.AssumeOp: FunctionCompiler.assume, O.PrintOp: FunctionCompiler.print_,
}


def print_formatter(elem: Any, prefix: str, as_hex: bool) -> Callable[[Any], str]:
    """How ``PrintOp`` writes one element after ``pid (...) [idx (...)] ``: the prefix and a
    space when there is a prefix, then the value (``ir.PrintOp`` defines the forms)."""
    head = f"{prefix} " if prefix else ""
    if isinstance(elem, PointerType):
        return lambda x: f"{head}0x{int(x) & (2**64 - 1):x}"
    if as_hex:
        bits = max(elem.bits, 8)
        raw = np.dtype(f"u{bits // 8}")

        def hex_digits(x: Any) -> str:
            n = int(np.asarray(x).view(raw)) if elem.is_float else int(x) & (2**bits - 1)
            return f"{head}0x{n:x}"
        return hex_digits
    if stored_as_code(elem):           # a float8 format NumPy lacks: its value, from the code
        return lambda x: f"{head}{float(float8_values(x, elem)[()]):.9g}"
    if elem.is_float:
        digits = 17 if elem.bits == 64 else 9
        return lambda x: f"{head}{float(x):.{digits}g}"
    return lambda x: f"{head}{int(x)}"
