"""Checked mode as an IR rewrite, for backends that report failures the way they report
``tl.device_assert`` (the GPU backends: through the error word).

``insert_bounds_checks(fn)`` gives the kernel two more ``i64`` parameters per pointer
parameter, after the others: the address of the first byte the argument may reach (``lo``)
and the number of bytes from there (``size``); the launcher passes its buffer's.  Before each
load, store and atomic whose pointers come from known parameters (``pointers``), every lane
must address a whole element inside the span of one of them.  A lane that does not is
turned off (its access is not made: masks gain the test; an atomic compare-and-swap, which
has no mask, compares and writes back the value at the argument's first element instead), and
an ``AssertOp`` whose message starts with ``BOUNDS_PREFIX`` fails the launch: the host
raises ``OutOfBoundsError`` naming the access, the argument and the kernel's line.  Accesses
through pointers the analysis cannot trace (loaded from memory, made from integers) are not
checked.  Lanes a mask turns off are never checked.

An integer ``div`` or ``rem`` whose divisor is 0 in a lane fails the same way (a
``DIVISION_PREFIX`` assertion: ``LaunchError``), unless the kernel discards that lane's
result (the rule every checked mode follows; ``used_lanes`` finds the lanes, the cpu backend
evaluates them in its own checked mode):

* a masked load its operands come from through elementwise ops has that lane off (``x // y``
  over a ragged edge, the masked-off lanes loaded as 0);
* or every use of the result, through elementwise ops of the same shape, drops that lane: a
  ``select`` whose condition picks its other arm there (``tl.where(b != 0, a // b, 0)``), a
  store whose mask is off there.  Any other use (a reduction, a loop, a pointer, a store
  without a mask...) keeps every lane.

Such a check reads values defined after the division (the select's condition, the store's
mask): its assertion goes just before the last of those uses, in the division's block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import BOUNDS_PREFIX, DIVISION_PREFIX
from ..ir import ops as O
from ..ir.nodes import Block, Function, Op, Value
from ..ir.uses import Uses
from ..ir.types import PointerType, TileType, elem_type, i64, shape_of, with_shape
from .pointers import carried_sources, param_indices, pointer_origins

__all__ = ["insert_bounds_checks", "span_parameters", "BOUNDS_PREFIX", "DIVISION_PREFIX",
           "LaneUses", "UsedLanes", "Literal", "load_masks"]

_ACCESSES = (O.LoadOp, O.StoreOp, O.AtomicRMWOp, O.AtomicCASOp)
_ELEMENTWISE = (O.BinaryOp, O.UnaryOp, O.CompareOp, O.SelectOp, O.CastOp, O.BitcastOp, O.FmaOp)
#: ops whose result lane i needs their operands' lane i and nothing else
_LANEWISE = (O.BinaryOp, O.UnaryOp, O.CompareOp, O.CastOp, O.BitcastOp, O.FmaOp, O.UMulHiOp,
             O.HintOp)
_MAX_TERMS = 8          # more alternatives than this: every lane counts as used
_MAX_DEPTH = 16         # uses followed through at most this many elementwise ops

#: ``(value, on)``: holds in the lanes where the ``i1`` ``value`` is ``on``
Literal = tuple[Value, bool]


@dataclass(frozen=True)
class UsedLanes:
    """The lanes of a value that its uses keep: those where, for some term, every literal
    holds (all other lanes are discarded).  ``last`` is the last of those uses in the value's
    block: every literal's value is defined before it."""

    terms: tuple[tuple[Literal, ...], ...]
    last: Op


