"""The versions of the IR's op set: which ops a backend written for each version lowers.

Core hands a backend its kernel's device-independent IR (after the generic passes) only when
the backend lowers every op in it: a backend declares which (``Backend.op_set``, the version
it was written for, or ``Backend.lowered_ops()``), and a kernel using another op is refused
with a ``CompilationError`` naming the op, the backend and the kernel's line, before any of
the backend's code runs.  A plugin written for an older version keeps working: core's IR
grows by new versions, never by changing what an op of an older one means.

Each version holds every op of the one before (a backend of version 2 lowers those of 1):

====  ==============================================================================
 1    the ops of the first release: ``constant`` ... ``barrier`` (``OP_SETS[1].ops``)
 2    ``print`` (``tl.device_print``); and fields on ops of version 1 that a backend of
      version 1 may ignore, what the op means holding without them: ``binary.strict`` and
      ``unary.strict`` (keep every rounding: a backend that never fuses already does),
      ``reduce.commutative`` (the order is free: index order is one),
      ``load``/``store`` ``box`` and ``array`` (the block the frontend recorded: ``ptr``
      and ``mask`` still say what is read and written); and ``dot``'s ``input_precision``
      values ``bf16x3`` and ``bf16x6`` (exact products are always right)
 3    ``assume`` (``tl.assume``): a promise a backend may use or ignore; core removes it
      from the IR of a backend of an earlier op set (``DROPPABLE_OPS``)
====  ==============================================================================

A new op, a new field or a new attribute value is a new version here (and a test,
``tests/ir/test_op_sets.py``, fails until it is recorded).  Ops of a backend's own dialect
(``anytile.ir.dialects``) are not versioned here: its own stages create them after the
hand-off.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Union

from .nodes import Block, Function, Module, Op, walk

__all__ = ["OpSet", "OP_SETS", "LATEST_OP_SET", "DROPPABLE_OPS", "ops_of_version",
           "version_with", "first_op_outside", "drop_ops", "spelling_of"]


@dataclass(frozen=True)
class OpSet:
    """One version of the op set: ``ops``, the names of every op in it (those of earlier
    versions included); ``extensions``, what it added to ops of earlier versions, each of
    which a backend of an earlier version may ignore (the op's docstring says what holds
    without it): a field (``"load.box"``) or an attribute value
    (``"dot.input_precision=bf16x3"``); ``summary``, what it adds, in words."""

    version: int
    ops: frozenset[str]
    extensions: frozenset[str]
    summary: str


_FIRST = frozenset({
    # tiles
    "constant", "program_id", "num_programs", "arange", "splat", "broadcast", "expand_dims",
    "reshape", "permute",
    # elementwise
    "binary", "compare", "unary", "fma", "umulhi", "select", "cast", "bitcast", "hint",
    # memory
    "addptr", "load", "store", "atomic_rmw", "atomic_cas",
    # reductions
    "reduce", "scan", "dot",
    # control
    "yield", "condition", "return", "for", "if", "while", "call", "assert", "barrier",
})

#: every version, by number (each holds the ops of the one before)
OP_SETS: dict[int, OpSet] = {
    1: OpSet(1, _FIRST, frozenset(), "the ops of the first release"),
    2: OpSet(2, _FIRST | {"print"},
             frozenset({"binary.strict", "unary.strict", "reduce.commutative", "load.box",
                        "load.array", "store.box", "store.array",
                        "dot.input_precision=bf16x3", "dot.input_precision=bf16x6"}),
             "print (tl.device_print); fields and values a backend of version 1 may ignore"),
    3: OpSet(3, _FIRST | {"print", "assume"}, frozenset(),
             "assume (tl.assume), removed by core for a backend that does not lower it"),
}

#: ops that only state facts: removing one never changes a kernel's result, so core removes
#: them from the IR of a backend that does not lower them instead of refusing the kernel
DROPPABLE_OPS = frozenset({"assume"})

#: the newest version: the op set of the IR core makes now
LATEST_OP_SET = max(OP_SETS)

#: what a kernel's source writes to make the ops a backend is likeliest to lack (the error
#: that refuses one names it as the user wrote it)
_SPELLINGS = {"print": "tl.device_print", "assert": "tl.device_assert",
              "barrier": "tl.debug_barrier", "dot": "tl.dot", "fma": "tl.fma",
              "umulhi": "tl.umulhi", "atomic_rmw": "an atomic read-modify-write (tl.atomic_add...)",
              "atomic_cas": "tl.atomic_cas", "scan": "a scan (tl.cumsum, tl.associative_scan)",
              "reduce": "a reduction (tl.sum, tl.max, tl.reduce...)"}


def ops_of_version(version: int) -> frozenset[str]:
    """The op names of op set ``version``; a version newer than this core knows gets its
    newest set (core makes no op it does not know), one below 1 or not an int is a
    ``ValueError``."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"op set version {version!r}: expected an int from 1 to {LATEST_OP_SET}")
    return OP_SETS[min(version, LATEST_OP_SET)].ops


def first_op_outside(ir: Union[Module, Function, Block], names: Iterable[str]) -> Optional[Op]:
    """The first op of ``ir`` (in walk order: functions in order, parents before the ops of
    their regions) whose name is not one of ``names``, or ``None``."""
    allowed = names if isinstance(names, (set, frozenset)) else frozenset(names)
    if isinstance(ir, Module):
        blocks = [fn.body for fn in ir.functions.values()]
    else:
        blocks = [ir.body if isinstance(ir, Function) else ir]
    for block in blocks:
        for op in walk(block):
            if op.NAME not in allowed:
                return op
    return None


def drop_ops(module: Module, names: Iterable[str]) -> int:
    """Remove every op of ``module`` named in ``names`` (ops without results, such as those of
    ``DROPPABLE_OPS``), in every region; how many were removed."""
    drop = frozenset(names)

    def in_block(block: Block) -> int:
        kept = [op for op in block.ops if op.NAME not in drop]
        removed = len(block.ops) - len(kept)
        block.ops = kept
        return removed + sum(in_block(region) for op in kept for region in op.regions)

    return sum(in_block(fn.body) for fn in module.functions.values())


def version_with(name: str) -> Optional[int]:
    """The first op set version holding the op ``name``, or ``None`` (an op of no version:
    a dialect's, or one this core does not know)."""
    return next((v for v in sorted(OP_SETS) if name in OP_SETS[v].ops), None)


def spelling_of(name: str) -> Optional[str]:
    """How a kernel's source asks for the op ``name`` (``tl.device_print`` for ``print``),
    for messages; ``None`` for an op with no one spelling (``binary`` is every operator)."""
    return _SPELLINGS.get(name)
