"""The IR verifier: checks that a module is well formed, in time linear in its size.

``verify_module`` checks, for every function, what all ops share:

* SSA scoping: each operand is defined earlier in its block or an enclosing one (or is a
  block argument in scope); no value is defined twice; no op object appears twice;
* terminators: ``yield``/``condition``/``return`` only as the last op of a block, ``return``
  only ending a function body (which op a region must end with, its parent op checks);
* operand fields hold what their op declares (one value, an optional one, a list); enum
  attributes (``Op.ENUM_ATTRS``) hold members of their enumeration;
* result types equal ``infer_types()`` for ops that infer them (not ``EXPLICIT_RESULTS``);
* layouts: in one function either every tile value carries a layout (laid-out IR) or none
  does, and a layout that has a ``rank`` has its tile's;
* calls to functions of the module; kernels return nothing; a called function's ``return``
  matches its signature.

Then each op checks its own rules: ``op.verify()`` (and ``op.verify_in_module(module)``),
defined on the op classes (``anytile.ir.ops``, the GPU ops of ``codegen.gpu.shared_ops``, a
backend's dialect: ``anytile.ir.dialects``, whose ops are accepted only while it is loaded).
Types are compared modulo layout.  Problems raise ``IRVerificationError`` naming the
function, the op, its location, what is wrong and the op's text.

``verify_if_enabled`` is what passes and compile stages call after rewriting the IR: it
verifies when ``ANYTILE_VERIFY`` is set (the test configuration sets it).
"""
from __future__ import annotations

import functools
import os
from typing import Any, Optional, Union

from .dialects import dialect_loaded
from .nodes import TRAIT_TERMINATOR, UNKNOWN_LOC, Block, Function, Module, Op, Value
from .printer import ValueNamer, op_header
from .rules import VerifyError, check_results, fmt_types, same_types
from .types import TileType

__all__ = ["IRVerificationError", "verify_module", "verify_function", "verification_enabled",
           "verify_if_enabled"]


class IRVerificationError(Exception):
    """The IR is malformed (a compiler bug, not a user error)."""

    def __init__(self, message: str, op: Optional[Op] = None) -> None:
        self.op = op
        self.problem = message
        super().__init__(message)


@functools.lru_cache(maxsize=None)
def _operand_fields(cls: type) -> tuple[tuple[str, bool, bool], ...]:
    """(name, is a list, may be absent) of each operand field of op class ``cls``."""
    fields = cls.__dataclass_fields__
    return tuple((name, str(fields[name].type).startswith("list"), fields[name].default is None)
                 for name in cls.OPERANDS)


def _infers_types(op: Op) -> bool:
    return not op.EXPLICIT_RESULTS and type(op).infer_types is not Op.infer_types


