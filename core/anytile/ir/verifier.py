"""The IR verifier: checks that a module is well formed, in time linear in its size.

``verify_module`` checks, for every function:

* SSA scoping: each operand is defined earlier in its block or an enclosing one (or is a
  block argument in scope); no value is defined twice;
* terminators: ``yield``/``condition``/``return`` only as the last op of the block whose
  parent expects it; region blocks end in the terminator their op needs;
* each op's operand and result types, following the docstrings of ``anytile.ir.ops``
  (``_OP_CHECKS``), and result types equal to ``infer_types()`` where the op infers them;
* calls name a function of the module with matching argument and result types; kernels
  return nothing.

Problems raise ``IRVerificationError`` naming the op, its location and what is wrong.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional

from . import ops as O
from .core import TRAIT_TERMINATOR, UNKNOWN_LOC, Block, Function, Module, Op, Value
from .printer import ValueNamer, op_header
from .types import (PointerType, ScalarType, TileType, Type, elem_type, i1, shape_of,
                    with_shape)

__all__ = ["IRVerificationError", "verify_module", "verify_function", "verification_enabled",
           "verify_if_enabled"]


class IRVerificationError(Exception):
    """The IR is malformed (a compiler bug, not a user error)."""

    def __init__(self, message: str, op: Optional[Op] = None) -> None:
        self.op = op
        self.problem = message
        super().__init__(message)


# ---------------------------------------------------------------------------------------------
# Small type predicates
# ---------------------------------------------------------------------------------------------
def _is_scalar(t: Type) -> bool:
    return isinstance(t, ScalarType)


def _is_int(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_int


def _is_float(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_float


def _is_ptr(t: Type) -> bool:
    return isinstance(elem_type(t), PointerType)


def _bool_like(t: Type) -> Type:
    return with_shape(i1, shape_of(t))


def _bit_width(e: Any) -> int:
    return 64 if isinstance(e, PointerType) else e.bits


def _pointee_type(ptr_type: Type) -> Type:
    return with_shape(elem_type(ptr_type).pointee, shape_of(ptr_type))


class _Fail(Exception):
    """Raised inside per-op checks; turned into IRVerificationError with the op's context."""


def _expect(ok: bool, message: str) -> None:
    if not ok:
        raise _Fail(message)


def _same(a: Type, b: Type, what: str) -> None:
    _expect(a == b, f"{what}: expected {b}, found {a}")


# ---------------------------------------------------------------------------------------------
# Per-op type rules (by op NAME); each raises _Fail with a plain message
# ---------------------------------------------------------------------------------------------
def _check_constant(op: O.ConstantOp, ctx: "_Checker") -> None:
    t = op.result.type
    e = elem_type(t)
    v = op.value
    if isinstance(e, ScalarType) and e.is_float:
        _expect(isinstance(v, (int, float)), f"float constant needs a number, found {v!r}")
    else:
        _expect(isinstance(v, int), f"constant of type {t} needs an int value, found {v!r}")
        bits = _bit_width(e)
        lo = 0 if bits == 1 else -(1 << (bits - 1))
        _expect(lo <= v < (1 << bits), f"constant {v} does not fit in {e}")


def _check_axis_attr(op: Op, ctx: "_Checker") -> None:
    _expect(op.axis in (0, 1, 2), f"axis must be 0, 1 or 2, found {op.axis!r}")


def _check_arange(op: O.ArangeOp, ctx: "_Checker") -> None:
    n = op.end - op.start
    _expect(n > 0 and n & (n - 1) == 0,
            f"arange size end - start must be a power of 2, found {op.end} - {op.start} = {n}")


def _check_splat(op: O.SplatOp, ctx: "_Checker") -> None:
    src, res = op.src.type, op.result.type
    _expect(not isinstance(src, TileType), f"splat source must be a scalar, found {src}")
    _expect(isinstance(res, TileType) and res.elem == src,
            f"splat of {src} must give a tile of {src}, found {res}")


