"""Runs one program of a kernel's tile IR with NumPy, op by op, as ``anytile.ir.ops``'s
docstrings define each op.

Every value is a NumPy array of its IR type's shape (``()`` for scalars), of the element
type's NumPy dtype (``ScalarType.np``), or ``uint64`` addresses for pointers.  Float math is
computed in float64 and rounded once to the result type."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Optional

import numpy as np

import anytile.ir as ir
from anytile.errors import device_assert_error
from anytile.ir import ops as O
from anytile.ir.types import PointerType, elem_type, shape_of

from .memory import Memory

__all__ = ["Program", "SUPPORTED"]

_ADDRESS = np.dtype(np.uint64)
_TERMINATORS = (O.YieldOp, O.ConditionOp, O.ReturnOp)


def storage(t: ir.Type) -> np.dtype:
    """The NumPy dtype holding values of IR type ``t``."""
    elem = elem_type(t)
    return _ADDRESS if isinstance(elem, PointerType) else elem.np


def as_value(x: Any, t: ir.Type) -> np.ndarray:
    """``x`` as a value of IR type ``t``: its dtype, and a tile type's shape.  (A scalar may
    hold an array: a combine region runs on whole rows at once.)"""
    value = np.asarray(x, storage(t))
    shape = shape_of(t)
    return np.broadcast_to(value, shape) if shape and value.shape != shape else value


def is_float(t: ir.Type) -> bool:
    """Whether ``t``'s elements are floats."""
    elem = elem_type(t)
    return not isinstance(elem, PointerType) and elem.is_float


# -- elementwise arithmetic ---------------------------------------------------------------------
def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # C division: the remainder has the dividend's sign, so a - rem is an exact multiple of b
    return (a - np.fmod(a, b)) // b


_BINARY: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "fdiv": np.divide,
    "rem": np.fmod, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "shl": np.left_shift, "shr": np.right_shift,
}
_COMPARE: dict[str, Callable] = {"eq": np.equal, "ne": np.not_equal, "lt": np.less,
                                 "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}
_MATH: dict[str, Callable] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "floor": np.floor,
    "ceil": np.ceil, "tanh": np.tanh, "erf": np.vectorize(math.erf, otypes=[np.float64]),
}


def binary(kind: str, a: np.ndarray, b: np.ndarray, floats: bool) -> np.ndarray:
    """``BinaryOp``; ``floats``: the operands are floats."""
    if kind == "div":
        return np.floor(a / b) if floats else _int_div(a, b)
    if kind in ("min", "max"):
        if floats:
            # IEEE 754-2019 minimumNumber/maximumNumber: a NaN gives the other operand, and
            # -0 orders below +0 (np.fmin and np.fmax may return either zero)
            picked = (np.fmin if kind == "min" else np.fmax)(a, b)
            zeros = (a == 0) & (b == 0)
            if np.any(zeros):
                a_neg, b_neg = np.signbit(a), np.signbit(b)
                negative = (a_neg | b_neg) if kind == "min" else (a_neg & b_neg)
                zero = np.zeros((), dtype=picked.dtype)
                picked = np.where(zeros, np.where(negative, -zero, zero), picked)
            return picked
        return (np.minimum if kind == "min" else np.maximum)(a, b)
    return _BINARY[kind](a, b)


def unary(kind: str, x: np.ndarray) -> np.ndarray:
    """``UnaryOp``: math in float64, rounded once to ``x``'s type."""
    if kind == "neg":
        return np.negative(x)
    if kind == "not":
        return np.invert(x)
    if kind == "abs":
        return np.abs(x)
    return _MATH[kind](x.astype(np.float64)).astype(x.dtype)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to the operands' type."""
    if a.dtype.itemsize < 8:
        # the product is exact in float64; the exact sum rounded to odd there, then rounded to
        # the narrow type, is rounded once
        p = a.astype(np.float64) * b.astype(np.float64)
        c64 = c.astype(np.float64)
        s = p + c64
        err = (p - (s - (s - p))) + (c64 - (s - p))      # TwoSum: p + c == s + err exactly
        mantissa_even = (np.ascontiguousarray(s).view(np.int64) & 1) == 0
        nudge = (err != 0) & mantissa_even & np.isfinite(s)
        s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(a.dtype)
    exact = np.frompyfunc(lambda x, y, z: float(Fraction(x) * Fraction(y) + Fraction(z))
                          if all(map(math.isfinite, (x, y, z))) else x * y + z, 3, 1)
    return exact(a, b, c).astype(a.dtype)


