"""Boxes found in plain pointer loads, for the copy unit, which copies whole boxes by descriptor
(``tma.py``).

A 2-D tile read through pointers that step through memory as a rectangle does::

    a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :])        # rows sam apart, columns 1

is the box whose first element is at row ``r0`` and column ``c0`` of the array at ``a_ptr``
with rows ``sam`` elements apart -- where ``rm = r0 + arange`` and the scalar parts of the
offset sum to ``r0 * sam + c0``.  This pass takes each such load's pointer (and mask) apart
into sums of products and, where it can, makes the load a ``nvidia.box_load`` of that box
(``box``, ``array``, ``box_order``) with the condition under which the box *is* the tile
(``box_exact``), computed from scalars in the kernel before the load:

* the box lies inside the array the map describes: ``r0 >= 0``, ``0 <= c0`` and
  ``c0 + columns <= sam`` (its rows do not run into the next row), below ``ROWS`` rows;
* the mask is true everywhere: each of its comparisons of an index (``rk[None, :] < K - k``)
  against a scalar holds at the index's first or last element;
* an index wrapped by a remainder (``(r0 + arange) % M``, Triton's tutorial) does not wrap:
  ``r0 >= 0`` and ``r0 + rows <= M``.

The array the host describes is ``ROWS`` rows of ``sam`` columns (``sam`` apart) from the base
pointer: where the checks hold the box reads exactly the elements the pointers do, and no
other; where they do not (a tile at a masked edge, a short or negative stride) the target
copies by pointer and mask, as before.  The map itself is made for each launch from the
parameters (``box_maps.BoxMap.guarded``).

A pointer tile carried through the loop and advanced by the same offset each iteration
(``a_ptrs += BK``) is read as its first value plus the iteration's count of steps; the load
then reads that sum (``split_loop_addresses``' form) instead of the carried tile, which goes
when nothing else reads it -- the box's coordinates must be known at any iteration, and a
tile that is no longer carried costs nothing where the box is copied.

Offsets are summed in 64 bits, each term widened by its own signedness; as in
``split_loop_addresses``, an offset whose 32-bit computation wrapped around is assumed not
to happen (its address lay far outside its tensor).  Narrower sums and products (8 or 16
bits, which wrap at values an offset may well take) are kept whole, as terms.  Loads whose offsets are unsigned, or
whose pointers or masks are built any other way, are left alone.  It runs before the
pipelines, only where the copy unit copies boxes; ``drop_unused_boxes`` makes the loads the
pipelines left as loads plain loads again (they are read by pointer).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from anytile.ir import ops
from anytile.ir import Block, Function, Op, Value, dce_function, walk
from anytile.ir.rules import is_int, is_ptr
from anytile.ir.types import TileType, elem_type, i32, i64, shape_of

from ..dialect import BoxLoadOp, refine

__all__ = ["find_pointer_boxes", "drop_unused_boxes", "ROWS"]

#: the rows of a pointer load's array: as many as 32-bit box coordinates reach
ROWS = (1 << 31) - 1
#: terms a sum may hold before the pass gives up on it
_MOST_TERMS = 16


@dataclass(frozen=True)
class _Term:
    """``coef * product(factors)``: integer scalars (IR values), each widened to 64 bits."""

    coef: int
    factors: tuple = ()

    def times(self, other: "_Term") -> "_Term":
        return _Term(self.coef * other.coef, self.factors + other.factors)


@dataclass
class _Sum:
    """An integer tile (or scalar) as ``sum(scalars) + sum over dims d of index_d * stride_d``:
    ``index[d] = (n, stride)``, the index ``0 .. n-1`` along dimension ``d`` times the term
    ``stride``; ``checks``: conditions (built later) under which this is the value."""

    scalars: list = field(default_factory=list)
    index: dict = field(default_factory=dict)
    checks: list = field(default_factory=list)

    @property
    def uniform(self) -> bool:
        return not self.index

    def plus(self, other: "_Sum", sign: int = 1) -> Optional["_Sum"]:
        if set(self.index) & set(other.index):
            return None
        index = dict(self.index)
        for d, (n, s) in other.index.items():
            index[d] = (n, _Term(sign * s.coef, s.factors))
        scalars = self.scalars + [_Term(sign * t.coef, t.factors) for t in other.scalars]
        return _Sum(scalars, index, self.checks + other.checks) if len(scalars) <= _MOST_TERMS else None

    def scaled(self, by: _Term) -> "_Sum":
        return _Sum([t.times(by) for t in self.scalars],
                    {d: (n, s.times(by)) for d, (n, s) in self.index.items()}, list(self.checks))


@dataclass
class _Pointer:
    """A pointer tile as ``base + offsets``; ``rewrite``: the value the load should read
    instead (a carried tile read as its first value plus the steps so far), or ``None``."""

    base: Value
    offsets: _Sum
    rewrite: Optional[Callable[[], Value]] = None


def find_pointer_boxes(fn: Function, wanted: Callable[[ops.LoadOp], bool]) -> int:
    """Make every 2-D tile load of ``fn`` that ``wanted`` accepts a box load of the box its
    pointers read (module docstring); returns how many."""
    count = 0
    loops = {id(r): op for op in walk(fn.body) if isinstance(op, ops.ForOp) for r in op.regions}
    for block in [fn.body] + [r for op in walk(fn.body) for r in op.regions]:
        for load in [op for op in block.ops if isinstance(op, ops.LoadOp)]:
            if isinstance(load, BoxLoadOp) or load.volatile or \
                    not isinstance(load.ptr.type, TileType) or len(load.ptr.type.shape) != 2 or \
                    not wanted(load):
                continue
            count += _Finder(block, loops.get(id(block)), load).run()
    if count:
        dce_function(fn)         # carried pointer tiles nothing reads any more
    return count


def drop_unused_boxes(fn: Function) -> int:
    """Make the loads of pointer boxes (those with ``box_exact``) still in ``fn`` plain loads:
    the pipelines did not move them, so they are read by pointer; returns how many."""
    count = 0
    for op in walk(fn.body):
        if isinstance(op, BoxLoadOp) and op.box_exact:
            refine(op, ops.LoadOp, box=[], array=[])
            count += 1
    if count:
        dce_function(fn)
    return count


class _Finder:
    def __init__(self, block: Block, loop: Optional[ops.ForOp], load: ops.LoadOp) -> None:
        self.block, self.loop, self.load = block, loop, load
        self.loc = load.loc
        self.new: list[Op] = []
        self.widened: dict = {}

    # -- building ops --------------------------------------------------------------------------
    def emit(self, op: Op) -> Value:
        self.new.append(op)
        return op.result

    def const(self, value: int, t=i64) -> Value:
        return self.emit(ops.ConstantOp(value, result_types=[t], loc=self.loc))

    def wide(self, v: Value) -> Value:
        """``v`` as an ``i64`` (extended by its signedness)."""
        if v.type == i64:
            return v
        if id(v) not in self.widened:
            self.widened[id(v)] = self.emit(ops.CastOp(v, result_types=[i64], loc=self.loc))
        return self.widened[id(v)]

    def term(self, t: _Term) -> Value:
        out = self.const(t.coef) if t.coef != 1 or not t.factors else None
        for f in t.factors:
            w = self.wide(f)
            out = w if out is None else self.emit(ops.BinaryOp("mul", out, w, loc=self.loc))
        return out

    def total(self, terms: list) -> Value:
        if not terms:
            return self.const(0)
        out = self.term(terms[0])
        for t in terms[1:]:
            out = self.emit(ops.BinaryOp("add", out, self.term(t), loc=self.loc))
        return out

    def compare(self, pred: str, a: Value, b: Value) -> Value:
        return self.emit(ops.CompareOp(pred, a, b, loc=self.loc))

    # -- the load ------------------------------------------------------------------------------
    def run(self) -> int:
        load = self.load
        try:
            pointer = self._pointer(load.ptr, 0)
            checks = self._mask(load.mask, 0) if load.mask is not None else []
        except _NotAffine:
            return 0
        if not is_ptr(pointer.base.type) or shape_of(pointer.base.type):
            return 0
        shape = load.ptr.type.shape
        index = pointer.offsets.index
        if set(index) != {0, 1} or any(index[d][0] != shape[d] for d in (0, 1)):
            return 0
        # the dimension whose elements are adjacent is the array's columns
        unit = [d for d in (0, 1) if index[d][1] == _Term(1)]
        if len(unit) != 1:
            return 0
        cols_dim = unit[0]
        rows_dim = 1 - cols_dim
        stride = index[rows_dim][1]
        if stride.coef == 1 and len(stride.factors) == 1:
            leaf: Value = stride.factors[0]
            if not is_int(leaf.type) or elem_type(leaf.type).is_unsigned:
                return 0
        elif not stride.factors and stride.coef > 0:
            leaf = None
        else:
            return 0
        rows, cols = [], []
        for t in pointer.offsets.scalars:
            if leaf is not None and leaf in t.factors:
                rest = list(t.factors)
                rest.remove(leaf)
                rows.append(_Term(t.coef, tuple(rest)))
            elif leaf is None and t.coef % stride.coef == 0 and t.coef:
                rows.append(_Term(t.coef // stride.coef, t.factors))
            else:
                cols.append(t)
        # the ops: coordinates, then the conditions under which the box is the tile
        rewritten = pointer.rewrite() if pointer.rewrite is not None else None
        r0, c0 = self.total(rows), self.total(cols)
        width = self.const(stride.coef) if leaf is None else self.wide(leaf)
        zero = self.const(0)
        conditions = [self.compare("ge", r0, zero), self.compare("ge", c0, zero),
                      self.compare("le", self.emit(ops.BinaryOp("add", c0, self.const(shape[cols_dim]),
                                                                loc=self.loc)), width),
                      self.compare("le", r0, self.const(ROWS - shape[rows_dim]))]
        conditions.append(self.compare("le", width, self.const(ROWS)))   # the map's columns fit
        for check in pointer.offsets.checks + checks:
            conditions.append(check(self))
        exact = conditions[0]
        for c in conditions[1:]:
            exact = self.emit(ops.BinaryOp("and", exact, c, loc=self.loc))
        box = [self.emit(ops.CastOp(v, result_types=[i32], loc=self.loc)) for v in (r0, c0)]
        size = width if leaf is None else leaf
        array = [pointer.base, self.const(ROWS), size, size, self.const(1)]
        at = self.block.ops.index(load)
        # every value the new ops read is defined before the load (a term of the body's
        # later ops would not be)
        later = {id(r) for op in self.block.ops[at:] for r in op.results}
        if any(id(x) in later for op in self.new for x in op.operands):
            return 0
        self.block.ops[at:at] = self.new
        if rewritten is not None:
            load.ptr = rewritten
        refine(load, BoxLoadOp, box=box, array=array, box_exact=[exact],
               box_order=(1, 0) if cols_dim == 0 else ()).verify()
        return 1

    # -- taking values apart -------------------------------------------------------------------
    def scalar(self, v: Value, depth: int = 0) -> _Sum:
        """A scalar integer as a sum of products (its own leaf where it is anything else)."""
        op = v.owner
        if depth < 12 and isinstance(op, Op) and not elem_type(v.type).is_unsigned:
            if isinstance(op, ops.ConstantOp) and isinstance(op.value, int) and \
                    not isinstance(op.value, bool):
                return _Sum([_Term(op.value)])
            if isinstance(op, ops.CastOp) and is_int(op.src.type) and \
                    elem_type(op.src.type).bits <= elem_type(v.type).bits and \
                    not elem_type(op.src.type).is_unsigned and elem_type(op.src.type).bits > 1:
                return self.scalar(op.src, depth + 1)
            # (an 8- or 16-bit sum wraps at values a pointer may well reach: kept whole)
            if isinstance(op, ops.BinaryOp) and op.kind in ("add", "sub", "mul") and \
                    elem_type(v.type).bits >= 32:
                a, b = self.scalar(op.lhs, depth + 1), self.scalar(op.rhs, depth + 1)
                if op.kind != "mul":
                    out = a.plus(b, 1 if op.kind == "add" else -1)
                    if out is not None:
                        return out
                elif len(a.scalars) * len(b.scalars) <= _MOST_TERMS:
                    return _Sum([x.times(y) for x in a.scalars for y in b.scalars])
        if elem_type(v.type).is_unsigned or elem_type(v.type).bits < 8:
            raise _NotAffine
        return _Sum([_Term(1, (v,))])

    def tile(self, v: Value, depth: int = 0) -> _Sum:
        """An integer tile as a ``_Sum``; raises ``_NotAffine``."""
        if depth > 24:
            raise _NotAffine
        t = v.type
        if not isinstance(t, TileType):
            return self.scalar(v)
        if not is_int(t) or elem_type(t).is_unsigned or elem_type(t).bits < 32:
            raise _NotAffine
        op = v.owner
        if isinstance(op, ops.SplatOp):
            return self.scalar(op.src)
        if isinstance(op, ops.ConstantOp) and isinstance(op.value, int) and not isinstance(op.value, bool):
            return _Sum([_Term(op.value)])
        if isinstance(op, ops.ArangeOp):
            return _Sum([_Term(op.start)] if op.start else [], {0: (op.end - op.start, _Term(1))})
        if isinstance(op, ops.CastOp) and is_int(op.src.type) and \
                elem_type(op.src.type).bits <= elem_type(t).bits:
            return self.tile(op.src, depth + 1)
        if isinstance(op, (ops.ExpandDimsOp, ops.BroadcastOp, ops.PermuteOp)):
            return self.reshaped(op, self.tile(op.src, depth + 1))
        if isinstance(op, ops.BinaryOp) and op.kind in ("add", "sub"):
            out = self.tile(op.lhs, depth + 1).plus(self.tile(op.rhs, depth + 1),
                                                     1 if op.kind == "add" else -1)
            if out is None:
                raise _NotAffine
            return out
        if isinstance(op, ops.BinaryOp) and op.kind == "mul":
            a, b = self.tile(op.lhs, depth + 1), self.tile(op.rhs, depth + 1)
            if not b.uniform:
                a, b = b, a
            if not b.uniform or len(b.scalars) != 1 or (a.uniform and len(a.scalars) > _MOST_TERMS):
                raise _NotAffine
            out = a.scaled(b.scalars[0])
            out.checks += b.checks
            return out
        if isinstance(op, ops.BinaryOp) and op.kind == "rem":
            a, m = self.tile(op.lhs, depth + 1), self.tile(op.rhs, depth + 1)
            if len(a.index) != 1 or not m.uniform or m.checks:
                raise _NotAffine
            (n, step), = a.index.values()
            if step != _Term(1):
                raise _NotAffine
            start, bound = list(a.scalars), list(m.scalars)

            def within(f: "_Finder", start=start, bound=bound, n=n) -> Value:
                # (start + i) % bound is start + i for every i < n where 0 <= start, start + n <= bound
                s = f.total(start)
                end = f.emit(ops.BinaryOp("add", s, f.const(n), loc=f.loc))
                return f.emit(ops.BinaryOp("and", f.compare("ge", s, f.const(0)),
                                           f.compare("le", end, f.total(bound)), loc=f.loc))
            a.checks.append(within)
            return a
        raise _NotAffine

    @staticmethod
    def reshaped(op: Op, src: _Sum) -> _Sum:
        out_shape = op.result.type.shape
        if isinstance(op, ops.ExpandDimsOp):
            index = {(d if d < op.axis else d + 1): x for d, x in src.index.items()}
        elif isinstance(op, ops.PermuteOp):
            index = {list(op.order).index(d): x for d, x in src.index.items()}
        else:
            index = dict(src.index)
            if len(shape_of(op.src.type)) != len(out_shape):
                raise _NotAffine
        for d, (n, _) in index.items():
            if n != out_shape[d]:
                raise _NotAffine
        return _Sum(list(src.scalars), index, list(src.checks))

    def _pointer(self, v: Value, depth: int) -> _Pointer:
        """``v`` (a pointer tile or scalar) as a base and offsets; raises ``_NotAffine``."""
        if depth > 24:
            raise _NotAffine
        op = v.owner
        if not isinstance(v.type, TileType):         # a scalar pointer: base + offsets
            if isinstance(op, ops.AddPtrOp):
                inner = self._pointer(op.ptr, depth + 1)
                out = inner.offsets.plus(self.scalar(op.offset))
                if out is None:
                    raise _NotAffine
                return _Pointer(inner.base, out)
            return _Pointer(v, _Sum())
        if isinstance(op, ops.SplatOp):
            return self._pointer(op.src, depth + 1)
        if isinstance(op, (ops.ExpandDimsOp, ops.BroadcastOp, ops.PermuteOp)):
            inner = self._pointer(op.src, depth + 1)
            return _Pointer(inner.base, self.reshaped(op, inner.offsets))
        if isinstance(op, ops.AddPtrOp):
            inner = self._pointer(op.ptr, depth + 1)
            out = inner.offsets.plus(self.tile(op.offset))
            if out is None:
                raise _NotAffine
            return _Pointer(inner.base, out, inner.rewrite)
        loop = self.loop
        if loop is not None and depth == 0 and v in loop.body.args[1:]:
            return self.carried(v)
        raise _NotAffine

    def carried(self, arg: Value) -> _Pointer:
        """A pointer tile the loop carries, advanced by one offset each iteration: its first
        value plus that offset times the steps taken (``(iv - lower) / step``)."""
        loop = self.loop
        body = loop.body
        i = body.args.index(arg)
        advance = body.terminator.values[i - 1].owner
        if not isinstance(advance, ops.AddPtrOp) or advance.ptr is not arg:
            raise _NotAffine
        first = loop.inits[i - 1]
        start = self._pointer(first, 1)
        step = self.tile(advance.offset)
        # the same offset every iteration: built from values defined before the loop only
        inside = {id(r) for op in walk(body) for r in op.results} | {id(a) for a in body.args}
        if not step.uniform or step.checks or \
                any(id(f) in inside for t in step.scalars for f in t.factors):
            raise _NotAffine
        iv = body.args[0]
        since = self.emit(ops.BinaryOp("sub", self.wide(iv), self.wide(loop.lower), loc=self.loc))
        count = self.emit(ops.BinaryOp("div", since, self.wide(loop.step), loc=self.loc))
        offsets = start.offsets.plus(step.scaled(_Term(1, (count,))))
        if offsets is None:
            raise _NotAffine
        shape = arg.type.shape

        def rewrite(f: "_Finder" = self, step=step, count=count, first=first, shape=shape) -> Value:
            moved = f.emit(ops.BinaryOp("mul", f.total(step.scalars), f.wide(count), loc=f.loc))
            tile = f.emit(ops.SplatOp(moved, result_types=[TileType(shape, i64)], loc=f.loc))
            return f.emit(ops.AddPtrOp(first, tile, loc=f.loc))
        return _Pointer(start.base, offsets, rewrite)

    def _mask(self, m: Value, depth: int) -> list:
        """The checks under which the mask ``m`` is true everywhere."""
        if depth > 24:
            raise _NotAffine
        op = m.owner
        if not isinstance(m.type, TileType):
            return [lambda f, m=m: m]
        if isinstance(op, ops.SplatOp):
            return [lambda f, s=op.src: s]
        if isinstance(op, ops.ConstantOp):
            if op.value is True or op.value == 1:
                return []
            raise _NotAffine
        if isinstance(op, (ops.ExpandDimsOp, ops.BroadcastOp, ops.PermuteOp)):
            return self._mask(op.src, depth + 1)
        if isinstance(op, ops.BinaryOp) and op.kind == "and":
            return self._mask(op.lhs, depth + 1) + self._mask(op.rhs, depth + 1)
        if isinstance(op, ops.CompareOp) and op.pred in ("lt", "le", "gt", "ge"):
            a, b = self.tile(op.lhs), self.tile(op.rhs)
            pred = str(op.pred)
            if a.uniform:        # X < index  ->  index > X
                a, b = b, a
                pred = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[pred]
            if len(a.index) != 1 or not b.uniform:
                raise _NotAffine
            (n, step), = a.index.values()
            if step != _Term(1):
                raise _NotAffine
            start, bound, checks = list(a.scalars), list(b.scalars), a.checks + b.checks

            def holds(f: "_Finder", start=start, bound=bound, n=n, pred=pred) -> Value:
                # increasing in the index: < and <= hold everywhere where they hold at the
                # last element, > and >= where they hold at the first
                s = f.total(start)
                if pred in ("lt", "le"):
                    s = f.emit(ops.BinaryOp("add", s, f.const(n - 1), loc=f.loc))
                return f.compare(pred, s, f.total(bound))
            return checks + [holds]
        raise _NotAffine


class _NotAffine(Exception):
    """A value the pass does not take apart."""