def _check_broadcast(op: O.BroadcastOp, ctx: "_Checker") -> None:
    src, res = op.src.type, op.result.type
    _expect(isinstance(src, TileType) and isinstance(res, TileType),
            f"broadcast needs tiles, found {src} -> {res}")
    _expect(src.elem == res.elem, f"broadcast changes element type {src.elem} -> {res.elem}")
    _expect(src.rank == res.rank, f"broadcast changes rank {src} -> {res}")
    for s, r in zip(src.shape, res.shape):
        _expect(s == r or s == 1, f"cannot broadcast {src} to {res}")


def _check_reshape(op: O.ReshapeOp, ctx: "_Checker") -> None:
    src, res = op.src.type, op.result.type
    _expect(isinstance(res, TileType), f"reshape result must be a tile, found {res}")
    _expect(elem_type(src) == res.elem, f"reshape changes element type {src} -> {res}")
    n = src.numel if isinstance(src, TileType) else 1
    _expect(n == res.numel, f"reshape changes the element count {src} -> {res}")


def _check_expand_dims(op: O.ExpandDimsOp, ctx: "_Checker") -> None:
    rank = len(shape_of(op.src.type))
    _expect(0 <= op.axis <= rank, f"expand_dims axis {op.axis} out of range for {op.src.type}")


def _check_permute(op: O.PermuteOp, ctx: "_Checker") -> None:
    rank = len(shape_of(op.src.type))
    _expect(isinstance(op.src.type, TileType), f"permute needs a tile, found {op.src.type}")
    _expect(sorted(op.order) == list(range(rank)),
            f"permute order {op.order} is not a permutation of {rank} dimensions")


_INT_ONLY_BINARY = frozenset({"and", "or", "xor", "shl", "shr"})


def _check_binary(op: O.BinaryOp, ctx: "_Checker") -> None:
    _expect(op.kind in O.BINARY_KINDS, f"unknown binary kind {op.kind!r}")
    lt, rt = op.lhs.type, op.rhs.type
    _expect(lt == rt, f"operand types differ: {lt} vs {rt}")
    _expect(not _is_ptr(lt), f"binary {op.kind} on pointers ({lt}); use addptr")
    if op.kind == "fdiv":
        _expect(_is_float(lt), f"fdiv needs floats, found {lt}")
    if op.kind in _INT_ONLY_BINARY:
        _expect(_is_int(lt), f"{op.kind} needs integers, found {lt}")


def _check_compare(op: O.CompareOp, ctx: "_Checker") -> None:
    _expect(op.pred in O.COMPARE_PREDICATES, f"unknown compare predicate {op.pred!r}")
    _expect(op.lhs.type == op.rhs.type, f"operand types differ: {op.lhs.type} vs {op.rhs.type}")


def _check_unary(op: O.UnaryOp, ctx: "_Checker") -> None:
    _expect(op.kind in O.UNARY_KINDS, f"unknown unary kind {op.kind!r}")
    t = op.src.type
    _expect(not _is_ptr(t), f"unary {op.kind} on pointers ({t})")
    if op.kind in O.FLOAT_ONLY_UNARY:
        _expect(_is_float(t), f"{op.kind} needs a float operand, found {t}")
    if op.kind == "not":
        _expect(_is_int(t), f"not needs an integer operand, found {t}")


def _check_fma(op: O.FmaOp, ctx: "_Checker") -> None:
    _expect(op.a.type == op.b.type == op.c.type,
            f"operand types differ: {op.a.type}, {op.b.type}, {op.c.type}")
    _expect(_is_float(op.a.type), f"fma needs floats, found {op.a.type}")


def _check_umulhi(op: O.UMulHiOp, ctx: "_Checker") -> None:
    _expect(op.lhs.type == op.rhs.type, f"operand types differ: {op.lhs.type} vs {op.rhs.type}")
    _expect(_is_int(op.lhs.type), f"umulhi needs integers, found {op.lhs.type}")


def _check_select(op: O.SelectOp, ctx: "_Checker") -> None:
    tv, fv = op.true_value.type, op.false_value.type
    _expect(tv == fv, f"true and false values differ: {tv} vs {fv}")
    _same(op.cond.type, _bool_like(tv), "select condition")