class _Checker:
    """Walks one function once, keeping the set of values in scope."""

    def __init__(self, fn: Function, module: Optional[Module]) -> None:
        self.fn = fn
        self.module = module
        self.in_scope: set[Value] = set()
        self.defined: set[Value] = set()
        self.seen_ops: set[int] = set()
        self.laid_out_witness: Optional[Value] = None   # the first tile value seen

    def fail(self, op: Optional[Op], problem: str) -> IRVerificationError:
        where = f"in @{self.fn.name}"
        if op is None:
            return IRVerificationError(f"{where}: {problem}")
        loc = f" at {op.loc}" if op.loc != UNKNOWN_LOC else ""
        text = op_header(op, ValueNamer.for_function(self.fn))
        return IRVerificationError(f"{where}: op '{op.NAME}'{loc}: {problem}\n    {text}", op)

    def shown(self, value: Value) -> str:
        return ValueNamer.for_function(self.fn)(value)

    # -- values ---------------------------------------------------------------------------------
    def define(self, value: Value, op: Optional[Op]) -> None:
        if value in self.defined:
            raise self.fail(op, f"value {self.shown(value)} is defined twice")
        self.defined.add(value)
        self.in_scope.add(value)
        t = value.type
        if isinstance(t, TileType):
            self.check_layout(value, t, op)

    def check_layout(self, value: Value, t: TileType, op: Optional[Op]) -> None:
        witness = self.laid_out_witness
        if witness is None:
            self.laid_out_witness = value
        elif (t.layout is None) != (witness.type.layout is None):
            has, lacks = (value, witness) if t.layout is not None else (witness, value)
            raise self.fail(op, f"{self.shown(lacks)} : {lacks.type} has no layout but "
                                f"{self.shown(has)} : {has.type} has one: laid-out IR gives "
                                f"every tile value a layout")
        rank = getattr(t.layout, "rank", None)
        if rank is not None and rank != t.rank:
            raise self.fail(op, f"{self.shown(value)} : {t} has a layout of rank {rank} on a "
                                f"tile of rank {t.rank}")

    def check_operands(self, op: Op) -> None:
        for name, is_list_field, optional in _operand_fields(type(op)):
            v = getattr(op, name)
            if is_list_field != isinstance(v, list):
                raise self.fail(op, f"operand '{name}' must be "
                                    f"{'a list of values' if is_list_field else 'one value'}, "
                                    f"found {type(v).__name__}")
            if isinstance(v, list):
                values = v
            elif v is None:
                if not optional:
                    raise self.fail(op, f"operand '{name}' is missing")
                continue
            else:
                values = [v]
            for x in values:
                if not isinstance(x, Value):
                    raise self.fail(op, f"operand '{name}' is not a Value: {x!r}")
                if x not in self.in_scope:
                    raise self.fail(op, f"operand '{name}' ({self.shown(x)}) is not defined "
                                        f"before this op in its block or an enclosing one")

    def check_enum_attrs(self, op: Op) -> None:
        for name, kinds in op.ENUM_ATTRS.items():
            try:
                kinds.parse(getattr(op, name))
            except ValueError as e:
                raise self.fail(op, str(e)) from None

    # -- structure ------------------------------------------------------------------------------
    def block(self, block: Block, top_level: bool, parent: Optional[Op] = None) -> None:
        """Check ``block``; its args and ops leave scope at the end.  The last op of a region
        block may be any terminator (the parent op checks which); a function body's only
        'return'."""
        local: list[Value] = []
        for a in block.args:
            self.define(a, parent)
            local.append(a)
        last = len(block.ops) - 1
        for i, op in enumerate(block.ops):
            if id(op) in self.seen_ops:
                raise self.fail(op, "the same op object appears twice in the IR")
            self.seen_ops.add(id(op))
            if op.DIALECT and not dialect_loaded(op.DIALECT):
                raise self.fail(op, f"op of the '{op.DIALECT}' dialect, which is not loaded "
                                    f"(the backend that uses it loads it before compiling)")
            if op.has_trait(TRAIT_TERMINATOR):
                if i != last:
                    raise self.fail(op, "terminator is not the last op of its block")
                if top_level != (op.NAME == "return"):
                    raise self.fail(op, "'return' may only end a function body" if not top_level
                                    else "a function body must not end with a region terminator")
            self.check_operands(op)
            self.check_enum_attrs(op)
            for region in op.regions:
                self.block(region, top_level=False, parent=op)
            self.check_op_rules(op)
            for r in op.results:
                if r.owner is not op:
                    raise self.fail(op, "a result's owner is not this op")
                self.define(r, op)
                local.append(r)
        for v in local:
            self.in_scope.discard(v)

    def check_op_rules(self, op: Op) -> None:
        try:
            op.verify()
            if self.module is not None:
                op.verify_in_module(self.module)
            if _infers_types(op):
                try:
                    inferred = op.infer_types()
                except Exception as e:  # noqa: BLE001 -- malformed operands make inference fail
                    raise VerifyError(f"cannot infer result types: {e}") from None
                check_results(op.results, list(inferred))
        except VerifyError as e:
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
            if not same_types(found, list(fn.result_types)):
                raise self.fail(last, f"returns {fmt_types(found)} but @{fn.name} is declared "
                                      f"to return {fmt_types(list(fn.result_types))}")
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


def verify_if_enabled(module: Union[Module, Function, Any], after: str) -> bool:
    """``verify_module(module)`` when ``verification_enabled()``; a problem names the pass or
    stage (``after``) that produced the module.  ``module`` may also be one ``Function``
    (verified alone, calls unchecked) or any compile stage's output: one holding its IR in
    ``.module`` (a GPU ``LaidOutKernel``) is verified, one that is not IR (LLVM or PTX text,
    a binary) is left alone.  Returns whether IR was verified."""
    if not verification_enabled():
        return False
    if isinstance(module, Function):
        check, what = verify_function, module
    elif isinstance(module, Module):
        check, what = verify_module, module
    elif isinstance(getattr(module, "module", None), Module):
        check, what = verify_module, module.module
    else:
        return False
    try:
        check(what)
    except IRVerificationError as e:
        raise IRVerificationError(f"after {after}: {e}", e.op) from None
    return True