def cast(x: np.ndarray, src: ir.Type, dst: ir.Type) -> np.ndarray:
    """``CastOp``: truncating or extending ints, round-to-nearest-even into floats, and floats
    into ints truncated toward zero, saturated, NaN to 0."""
    dtype = storage(dst)
    to = elem_type(dst)
    if isinstance(to, PointerType) or isinstance(elem_type(src), PointerType):
        return x.astype(dtype)
    if dtype.kind in "iu" and x.dtype.kind not in "iub":
        info = np.iinfo(dtype)
        f = np.trunc(x.astype(np.float64))
        high, low = f >= float(info.max), f <= float(info.min)
        inside = np.where(high | low | np.isnan(f), 0.0, f).astype(dtype)
        return np.where(high, dtype.type(info.max), np.where(low, dtype.type(info.min), inside))
    return x.astype(dtype)


def umulhi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The high half of the double-width product, on Python integers."""
    bits = a.dtype.itemsize * 8
    product = a.astype(object) * b.astype(object)
    return np.asarray(product >> bits).astype(a.dtype)


# -- memory ---------------------------------------------------------------------------------------
def atomic_update(kind: str, old: np.ndarray, value: np.ndarray, floats: bool) -> np.ndarray:
    """What ``AtomicRMWOp`` of ``kind`` writes over ``old``."""
    return value if kind == "xchg" else binary(kind, old, value, floats)


class Program:
    """One program of a launch: ``run(function, args)`` evaluates a function's body."""

    def __init__(self, module: ir.Module, memory: Memory, pid: tuple, grid: tuple) -> None:
        self.module, self.memory, self.pid, self.grid = module, memory, pid, grid
        self.env: dict[ir.Value, np.ndarray] = {}

    def value(self, v: Optional[ir.Value]) -> Optional[np.ndarray]:
        return None if v is None else self.env[v]

    def run(self, fn: ir.Function, args: list) -> list:
        """Run ``fn`` with ``args``; its return values."""
        outer, self.env = self.env, {}
        try:
            end = self.block(fn.body, args)
            return [self.env[v] for v in end.values] if end is not None else []
        finally:
            self.env = outer

    def block(self, block: ir.Block, args: list) -> Optional[ir.Op]:
        """Bind ``block``'s arguments, run its ops, return its terminator (if any)."""
        for a, v in zip(block.args, args):
            self.env[a] = v
        for op in block.ops:
            if isinstance(op, _TERMINATORS):
                return op
            with np.errstate(all="ignore"):     # integer wrap-around and IEEE specials are meant
                results = HANDLERS[type(op)](self, op)
            for r, v in zip(op.results, results):
                self.env[r] = as_value(v, r.type)
        return None

    def region(self, block: ir.Block, args: list) -> list:
        end = self.block(block, args)
        return [self.env[v] for v in end.values]

    # -- tiles and arithmetic --------------------------------------------------------------------
    def constant(self, op: O.ConstantOp) -> list:
        return [np.asarray(op.value, storage(op.result.type))]

    def program_id(self, op: Any) -> list:
        source = self.pid if isinstance(op, O.ProgramIdOp) else self.grid
        return [np.int32(source[op.axis])]

    def arange(self, op: O.ArangeOp) -> list:
        return [np.arange(op.start, op.end, dtype=np.int32)]

    def reshape(self, op: Any) -> list:
        src = self.env[op.src]
        if isinstance(op, O.ExpandDimsOp):
            return [np.expand_dims(src, op.axis)]
        if isinstance(op, O.PermuteOp):
            return [np.transpose(src, op.order)]
        if isinstance(op, O.ReshapeOp):
            return [np.reshape(src, op.result.type.shape)]
        return [src]          # splat, broadcast, hint: as_value gives the result its shape

    def arith(self, op: Any) -> list:
        v = self.value
        if isinstance(op, O.BinaryOp):
            return [binary(op.kind, v(op.lhs), v(op.rhs), is_float(op.lhs.type))]
        if isinstance(op, O.CompareOp):
            return [_COMPARE[op.pred](v(op.lhs), v(op.rhs))]
        if isinstance(op, O.UnaryOp):
            return [unary(op.kind, v(op.src))]
        if isinstance(op, O.FmaOp):
            return [fma(v(op.a), v(op.b), v(op.c))]
        if isinstance(op, O.UMulHiOp):
            return [umulhi(v(op.lhs), v(op.rhs))]
        if isinstance(op, O.SelectOp):
            return [np.where(v(op.cond), v(op.true_value), v(op.false_value))]
        if isinstance(op, O.CastOp):
            return [cast(v(op.src), op.src.type, op.result.type)]
        return [np.ascontiguousarray(v(op.src)).view(storage(op.result.type))]   # bitcast

    def addptr(self, op: O.AddPtrOp) -> list:
        step = elem_type(op.ptr.type).pointee.nbytes
        offset = self.env[op.offset].astype(np.int64) * step
        return [self.env[op.ptr] + offset.astype(np.uint64)]

    # -- memory ------------------------------------------------------------------------------------
    def _lanes(self, op: Any, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
        ptrs = np.broadcast_to(self.env[op.ptr], shape)
        mask = getattr(op, "mask", None)
        active = np.ones(shape, bool) if mask is None else np.broadcast_to(self.env[mask], shape)
        return ptrs, active

    def load(self, op: O.LoadOp) -> list:
        t = op.result.type
        ptrs, active = self._lanes(op, shape_of(t))
        out = np.array(as_value(0 if op.other is None else self.env[op.other], t))
        out[active] = self.memory.read(ptrs[active], storage(t), op)
        return [out]

    def store(self, op: O.StoreOp) -> list:
        shape = shape_of(op.ptr.type)
        ptrs, active = self._lanes(op, shape)
        values = np.broadcast_to(self.env[op.value], shape)
        self.memory.write(ptrs[active], values[active], op)
        return []

    def atomic(self, op: Any) -> list:
        t = op.result.type
        ptrs, active = self._lanes(op, shape_of(t))
        values = as_value(self.env[op.value], t)
        compare = as_value(self.env[op.cmp], t) if isinstance(op, O.AtomicCASOp) else None
        old = np.zeros(shape_of(t), storage(t))
        for lane in np.ndindex(*shape_of(t)):       # one lane after another, in row-major order
            if not active[lane]:
                continue
            where = np.asarray([ptrs[lane]], _ADDRESS)
            current = self.memory.read(where, storage(t), op)
            value = np.asarray([values[lane]], storage(t))
            if compare is None:
                new = atomic_update(op.kind, current, value, is_float(t))
            else:
                new = value if current[0] == compare[lane] else current
            self.memory.write(where, np.asarray(new, storage(t)), op)
            old[lane] = current[0]
        return [old]

    # -- combining regions, dot --------------------------------------------------------------------
    def combine(self, region: ir.Block, lhs: list, rhs: list) -> list:
        """The region run on whole arrays at once: its operations are scalar (elementwise)."""
        shape = lhs[0].shape
        return [np.broadcast_to(r, shape) for r in self.region(region, lhs + rhs)]

    def reduce(self, op: O.ReduceOp) -> list:
        # pairs of neighbours combined level by level: index order kept, as an associative
        # combine allows
        parts = [np.moveaxis(self.env[s], op.axis, -1) for s in op.srcs]
        while parts[0].shape[-1] > 1:
            n = parts[0].shape[-1]
            even = n - n % 2
            merged = self.combine(op.combine, [p[..., 0:even:2] for p in parts],
                                  [p[..., 1:even:2] for p in parts])
            parts = [np.concatenate([m, p[..., even:]], axis=-1) for m, p in zip(merged, parts)]
        return [p[..., 0] for p in parts]

    def scan(self, op: O.ScanOp) -> list:
        # Hillis-Steele: after the step of distance d each element combines the 2d before it
        parts = [np.moveaxis(self.env[s], op.axis, -1) for s in op.srcs]
        if op.reverse:
            parts = [p[..., ::-1] for p in parts]
        n, d = parts[0].shape[-1], 1
        while d < n:
            earlier, later = [p[..., :-d] for p in parts], [p[..., d:] for p in parts]
            merged = (self.combine(op.combine, later, earlier) if op.reverse else
                      self.combine(op.combine, earlier, later))
            parts = [np.concatenate([p[..., :d], m], axis=-1) for p, m in zip(parts, merged)]
            d *= 2
        if op.reverse:
            parts = [p[..., ::-1] for p in parts]
        return [np.moveaxis(p, -1, op.axis) for p in parts]

    def dot(self, op: O.DotOp) -> list:
        a, b, acc = self.env[op.a], self.env[op.b], self.env[op.acc]
        wide = np.float64 if acc.dtype.kind == "f" or acc.dtype.name == "bfloat16" else np.int64
        total = np.matmul(a.astype(wide), b.astype(wide)) + acc.astype(wide)
        return [total.astype(acc.dtype)]

    # -- control flow ------------------------------------------------------------------------------
    def for_loop(self, op: O.ForOp) -> list:
        iv, upper, step = (int(self.env[v]) for v in (op.lower, op.upper, op.step))
        carried = [self.env[v] for v in op.inits]
        while iv < upper:
            carried = self.region(op.body, [as_value(iv, op.lower.type)] + carried)
            iv += step
        return carried

    def if_op(self, op: O.IfOp) -> list:
        return self.region(op.then_body if bool(self.env[op.cond]) else op.else_body, [])

    def while_loop(self, op: O.WhileOp) -> list:
        carried = [self.env[v] for v in op.inits]
        while True:
            end = self.block(op.before, carried)
            passed = [self.env[v] for v in end.values]
            if not bool(self.env[end.cond]):
                return passed
            carried = self.region(op.after, passed)

    def call(self, op: O.CallOp) -> list:
        return self.run(self.module.functions[op.callee], [self.env[a] for a in op.args])

    def device_assert(self, op: O.AssertOp) -> list:
        if not np.all(self.env[op.cond]):
            raise device_assert_error(op.message, op.loc.file, op.loc.line)
        return []

    def nothing(self, op: Any) -> list:
        return []


HANDLERS: dict[type, Callable[[Program, Any], list]] = {
    O.ConstantOp: Program.constant, O.ProgramIdOp: Program.program_id,
    O.NumProgramsOp: Program.program_id, O.ArangeOp: Program.arange,
    O.SplatOp: Program.reshape, O.BroadcastOp: Program.reshape, O.HintOp: Program.reshape,
    O.ExpandDimsOp: Program.reshape, O.ReshapeOp: Program.reshape, O.PermuteOp: Program.reshape,
    O.BinaryOp: Program.arith, O.CompareOp: Program.arith, O.UnaryOp: Program.arith,
    O.FmaOp: Program.arith, O.UMulHiOp: Program.arith, O.SelectOp: Program.arith,
    O.CastOp: Program.arith, O.BitcastOp: Program.arith, O.AddPtrOp: Program.addptr,
    O.LoadOp: Program.load, O.StoreOp: Program.store, O.AtomicRMWOp: Program.atomic,
    O.AtomicCASOp: Program.atomic, O.ReduceOp: Program.reduce, O.ScanOp: Program.scan,
    O.DotOp: Program.dot, O.ForOp: Program.for_loop, O.IfOp: Program.if_op,
    O.WhileOp: Program.while_loop, O.CallOp: Program.call, O.AssertOp: Program.device_assert,
    O.BarrierOp: Program.nothing,
}
#: the ops this backend runs (terminators are read by their parent op)
SUPPORTED = frozenset(HANDLERS) | frozenset(_TERMINATORS)