def _check_cast(op: O.CastOp, ctx: "_Checker") -> None:
    src, res = op.src.type, op.result.type
    _expect(shape_of(src) == shape_of(res), f"cast changes shape {src} -> {res}")
    se, re_ = elem_type(src), elem_type(res)
    _expect(isinstance(se, ScalarType) == isinstance(re_, ScalarType),
            f"cast between a pointer and a number ({src} -> {res}); use bitcast")


def _check_bitcast(op: O.BitcastOp, ctx: "_Checker") -> None:
    src, res = op.src.type, op.result.type
    _expect(shape_of(src) == shape_of(res), f"bitcast changes shape {src} -> {res}")
    _expect(_bit_width(elem_type(src)) == _bit_width(elem_type(res)),
            f"bitcast changes bit width {src} -> {res}")


def _check_hint(op: O.HintOp, ctx: "_Checker") -> None:
    for name in ("multiple_of", "max_contiguous"):
        v = getattr(op, name)
        _expect(v is None or (isinstance(v, tuple) and all(isinstance(x, int) and x > 0
                                                           for x in v)),
                f"{name} must be None or a tuple of positive ints, found {v!r}")


def _check_mask(mask: Optional[Value], ptr_type: Type) -> None:
    if mask is not None:
        _same(mask.type, _bool_like(ptr_type), "mask")


def _check_addptr(op: O.AddPtrOp, ctx: "_Checker") -> None:
    pt, ot = op.ptr.type, op.offset.type
    _expect(_is_ptr(pt), f"addptr base must be a pointer, found {pt}")
    _expect(_is_int(ot), f"addptr offset must be an integer, found {ot}")
    _expect(shape_of(pt) == shape_of(ot), f"addptr shapes differ: {pt} vs {ot}")


def _check_load(op: O.LoadOp, ctx: "_Checker") -> None:
    _expect(_is_ptr(op.ptr.type), f"load needs pointers, found {op.ptr.type}")
    _check_mask(op.mask, op.ptr.type)
    if op.other is not None:
        _same(op.other.type, _pointee_type(op.ptr.type), "load other")


def _check_store(op: O.StoreOp, ctx: "_Checker") -> None:
    _expect(_is_ptr(op.ptr.type), f"store needs pointers, found {op.ptr.type}")
    _same(op.value.type, _pointee_type(op.ptr.type), "stored value")
    _check_mask(op.mask, op.ptr.type)


_SEMS = ("relaxed", "acquire", "release", "acq_rel")
_SCOPES = ("gpu", "cta", "sys")


def _check_atomic_attrs(op: Op) -> None:
    _expect(op.sem in _SEMS, f"unknown memory semantics {op.sem!r}")
    _expect(op.scope in _SCOPES, f"unknown scope {op.scope!r}")


def _check_atomic_rmw(op: O.AtomicRMWOp, ctx: "_Checker") -> None:
    _expect(op.kind in O.ATOMIC_KINDS, f"unknown atomic kind {op.kind!r}")
    _expect(_is_ptr(op.ptr.type), f"atomic needs pointers, found {op.ptr.type}")
    _same(op.value.type, _pointee_type(op.ptr.type), "atomic value")
    _check_mask(op.mask, op.ptr.type)
    _check_atomic_attrs(op)


def _check_atomic_cas(op: O.AtomicCASOp, ctx: "_Checker") -> None:
    _expect(_is_ptr(op.ptr.type), f"atomic_cas needs pointers, found {op.ptr.type}")
    _same(op.cmp.type, _pointee_type(op.ptr.type), "atomic_cas cmp")
    _same(op.value.type, _pointee_type(op.ptr.type), "atomic_cas value")
    _check_atomic_attrs(op)