class LaneUses:
    """The uses of every value of ``fn``, to ask which lanes of a value are used."""

    def __init__(self, fn: Function) -> None:
        self.uses = Uses(fn)

    def used_lanes(self, value: Value, depth: int = 0) -> Optional[UsedLanes]:
        """Which lanes of ``value`` (an op's result) its uses keep; ``None``: every lane (a
        use that needs them all, or one this analysis does not follow)."""
        owner = value.owner
        users = self.uses.users(value)
        if not isinstance(owner, Op) or not users or depth > _MAX_DEPTH:
            return None
        block = self.uses.block_of(owner)
        terms: list[tuple[Literal, ...]] = []
        last: Optional[Op] = None
        for user in users:
            if self.uses.block_of(user) is not block:
                return None
            found = self._kept_by(user, value, depth)
            if found is None:
                return None
            terms.extend(found.terms)
            if len(terms) > _MAX_TERMS:
                return None
            if last is None or self.uses.position(found.last) > self.uses.position(last):
                last = found.last
        assert last is not None
        return UsedLanes(tuple(terms), last)

    def _kept_by(self, user: Op, value: Value, depth: int) -> Optional[UsedLanes]:
        """The lanes of ``value`` that the one use ``user`` keeps."""
        if isinstance(user, O.SelectOp) and user.cond is not value and \
                (user.true_value is value) != (user.false_value is value):
            literal = (user.cond, user.true_value is value)
            then = self.used_lanes(user.result, depth + 1)
            if then is None:
                return UsedLanes(((literal,),), user)
            last = then.last if self.uses.position(then.last) > self.uses.position(user) else user
            return UsedLanes(tuple(term + (literal,) for term in then.terms), last)
        if isinstance(user, O.StoreOp) and user.value is value and user.mask is not None and \
                value not in (user.ptr, user.mask):
            return UsedLanes((((user.mask, True),),), user)
        if isinstance(user, _LANEWISE) and len(user.results) == 1 and \
                shape_of(user.result.type) == shape_of(value.type):
            return self.used_lanes(user.result, depth + 1)
        return None


def span_parameters(fn: Function) -> list[int]:
    """The indices of ``fn``'s pointer parameters, in the order their spans follow them."""
    return [i for i, a in enumerate(fn.body.args) if isinstance(a.type, PointerType)]


def _access_name(op: Op) -> str:
    if isinstance(op, O.AtomicRMWOp):
        return f"atomic {op.kind}"
    return "atomic cas" if isinstance(op, O.AtomicCASOp) else op.NAME


