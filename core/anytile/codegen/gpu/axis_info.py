"""Axis analysis: what is provable about the integers and addresses of each tile.

For every tile value and every dimension ``d`` it computes (as Triton's AxisInfo does):

* ``contiguity[d]``: the tile splits along ``d`` into aligned runs of this many elements whose
  values increase by exactly 1 (addresses: by one element);
* ``divisibility[d]``: the first element of each such run is a multiple of this (addresses:
  in bytes);
* ``constancy[d]``: the tile splits along ``d`` into aligned runs of this many equal values.

Scalars have rank 0 and only ``divisibility``.  Facts come from ``arange``, constants,
kernel arguments marked ``{"divisibility": 16}``, ``hint`` ops, and flow through add, sub,
mul, addptr, splat, broadcast, expand_dims and comparisons.  A GPU lowering uses them to
prove that a thread's consecutive registers are consecutive, aligned addresses (one 16-byte
access) and that a mask is uniform over them.  Everything here is target-independent.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Optional

from ...ir import ops
from ...ir.nodes import Block, Function, Value
from ...ir.types import PointerType, ScalarType, elem_type, shape_of
from ...passes.rewrite import constant_of

__all__ = ["AxisInfo", "analyse_function", "vector_width_of_access"]

MAX_DIVISIBILITY = 1 << 30


def _pow2_divisor(n: int) -> int:
    """The largest power of two dividing ``n`` (capped; 0 is divisible by everything)."""
    n = abs(int(n))
    if n == 0:
        return MAX_DIVISIBILITY
    return min(n & -n, MAX_DIVISIBILITY)


@dataclass(frozen=True)
class AxisInfo:
    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]
    scalar_divisibility: int = 1     # for rank 0

    @staticmethod
    def unknown(shape: tuple[int, ...]) -> "AxisInfo":
        r = len(shape)
        return AxisInfo((1,) * r, (1,) * r, (1,) * r)

    @staticmethod
    def uniform(shape: tuple[int, ...], div: int) -> "AxisInfo":
        return AxisInfo((1,) * len(shape), (div,) * len(shape), tuple(shape), div)

    def div(self, d: int = -1) -> int:
        return self.divisibility[d] if self.divisibility else self.scalar_divisibility


def _elem_bytes(t) -> int:
    e = elem_type(t)
    return e.pointee.nbytes if isinstance(e, PointerType) else 1


_MAX_FIXPOINT_ROUNDS = 4


def _join(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """What holds for both: the gcd of each fact (all are powers of two or run lengths)."""
    return AxisInfo(tuple(gcd(x, y) for x, y in zip(a.contiguity, b.contiguity)),
                    tuple(gcd(x, y) for x, y in zip(a.divisibility, b.divisibility)),
                    tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)),
                    gcd(a.scalar_divisibility, b.scalar_divisibility))


class _Analysis:
    def __init__(self) -> None:
        self.info: dict[Value, AxisInfo] = {}
        self.loops: dict = {}           # id of a loop's body -> the loop
        self.assumed: frozenset = frozenset()   # values ``tl.assume`` says are never negative

    def get(self, v: Value) -> AxisInfo:
        found = self.info.get(v)
        if found is None:
            found = AxisInfo.unknown(shape_of(v.type))
        return found

    def scalar(self, div: int) -> AxisInfo:
        return AxisInfo((), (), (), div)

    def run_block(self, block: Block) -> None:
        for op in block.ops:
            self.visit(op)

    def visit(self, op: ops.Op) -> None:
        if isinstance(op, ops.ForOp):
            self.visit_for(op)
            return
        for region in op.regions:
            for a in region.args:
                self.info.setdefault(a, AxisInfo.unknown(shape_of(a.type)))
        for region in op.regions:
            self.run_block(region)
        if not op.results:
            return
        res = op.results[0]
        shape = shape_of(res.type)
        out = self.rule(op, shape)
        if out is not None:
            self.info[res] = out

    def visit_for(self, op: ops.ForOp) -> None:
        """Loop-carried values get what holds for the initial value *and* every yielded one
        (a fixpoint of ``join``), so ``ptrs += BK`` keeps the contiguity of ``ptrs``."""
        iv, carried = op.body.args[0], op.body.args[1:]
        self.loops[id(op.body)] = op
        self.info[iv] = self.scalar(gcd(self.get(op.lower).div(), self.get(op.step).div()))
        for arg, init in zip(carried, op.inits):
            self.info[arg] = self.get(init)
        for _ in range(_MAX_FIXPOINT_ROUNDS):
            self.run_block(op.body)
            yielded = op.body.terminator.values if op.body.terminator is not None else []
            changed = False
            for arg, value in zip(carried, yielded):
                joined = _join(self.info[arg], self.get(value))
                if joined != self.info[arg]:
                    self.info[arg], changed = joined, True
            if not changed:
                break
        else:  # no fixpoint in time: assume nothing, and analyse the body once more with that
            for arg in carried:
                self.info[arg] = AxisInfo.unknown(shape_of(arg.type))
            self.run_block(op.body)
        for result, arg in zip(op.results, carried):
            self.info[result] = self.info[arg]

    def rule(self, op: ops.Op, shape: tuple[int, ...]) -> Optional[AxisInfo]:
        g = self.get
        if isinstance(op, ops.ConstantOp):
            value = op.value
            div = _pow2_divisor(value) if isinstance(value, int) or float(value).is_integer() else 1
            return AxisInfo.uniform(shape, div) if shape else self.scalar(div)
        if isinstance(op, ops.ArangeOp):
            return AxisInfo((op.end - op.start,), (_pow2_divisor(op.start),), (1,))
        if isinstance(op, ops.SplatOp):
            return AxisInfo.uniform(shape, g(op.src).div())
        if isinstance(op, ops.ProgramIdOp) or isinstance(op, ops.NumProgramsOp):
            return self.scalar(1)
        if isinstance(op, ops.HintOp):
            base = g(op.src)
            if not shape:
                return self.scalar(op.multiple_of[0] if op.multiple_of else base.div())
            div = tuple(op.multiple_of) if op.multiple_of else base.divisibility
            contig = tuple(op.max_contiguous) if op.max_contiguous else base.contiguity
            return AxisInfo(contig, div, base.constancy)
        if isinstance(op, ops.ExpandDimsOp):
            a = g(op.src)
            if not shape_of(op.src.type):
                return AxisInfo((1,), (a.div(),), (1,))
            # along the new axis each element is its own run: only what every element of
            # the source is divisible by holds (a run [16k, 16k + 1, ...] counts as 1)
            every = 0
            for c, dv in zip(a.contiguity, a.divisibility):
                every = gcd(every, 1 if c > 1 else dv)
            return AxisInfo(a.contiguity[:op.axis] + (1,) + a.contiguity[op.axis:],
                            a.divisibility[:op.axis] + (every or 1,) + a.divisibility[op.axis:],
                            a.constancy[:op.axis] + (1,) + a.constancy[op.axis:])
        if isinstance(op, ops.BroadcastOp):
            a = g(op.src)
            src_shape = shape_of(op.src.type)
            return AxisInfo(
                tuple(1 if s == 1 and n != 1 else c for c, s, n in zip(a.contiguity, src_shape, shape)),
                a.divisibility,
                tuple(n if s == 1 else k for k, s, n in zip(a.constancy, src_shape, shape)))
        if isinstance(op, ops.PermuteOp):
            a = g(op.src)
            return AxisInfo(*(tuple(t[i] for i in op.order) for t in
                              (a.contiguity, a.divisibility, a.constancy)))
        if isinstance(op, ops.AddPtrOp):
            return self.add_like(g(op.ptr), g(op.offset), _elem_bytes(op.ptr.type), shape)
        if isinstance(op, ops.BinaryOp) and isinstance(elem_type(op.lhs.type), ScalarType) \
                and elem_type(op.lhs.type).is_int:
            a, b = g(op.lhs), g(op.rhs)
            if op.kind == "add":
                return self.add_like(a, b, 1, shape)
            if op.kind == "sub":
                return self.add_like(a, b, 1, shape, subtract=True)
            if op.kind == "mul":
                return self.mul(a, b, shape)
            if op.kind == "rem" and shape and never_negative(op.lhs, self.loops,
                                                                 assumed=self.assumed):
                return self.rem(a, b, shape)
            return self.only_constancy(a, b, shape=shape)
        if isinstance(op, ops.CompareOp):
            return self.compare(g(op.lhs), g(op.rhs), shape)
        if isinstance(op, ops.CastOp):
            src, dst = elem_type(op.src.type), elem_type(op.result.type)
            if isinstance(src, ScalarType) and isinstance(dst, ScalarType) and src.is_int and \
                    dst.is_int and not src.is_bool and dst.bits >= src.bits and \
                    (src.is_unsigned or not dst.is_unsigned):
                return g(op.src)        # a widening conversion keeps every value as it is
        if isinstance(op, (ops.SelectOp, ops.CastOp, ops.BinaryOp, ops.UnaryOp)):
            operands = [g(v) for v in op.operands]
            return self.only_constancy(*operands, shape=shape)
        return None

    def add_like(self, a: AxisInfo, b: AxisInfo, scale: int, shape: tuple[int, ...],
                 subtract: bool = False) -> AxisInfo:
        if not shape:
            return self.scalar(gcd(a.div(), b.div() * scale))
        contig = tuple(max(gcd(ca, kb), 1 if subtract else gcd(ka, cb))
                       for ca, cb, ka, kb in zip(a.contiguity, b.contiguity, a.constancy, b.constancy))
        # a run of the sum may start inside an operand's longer run, where only its first
        # element's divisibility is known: there, steps of ``c`` elements are all it keeps
        # (units: ``a`` counts ``scale`` per element when it is an address)
        div = tuple(gcd(da if ca <= c else gcd(da, c * scale), db * scale if cb <= c else gcd(db, c) * scale)
                    for da, db, ca, cb, c in zip(a.divisibility, b.divisibility, a.contiguity,
                                                 b.contiguity, contig))
        const = tuple(gcd(ka, kb) for ka, kb in zip(a.constancy, b.constancy))
        return AxisInfo(contig, div, const)

    def mul(self, a: AxisInfo, b: AxisInfo, shape: tuple[int, ...]) -> AxisInfo:
        if not shape:
            return self.scalar(min(a.div() * b.div(), MAX_DIVISIBILITY))
        # the product is no run: every element must be divisible, and within a run
        # [16k, 16k + 1, ...] only the first is
        div = tuple(min((1 if ca > 1 else da) * (1 if cb > 1 else db), MAX_DIVISIBILITY)
                    for da, db, ca, cb in zip(a.divisibility, b.divisibility, a.contiguity, b.contiguity))
        const = tuple(gcd(ka, kb) for ka, kb in zip(a.constancy, b.constancy))
        return AxisInfo((1,) * len(shape), div, const)

    def rem(self, a: AxisInfo, b: AxisInfo, shape: tuple[int, ...]) -> AxisInfo:
        """``a % b``, ``b`` the same along a dimension (``(r0 + arange) % M``, as Triton's
        tutorial wraps its indices): every element of ``a`` and ``b`` divisible by ``g``, the
        remainders too; and a run of ``a`` cut into pieces of ``g`` elements aligned to ``g``
        stays a run in each piece, which holds no multiple of ``b`` but its first element.
        Only for an ``a`` that is never negative (``never_negative``): a negative remainder
        steps back after a multiple of ``b`` (Triton's analysis assumes no such ``a``)."""
        contig, div = [], []
        for d, n in enumerate(shape):
            g = gcd(a.divisibility[d] if a.contiguity[d] == 1 else gcd(a.divisibility[d], a.contiguity[d]),
                    b.divisibility[d] if b.constancy[d] >= n else 1)
            div.append(g)
            contig.append(gcd(a.contiguity[d], g) if b.constancy[d] >= n else 1)
        const = tuple(gcd(ka, kb) for ka, kb in zip(a.constancy, b.constancy))
        return AxisInfo(tuple(contig), tuple(div), const)

    def compare(self, a: AxisInfo, b: AxisInfo, shape: tuple[int, ...]) -> AxisInfo:
        if not shape:
            return self.scalar(1)
        const = []
        for d in range(len(shape)):
            k = gcd(a.constancy[d], b.constancy[d])
            # a contiguous run compared with a constant: uniform over runs aligned to both
            if b.constancy[d] > 1 and a.contiguity[d] > 1:
                k = max(k, min(a.contiguity[d], gcd(a.divisibility[d], b.divisibility[d]), b.constancy[d]))
            if a.constancy[d] > 1 and b.contiguity[d] > 1:
                k = max(k, min(b.contiguity[d], gcd(a.divisibility[d], b.divisibility[d]), a.constancy[d]))
            const.append(k)
        return AxisInfo((1,) * len(shape), (1,) * len(shape), tuple(const))

    def only_constancy(self, *infos: AxisInfo, shape: tuple[int, ...]) -> AxisInfo:
        if not shape:
            return self.scalar(1)
        const = list(shape)
        for info in infos:
            if info.constancy:
                const = [gcd(k, c) for k, c in zip(const, info.constancy)]
        return AxisInfo((1,) * len(shape), (1,) * len(shape), tuple(const))


def never_negative(v: Value, loops: dict, depth: int = 0,
                   assumed: frozenset = frozenset()) -> bool:
    """Whether every element of the integer ``v`` is at least zero, as its ops show: unsigned
    values, non-negative constants and ranges, program ids and counts, the induction variable
    of a loop from a non-negative start by a positive constant step, values ``assumed`` so
    (``assumed_non_negative``), and sums, products, quotients, remainders, minima and maxima,
    shifts and masks of such values (``loops``: the id of each ``for`` loop's body -> the
    loop)."""
    t = elem_type(v.type)
    if not isinstance(t, ScalarType) or not t.is_int:
        return False
    if t.is_unsigned or v in assumed:
        return True
    op = v.owner
    if depth > 16:
        return False
    if not isinstance(op, ops.Op):        # a block argument: a loop's induction variable
        loop = loops.get(id(op))
        if isinstance(loop, ops.ForOp) and v is loop.body.args[0]:
            step = loop.step.owner
            return never_negative(loop.lower, loops, depth + 1, assumed) and \
                isinstance(step, ops.ConstantOp) and isinstance(step.value, int) and step.value > 0
        return False
    again = lambda x: never_negative(x, loops, depth + 1, assumed)      # noqa: E731
    if isinstance(op, ops.ConstantOp):
        return isinstance(op.value, (int, float)) and op.value >= 0
    if isinstance(op, ops.ArangeOp):
        return op.start >= 0
    if isinstance(op, (ops.ProgramIdOp, ops.NumProgramsOp)):
        return True
    if isinstance(op, (ops.SplatOp, ops.BroadcastOp, ops.ExpandDimsOp, ops.PermuteOp)):
        return again(op.src)
    if isinstance(op, ops.CastOp):
        src = elem_type(op.src.type)
        return isinstance(src, ScalarType) and src.is_int and not src.is_bool and \
            src.bits <= t.bits and (src.is_unsigned or again(op.src))
    if isinstance(op, ops.BinaryOp):
        if op.kind in ("add", "mul", "div", "min"):
            return again(op.lhs) and again(op.rhs)
        if op.kind in ("max", "and"):
            return again(op.lhs) or again(op.rhs)
        if op.kind in ("rem", "shr"):
            return again(op.lhs)
    return False


#: ``c < x`` read as ``x > c``
_MIRRORED = {"le": "ge", "lt": "gt", "ge": "le", "gt": "lt"}


def assumed_non_negative(block: Block) -> frozenset:
    """The integers that an ``assume`` among ``block``'s own ops (reached by every program)
    promises are never negative: ``x >= c`` with ``c >= 0``, ``x > c`` with ``c >= -1``, and
    the same written the other way round (``0 <= x``)."""
    found = set()
    for op in block.ops:
        if not isinstance(op, ops.AssumeOp) or not isinstance(op.cond.owner, ops.CompareOp):
            continue
        cmp = op.cond.owner
        pred = str(getattr(cmp.pred, "value", cmp.pred))
        x, c = cmp.lhs, constant_of(cmp.rhs)
        if c is None:
            x, c, pred = cmp.rhs, constant_of(cmp.lhs), _MIRRORED.get(pred, pred)
        if not isinstance(c, (int, float)):
            continue
        if (pred == "ge" and c >= 0) or (pred == "gt" and c >= -1):
            found.add(x)
    return frozenset(found)


def analyse_function(fn: Function) -> dict[Value, AxisInfo]:
    """Axis facts for every value of ``fn`` (values absent from the result: nothing known)."""
    analysis = _Analysis()
    analysis.assumed = assumed_non_negative(fn.body)
    for arg, attrs in zip(fn.args, fn.arg_attrs or [{}] * len(fn.args)):
        div = int((attrs or {}).get("divisibility", 1))
        analysis.info[arg] = analysis.scalar(div)
    analysis.run_block(fn.body)
    return analysis.info


def vector_width_of_access(ptr_info: AxisInfo, mask_info: Optional[AxisInfo], elem_bytes: int,
                           max_bytes: int = 16, dim: int = -1) -> int:
    """How many consecutive elements along dimension ``dim`` (default: the last) one access
    may cover: bounded by ``max_bytes``, the run of consecutive addresses, their alignment
    and the mask's uniformity."""
    if not ptr_info.contiguity:
        return 1
    width = max(1, max_bytes // elem_bytes)
    width = min(width, ptr_info.contiguity[dim])
    width = min(width, max(1, _pow2_divisor(ptr_info.divisibility[dim]) // elem_bytes))
    if mask_info is not None and mask_info.constancy:
        width = min(width, mask_info.constancy[dim])
    return max(1, 1 << (max(1, width).bit_length() - 1))