def _check_combine(op: Op, ctx: "_Checker") -> None:
    """reduce/scan: one shape of tiles, combine(lhs_0..lhs_n-1, rhs_0..rhs_n-1) -> n scalars."""
    _expect(len(op.srcs) > 0, f"{op.NAME} needs at least one source")
    shape = shape_of(op.srcs[0].type)
    _expect(len(shape) > 0, f"{op.NAME} needs tiles, found {op.srcs[0].type}")
    for s in op.srcs:
        _expect(shape_of(s.type) == shape, f"{op.NAME} sources differ in shape: "
                f"{op.srcs[0].type} vs {s.type}")
    _expect(0 <= op.axis < len(shape), f"axis {op.axis} out of range for {op.srcs[0].type}")
    elems = [elem_type(s.type) for s in op.srcs]
    ctx.check_block_args(op.combine, elems + elems, "combine")
    ctx.check_terminator(op.combine, "yield", elems, "combine")


def _check_dot(op: O.DotOp, ctx: "_Checker") -> None:
    a, b, acc = op.a.type, op.b.type, op.acc.type
    _expect(all(isinstance(t, TileType) and t.rank in (2, 3) for t in (a, b, acc))
            and a.rank == b.rank == acc.rank, f"dot needs 2-D (or batched 3-D) tiles, "
            f"found {a}, {b}, {acc}")
    *batch_a, m, k = a.shape
    *batch_b, k2, n = b.shape
    _expect(k == k2 and batch_a == batch_b,
            f"dot inner dimensions differ: {a} @ {b}")
    _expect(tuple(acc.shape) == (*batch_a, m, n), f"dot accumulator {acc} is not {m}x{n}")
    _expect(a.elem == b.elem, f"dot inputs differ in element type: {a.elem} vs {b.elem}")
    _expect(_is_float(a) == _is_float(acc) and not _is_ptr(a),
            f"dot of {a.elem} cannot accumulate in {acc.elem}")
    _expect(op.input_precision in ("ieee", "tf32", "tf32x3"),
            f"unknown input_precision {op.input_precision!r}")


def _check_for(op: O.ForOp, ctx: "_Checker") -> None:
    lt = op.lower.type
    _expect(_is_scalar(lt) and lt.is_int and not lt.is_bool,
            f"for bounds must be scalar integers, found {lt}")
    _same(op.upper.type, lt, "for upper bound")
    _same(op.step.type, lt, "for step")
    inits = [v.type for v in op.inits]
    ctx.check_block_args(op.body, [lt] + inits, "for body")
    ctx.check_terminator(op.body, "yield", inits, "for body")
    ctx.check_results(op, inits)
    _expect(op.num_stages is None or isinstance(op.num_stages, int),
            f"num_stages must be None or an int, found {op.num_stages!r}")


def _check_if(op: O.IfOp, ctx: "_Checker") -> None:
    _same(op.cond.type, i1, "if condition")
    results = [r.type for r in op.results]
    for name in ("then_body", "else_body"):
        block = getattr(op, name)
        ctx.check_block_args(block, [], name)
        ctx.check_terminator(block, "yield", results, name)


def _check_while(op: O.WhileOp, ctx: "_Checker") -> None:
    inits = [v.type for v in op.inits]
    results = [r.type for r in op.results]
    ctx.check_block_args(op.before, inits, "while before")
    ctx.check_terminator(op.before, "condition", results, "while before")
    ctx.check_block_args(op.after, results, "while after")
    ctx.check_terminator(op.after, "yield", inits, "while after")


def _check_condition(op: O.ConditionOp, ctx: "_Checker") -> None:
    _same(op.cond.type, i1, "condition")


def _check_call(op: O.CallOp, ctx: "_Checker") -> None:
    if ctx.module is None:
        return  # verify_function alone: the callee is not known
    callee = ctx.module.functions.get(op.callee)
    _expect(callee is not None, f"call of unknown function @{op.callee}")
    _expect(not callee.is_kernel, f"call of kernel @{op.callee}; only jit functions can be called")
    params = [a.type for a in callee.args]
    args = [a.type for a in op.args]
    _expect(args == params, f"call @{op.callee} argument types {_fmt(args)} do not match "
            f"its parameters {_fmt(params)}")
    ctx.check_results(op, list(callee.result_types))


def _check_assert(op: O.AssertOp, ctx: "_Checker") -> None:
    _same(op.cond.type, _bool_like(op.cond.type), "assert condition")
    _expect(isinstance(op.message, str), "assert message must be a string")


