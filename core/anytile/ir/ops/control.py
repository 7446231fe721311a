"""Structured control flow (for, if, while and their terminators), calls, assert, assume,
barrier."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from ..nodes import TRAIT_CONTROL, TRAIT_SIDE_EFFECT, TRAIT_TERMINATOR, Block, Op, Value
from ..rules import (bool_like, check_block_args, check_results, check_same_layouts,
                     check_terminator, expect, expect_type, fmt_types, is_scalar, same_types)
from ..types import PointerType, ScalarType, Type, elem_type, i1

if TYPE_CHECKING:
    from ..nodes import Module

__all__ = ["YieldOp", "ConditionOp", "ReturnOp", "ForOp", "IfOp", "WhileOp", "CallOp",
           "AssertOp", "AssumeOp", "BarrierOp", "PrintOp"]


@dataclass(eq=False)
class YieldOp(Op):
    """Ends the region of a ``for``, ``if``, ``while`` (after), ``reduce`` or ``scan`` and
    hands ``values`` to the parent op (which checks their types)."""

    NAME = "yield"
    OPERANDS = ("values",)
    TRAITS = frozenset({TRAIT_TERMINATOR})
    values: list = field(default_factory=list)


@dataclass(eq=False)
class ConditionOp(Op):
    """Ends the ``before`` region of a ``while``: continue with ``values`` in ``after`` when
    ``cond`` is 1, else leave the loop with ``values`` as its results."""

    NAME = "condition"
    OPERANDS = ("cond", "values")
    TRAITS = frozenset({TRAIT_TERMINATOR})
    cond: Value
    values: list = field(default_factory=list)

    def verify(self) -> None:
        expect_type(self.cond.type, i1, "condition")


@dataclass(eq=False)
class ReturnOp(Op):
    """Ends a called function's body with its return values."""

    NAME = "return"
    OPERANDS = ("values",)
    TRAITS = frozenset({TRAIT_TERMINATOR})
    values: list = field(default_factory=list)


@dataclass(eq=False)
class ForOp(Op):
    """``for iv = lower; iv < upper; iv += step`` (signed compare, ``step`` > 0), with
    loop-carried values.  ``body`` has arguments ``(iv, *iter_args)`` and yields the next
    iter_args; the results are the last ones (``inits`` if the loop runs zero times).
    ``lower``, ``upper``, ``step`` are scalars of one integer type, which is ``iv``'s.
    Laid out, the results have the layouts of the body's carried arguments."""

    NAME = "for"
    OPERANDS = ("lower", "upper", "step", "inits")
    ATTRS = ("num_stages",)
    REGIONS = ("body",)
    TRAITS = frozenset({TRAIT_CONTROL})
    lower: Value
    upper: Value
    step: Value
    inits: list
    body: Block = field(default_factory=Block)
    num_stages: Optional[int] = None

    def infer_types(self) -> list[Type]:
        return [v.type for v in self.inits]

    def verify(self) -> None:
        lt = self.lower.type
        expect(is_scalar(lt) and lt.is_int and not lt.is_bool,
               f"for bounds must be scalar integers, found {lt}")
        expect_type(self.upper.type, lt, "for upper bound")
        expect_type(self.step.type, lt, "for step")
        inits = [v.type for v in self.inits]
        check_block_args(self.body, [lt] + inits, "for body")
        check_terminator(self.body, "yield", inits, "for body")
        check_results(self.results, inits)
        check_same_layouts([r.type for r in self.results],
                           [a.type for a in self.body.args[1:]], "for results")
        expect(self.num_stages is None or isinstance(self.num_stages, int),
               f"num_stages must be None or an int, found {self.num_stages!r}")


@dataclass(eq=False)
class IfOp(Op):
    """Runs ``then_body`` when the scalar ``i1`` ``cond`` is 1, else ``else_body``; each
    yields values of the (explicit) result types."""

    NAME = "if"
    OPERANDS = ("cond",)
    REGIONS = ("then_body", "else_body")
    TRAITS = frozenset({TRAIT_CONTROL})
    EXPLICIT_RESULTS = True
    cond: Value
    then_body: Block = field(default_factory=Block)
    else_body: Block = field(default_factory=Block)

    def infer_types(self) -> list[Type]:
        return []

    def verify(self) -> None:
        expect_type(self.cond.type, i1, "if condition")
        results = [r.type for r in self.results]
        for name in ("then_body", "else_body"):
            block = getattr(self, name)
            check_block_args(block, [], name)
            check_terminator(block, "yield", results, name)