class _Checker:
    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.index_of = param_indices(fn)
        self.carried = carried_sources(fn)
        self.pointers = span_parameters(fn)
        names = [a.name or f"arg{i}" for i, a in enumerate(fn.body.args)]
        self.names = names
        self.spans: dict[int, tuple[Value, Value]] = {}
        for i in self.pointers:
            lo = self._param(f"{names[i]}_lo")
            size = self._param(f"{names[i]}_size")
            self.spans[i] = (lo, size)
        self.ops: list[Op] = []
        self.lane_uses = LaneUses(fn)
        #: op -> checks that must go just before it (they read values defined after the op
        #: they check)
        self.before: dict[Op, list[Op]] = {}

    def _param(self, name: str) -> Value:
        body = self.fn.body
        v = Value(i64, body, len(body.args), name)
        body.args.append(v)
        self.fn.arg_attrs.append({})
        return v

    def emit(self, op: Op) -> Value:
        self.ops.append(op)
        return op.result

    def const(self, value: int, t, loc) -> Value:
        return self.emit(O.ConstantOp(value, result_types=[t], loc=loc))

    def bcast(self, scalar: Value, shape: tuple, loc) -> Value:
        if not shape:
            return scalar
        return self.emit(O.SplatOp(scalar, result_types=[TileType(shape, scalar.type)], loc=loc))

    def binary(self, kind: str, a: Value, b: Value, loc) -> Value:
        return self.emit(O.BinaryOp(kind, a, b, loc=loc))

    def compare(self, pred: str, a: Value, b: Value, loc) -> Value:
        return self.emit(O.CompareOp(pred, a, b, loc=loc))

    def in_bounds(self, op: Op, origins: list[int]) -> Value:
        """``i1`` per lane: the lane's element lies in the span of one of ``origins``."""
        loc, ptr = op.loc, op.ptr
        shape = shape_of(ptr.type)
        elem_bytes = elem_type(ptr.type).pointee.nbytes
        addr = self.emit(O.BitcastOp(ptr, result_types=[with_shape(i64, shape)], loc=loc))
        ok: Optional[Value] = None
        for i in origins:
            lo, size = self.spans[i]
            off = self.binary("sub", addr, self.bcast(lo, shape, loc), loc)
            limit = self.binary("sub", size, self.const(elem_bytes, i64, loc), loc)
            inside = self.binary("and",
                                 self.compare("ge", off, self.const(0, with_shape(i64, shape),
                                                                    loc), loc),
                                 self.compare("le", off, self.bcast(limit, shape, loc), loc),
                                 loc)
            ok = inside if ok is None else self.binary("or", ok, inside, loc)
        assert ok is not None
        return ok

    def check(self, op: Op) -> None:
        origins = pointer_origins(op.ptr, self.index_of, self.carried)
        if not origins:
            return                              # untraceable: not checked
        origins = sorted(origins)
        loc = op.loc
        ok = self.in_bounds(op, origins)
        mask = getattr(op, "mask", None)
        held = ok if mask is None else self.binary(
            "or", ok, self.emit(O.UnaryOp("not", mask, loc=loc)), loc)
        args = " or ".join(f"'{self.names[i]}'" for i in origins)
        message = (f"{BOUNDS_PREFIX}{_access_name(op)} through {args}: an address outside "
                   f"the argument's memory")
        self.ops.append(O.AssertOp(held, message, loc=loc))
        if isinstance(op, O.AtomicCASOp):
            # no mask: a failing lane compares and swaps the argument's first element with
            # the value it read, which leaves memory as it was
            base = self.bcast(self.fn.body.args[origins[0]], shape_of(op.ptr.type), loc)
            op.ptr = self.emit(O.SelectOp(ok, op.ptr, base, loc=loc))
            op.value = self.emit(O.SelectOp(ok, op.value, op.cmp, loc=loc))
        else:
            op.mask = ok if mask is None else self.binary("and", mask, ok, loc)

    def division(self, op: O.BinaryOp) -> Optional[Op]:
        """Assert the divisor of an integer ``div``/``rem`` is not 0 where the lane's result
        is kept (module docstring); returns the op the check must go before when that is a
        later use of the result (``None``: before ``op``)."""
        loc, divisor = op.loc, op.rhs
        zero = self.const(0, divisor.type, loc)
        held = self.compare("ne", divisor, zero, loc)
        for mask in load_masks(op):
            held = self.binary("or", held, self.emit(O.UnaryOp("not", mask, loc=loc)), loc)
        used = self.lane_uses.used_lanes(op.result)
        if used is not None:
            held = self.binary("or", held, self.emit(O.UnaryOp(
                "not", self.any_term(used.terms, loc), loc=loc)), loc)
        name = "division" if op.kind == "div" else "remainder"
        self.ops.append(O.AssertOp(held, f"{DIVISION_PREFIX}integer {name} by zero", loc=loc))
        return used.last if used is not None else None

    def any_term(self, terms: tuple, loc) -> Value:
        """``i1`` per lane: some term has every literal holding (``terms`` is not empty)."""
        result: Optional[Value] = None
        for term in terms:
            conj: Optional[Value] = None
            for value, on in term:
                lit = value if on else self.emit(O.UnaryOp("not", value, loc=loc))
                conj = lit if conj is None else self.binary("and", conj, lit, loc)
            assert conj is not None
            result = conj if result is None else self.binary("or", result, conj, loc)
        assert result is not None
        return result

    def block(self, block: Block) -> None:
        out: list[Op] = []
        for op in block.ops:
            for region in op.regions:
                self.block(region)
            out.extend(self.before.pop(op, ()))
            if isinstance(op, _ACCESSES):
                self.ops = []
                self.check(op)
                out.extend(self.ops)
            elif isinstance(op, O.BinaryOp) and op.kind in ("div", "rem") and \
                    _is_integer(op.rhs):
                self.ops = []
                later = self.division(op)
                if later is None:
                    out.extend(self.ops)
                else:
                    self.before.setdefault(later, []).extend(self.ops)
            out.append(op)
        block.ops = out


def _is_integer(v: Value) -> bool:
    e = elem_type(v.type)
    return not isinstance(e, PointerType) and e.is_int and not e.is_bool


def load_masks(op: Op) -> list[Value]:
    """The masks (of ``op``'s shape) of the masked loads ``op``'s operands come from through
    elementwise ops."""
    masks, seen = [], set()
    stack = [v for v in op.operands if isinstance(v.type, TileType)]
    while stack:
        v = stack.pop()
        owner = v.owner
        if id(v) in seen or not isinstance(owner, Op):
            continue
        seen.add(id(v))
        if isinstance(owner, O.LoadOp) and owner.mask is not None:
            if shape_of(owner.mask.type) == shape_of(op.result.type):
                masks.append(owner.mask)
        elif isinstance(owner, _ELEMENTWISE):
            stack.extend(o for o in owner.operands if isinstance(o.type, TileType))
    return masks


def insert_bounds_checks(fn: Function) -> list[int]:
    """Rewrite ``fn`` in place (module docstring); returns ``span_parameters(fn)``, the
    pointer parameters whose ``(lo, size)`` now follow the others, in that order."""
    checker = _Checker(fn)
    checker.block(fn.body)
    return checker.pointers