def _fmt(types: list[Type]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


_OP_CHECKS: dict[str, Callable[[Any, "_Checker"], None]] = {
    "constant": _check_constant, "program_id": _check_axis_attr,
    "num_programs": _check_axis_attr, "arange": _check_arange, "splat": _check_splat,
    "broadcast": _check_broadcast, "expand_dims": _check_expand_dims,
    "reshape": _check_reshape, "permute": _check_permute, "binary": _check_binary,
    "compare": _check_compare, "unary": _check_unary, "fma": _check_fma,
    "umulhi": _check_umulhi, "select": _check_select, "cast": _check_cast,
    "bitcast": _check_bitcast, "hint": _check_hint, "addptr": _check_addptr,
    "load": _check_load, "store": _check_store, "atomic_rmw": _check_atomic_rmw,
    "atomic_cas": _check_atomic_cas, "reduce": _check_combine, "scan": _check_combine,
    "dot": _check_dot, "for": _check_for, "if": _check_if, "while": _check_while,
    "condition": _check_condition, "call": _check_call, "assert": _check_assert,
}

# Ops whose results are given explicitly even though their class has an ``infer_types``.
_EXPLICIT_RESULTS = frozenset({"if", "while", "call"})


def _infers_types(op: Op) -> bool:
    return type(op).infer_types is not Op.infer_types and op.NAME not in _EXPLICIT_RESULTS


# ---------------------------------------------------------------------------------------------
# The walk
# ---------------------------------------------------------------------------------------------
class _Checker:
    """Walks one function once, keeping the set of values in scope."""

    def __init__(self, fn: Function, module: Optional[Module]) -> None:
        self.fn = fn
        self.module = module
        self.in_scope: set[Value] = set()
        self.defined: set[Value] = set()
        self.seen_ops: set[int] = set()

    def fail(self, op: Optional[Op], problem: str) -> IRVerificationError:
        where = f"in @{self.fn.name}"
        if op is None:
            return IRVerificationError(f"{where}: {problem}")
        loc = f" at {op.loc}" if op.loc != UNKNOWN_LOC else ""
        text = op_header(op, ValueNamer.for_function(self.fn))
        return IRVerificationError(f"{where}: op '{op.NAME}'{loc}: {problem}\n    {text}", op)

    # -- helpers used by per-op rules --------------------------------------------------------
    @staticmethod
    def check_block_args(block: Block, types: list[Type], what: str) -> None:
        found = [a.type for a in block.args]
        _expect(found == types, f"{what} arguments {_fmt(found)} should be {_fmt(types)}")

    @staticmethod
    def check_terminator(block: Block, name: str, types: list[Type], what: str) -> None:
        last = block.ops[-1] if block.ops else None
        _expect(last is not None and last.NAME == name,
                f"{what} must end with '{name}', found "
                f"{repr(last.NAME) if last is not None else 'an empty block'}")
        found = [v.type for v in last.values]
        _expect(found == types, f"{what} {name}s {_fmt(found)}, expected {_fmt(types)}")

    @staticmethod
    def check_results(op: Op, types: list[Type]) -> None:
        found = [r.type for r in op.results]
        _expect(found == types, f"result types {_fmt(found)} should be {_fmt(types)}")

    # -- structure ----------------------------------------------------------------------------
    def define(self, value: Value, op: Optional[Op]) -> None:
        if value in self.defined:
            shown = ValueNamer.for_function(self.fn)(value)
            raise self.fail(op, f"value {shown} is defined twice")
        self.defined.add(value)
        self.in_scope.add(value)

    def check_operands(self, op: Op) -> None:
        for name in op.OPERANDS:
            v = getattr(op, name)
            is_list_field = str(op.__dataclass_fields__[name].type).startswith("list")
            if is_list_field != isinstance(v, list):
                raise self.fail(op, f"operand '{name}' must be "
                                    f"{'a list of values' if is_list_field else 'one value'}, "
                                    f"found {type(v).__name__}")
            if isinstance(v, list):
                values = v
            elif v is None:
                if op.__dataclass_fields__[name].default is not None:
                    raise self.fail(op, f"operand '{name}' is missing")
                continue
            else:
                values = [v]
            for x in values:
                if not isinstance(x, Value):
                    raise self.fail(op, f"operand '{name}' is not a Value: {x!r}")
                if x not in self.in_scope:
                    shown = ValueNamer.for_function(self.fn)(x)
                    raise self.fail(op, f"operand '{name}' ({shown}) is not defined before "
                                        f"this op in its block or an enclosing one")

    def block(self, block: Block, top_level: bool) -> None:
        """Check ``block``; its args and ops leave scope at the end.  The last op of a region
        block may be any terminator (the parent op checks which); a function body's only
        'return'."""
        local: list[Value] = []
        for a in block.args:
            self.define(a, None)
            local.append(a)
        last = len(block.ops) - 1
        for i, op in enumerate(block.ops):
            if id(op) in self.seen_ops:
                raise self.fail(op, "the same op object appears twice in the IR")
            self.seen_ops.add(id(op))
            if op.has_trait(TRAIT_TERMINATOR):
                if i != last:
                    raise self.fail(op, "terminator is not the last op of its block")
                if top_level != (op.NAME == "return"):
                    raise self.fail(op, "'return' may only end a function body" if not top_level
                                    else "a function body must not end with a region terminator")
            self.check_operands(op)
            for region in op.regions:
                self.block(region, top_level=False)
            self.check_types(op)
            for r in op.results:
                if r.owner is not op:
                    raise self.fail(op, "a result's owner is not this op")
                self.define(r, op)
                local.append(r)
        for v in local:
            self.in_scope.discard(v)

    def check_types(self, op: Op) -> None:
        try:
            rule = _OP_CHECKS.get(op.NAME)
            if rule is not None:
                rule(op, self)
            if _infers_types(op):
                try:
                    inferred = op.infer_types()
                except Exception as e:  # noqa: BLE001 -- malformed operands make inference fail
                    raise _Fail(f"cannot infer result types: {e}") from None
                self.check_results(op, list(inferred))
        except _Fail as e:
            raise self.fail(op, str(e)) from None

    def function(self) -> None:
        fn = self.fn
        if fn.is_kernel and fn.result_types:
            raise self.fail(None, "a kernel cannot return values")
        if len(fn.arg_attrs) > len(fn.args):
            raise self.fail(None, "more arg_attrs than parameters")
        self.block(fn.body, top_level=True)
        last = fn.body.ops[-1] if fn.body.ops else None
        if last is not None and last.NAME == "return":
            found = [v.type for v in last.values]
            if found != list(fn.result_types):
                raise self.fail(last, f"returns {_fmt(found)} but @{fn.name} is declared to "
                                      f"return {_fmt(list(fn.result_types))}")
        elif not fn.is_kernel:
            raise self.fail(last, f"function @{fn.name} must end with 'return'")


def verify_function(fn: Function, module: Optional[Module] = None) -> None:
    """Check ``fn`` (calls are checked against ``module`` when given)."""
    _Checker(fn, module).function()


def verify_module(module: Module) -> None:
    """Check every function of ``module``; raises ``IRVerificationError`` on the first problem."""
    if module.kernel_name and module.kernel_name not in module.functions:
        raise IRVerificationError(f"module's kernel @{module.kernel_name} does not exist")
    for name, fn in module.functions.items():
        if name != fn.name:
            raise IRVerificationError(f"function @{fn.name} is registered as @{name}")
        verify_function(fn, module)


def verification_enabled() -> bool:
    """Whether ``ANYTILE_VERIFY`` asks for the IR to be verified after every pass and every
    compile stage that produces IR (on in the test configuration)."""
    return os.environ.get("ANYTILE_VERIFY", "") not in ("", "0")


def verify_if_enabled(module: Module, after: str) -> None:
    """``verify_module(module)`` when ``verification_enabled()``; a problem names the pass or
    stage (``after``) that produced the module."""
    if not verification_enabled():
        return
    try:
        verify_module(module)
    except IRVerificationError as e:
        raise IRVerificationError(f"after {after}: {e}", e.op) from None