@dataclass(eq=False)
class WhileOp(Op):
    """A while loop over loop-carried values, starting from ``inits``.  ``before`` takes the
    values and ends with ``condition``; ``after`` takes the values that condition passes on
    and yields the next values for ``before``.  Results: the values of the final condition
    (laid out, in their layouts, as are ``after``'s arguments)."""

    NAME = "while"
    OPERANDS = ("inits",)
    REGIONS = ("before", "after")
    TRAITS = frozenset({TRAIT_CONTROL})
    EXPLICIT_RESULTS = True
    inits: list
    before: Block = field(default_factory=Block)
    after: Block = field(default_factory=Block)

    def infer_types(self) -> list[Type]:
        return [v.type for v in self.inits]

    def verify(self) -> None:
        inits = [v.type for v in self.inits]
        results = [r.type for r in self.results]
        check_block_args(self.before, inits, "while before")
        check_terminator(self.before, "condition", results, "while before")
        check_block_args(self.after, results, "while after")
        check_terminator(self.after, "yield", inits, "while after")
        passed = [v.type for v in self.before.ops[-1].values]
        check_same_layouts(results, passed, "while results")
        check_same_layouts([a.type for a in self.after.args], passed, "while after arguments")


@dataclass(eq=False)
class CallOp(Op):
    """Call the module's function ``callee`` with ``args``; results of the explicit types."""

    NAME = "call"
    OPERANDS = ("args",)
    ATTRS = ("callee",)
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    EXPLICIT_RESULTS = True
    callee: str
    args: list

    def infer_types(self) -> list[Type]:
        raise TypeError("call needs explicit result_types")

    def verify_in_module(self, module: "Module") -> None:
        callee = module.functions.get(self.callee)
        expect(callee is not None, f"call of unknown function @{self.callee}")
        expect(not callee.is_kernel,
               f"call of kernel @{self.callee}; only jit functions can be called")
        params = [a.type for a in callee.args]
        args = [a.type for a in self.args]
        expect(same_types(args, params), f"call @{self.callee} argument types {fmt_types(args)} "
                                         f"do not match its parameters {fmt_types(params)}")
        check_results(self.results, list(callee.result_types))


@dataclass(eq=False)
class AssertOp(Op):
    """``device_assert``: fail the launch with ``message`` (and this op's location) if any
    element of the ``i1`` ``cond`` is 0."""

    NAME = "assert"
    OPERANDS = ("cond",)
    ATTRS = ("message",)
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    cond: Value
    message: str = ""

    def verify(self) -> None:
        expect_type(self.cond.type, bool_like(self.cond.type), "assert condition")
        expect(isinstance(self.message, str), "assert message must be a string")


@dataclass(eq=False)
class AssumeOp(Op):
    """``tl.assume``: a promise that every element of the ``i1`` ``cond`` is 1 wherever this
    op is reached, which a backend may use to optimise (the GPU backends read ``x >= 0`` and
    ``x > 0`` of an integer ``x`` as "``x`` is never negative") or ignore.  A false promise is
    undefined behaviour.  Core removes it from the IR of a backend that does not lower it
    (op set 3): dropping it never changes a result."""

    NAME = "assume"
    OPERANDS = ("cond",)
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})      # kept by dead-code elimination
    cond: Value

    def verify(self) -> None:
        expect_type(self.cond.type, bool_like(self.cond.type), "assume condition")


@dataclass(eq=False)
class PrintOp(Op):
    """``tl.device_print``: when a program runs this op, it writes one line per element of
    ``value`` (one line for a scalar) to the process's standard output::

        pid (X, Y, Z) idx (I, J) PREFIX VALUE

    ``idx`` is absent for a scalar; ``PREFIX`` is followed by one space when not empty.
    Floats print as ``%.9g`` (``%.17g`` for f64), integers in decimal (``bool``: 0 or 1),
    pointers as ``0x`` and hex digits; with ``hex``, integers and the bits of floats as
    ``0x`` and hex digits.  Lines of different programs may interleave, and so may those of
    one program where it runs on several threads (a GPU's); a device may print when the
    kernel has finished (``device.synchronize()``)."""

    NAME = "print"
    OPERANDS = ("value",)
    ATTRS = ("prefix", "hex")
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
    value: Value
    prefix: str = ""
    hex: bool = False

    def verify(self) -> None:
        expect(isinstance(self.prefix, str), "print prefix must be a string")
        expect(isinstance(self.hex, bool), "print hex must be a bool")
        expect(isinstance(elem_type(self.value.type), (ScalarType, PointerType)),
               f"print of a {self.value.type}")


@dataclass(eq=False)
class BarrierOp(Op):
    """``tl.debug_barrier``: all memory operations of the program issued before it are
    complete before any after it starts."""

    NAME = "barrier"
    TRAITS = frozenset({TRAIT_SIDE_EFFECT})
