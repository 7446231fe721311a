"""Op kinds, predicates, memory orderings and traits are str enums: a member is its string
(equality, hashing, text), op constructors normalise strings to members and refuse unknown
ones, and the IR text is unchanged."""
from __future__ import annotations

import pytest

from anytile.ir import (AtomicKind, AtomicRMWOp, BinaryKind, BinaryOp, Block, ComparePredicate,
                        CompareOp, DotOp, InputPrecision, MemoryScope, MemorySemantics, Trait,
                        UnaryKind, UnaryOp, i32)
from anytile.ir.nodes import TRAIT_PURE
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module

from ir_text_kit import ALL_OPS, ir


def test_a_member_is_its_string():
    assert BinaryKind.ADD == "add" and "add" == BinaryKind.ADD
    assert {"add": 1}[BinaryKind.ADD] == 1 and {BinaryKind.ADD: 2}["add"] == 2
    assert str(BinaryKind.SHR) == "shr" and f"{ComparePredicate.LE}" == "le"
    assert f"{MemorySemantics.ACQ_REL:>8}" == " acq_rel"
    assert "pure" in frozenset({Trait.PURE}) and TRAIT_PURE is Trait.PURE


def test_constructors_normalise_strings_to_members():
    x = Block.with_args([i32]).args[0]
    op = BinaryOp("max", x, x)
    assert op.kind is BinaryKind.MAX and op.is_commutative
    assert CompareOp("ge", x, x).pred is ComparePredicate.GE
    assert UnaryOp("abs", x).kind is UnaryKind.ABS
    rmw = AtomicRMWOp("xchg", x, x, sem="relaxed")
    assert (rmw.kind, rmw.sem, rmw.scope) == (AtomicKind.XCHG, MemorySemantics.RELAXED,
                                              MemoryScope.GPU)
    assert type(rmw.scope) is MemoryScope


@pytest.mark.parametrize("make,problem", [
    (lambda x: BinaryOp("pow", x, x), "unknown binary kind 'pow' (expected one of: add, sub,"),
    (lambda x: CompareOp("<", x, x), "unknown compare predicate '<'"),
    (lambda x: UnaryOp("sinh", x), "unknown unary kind 'sinh'"),
    (lambda x: AtomicRMWOp("sub", x, x), "unknown atomic kind 'sub'"),
    (lambda x: AtomicRMWOp("add", x, x, scope="device"), "unknown memory scope 'device'"),
    (lambda x: AtomicRMWOp("add", x, x, sem="seq_cst"), "unknown memory semantics 'seq_cst'"),
    (lambda x: DotOp(x, x, x, input_precision="fp8x2"), "unknown input precision 'fp8x2'"),
    (lambda x: BinaryOp(UnaryKind.NEG, x, x), "unknown binary kind UnaryKind.NEG"),
])
def test_unknown_kinds_are_refused(make, problem):
    x = Block.with_args([i32]).args[0]
    with pytest.raises(ValueError) as info:
        make(x)
    assert problem in str(info.value)


def test_the_text_form_is_the_members_strings():
    module = parse_module(ALL_OPS)
    assert print_module(module) == ALL_OPS
    kinds = {op.kind for fn in module.functions.values() for op in fn.walk()
             if isinstance(op, (BinaryOp, UnaryOp))}
    assert kinds and all(isinstance(k, (BinaryKind, UnaryKind)) for k in kinds)


def test_default_orderings_are_not_printed():
    text = ir("""
        kernel @k(%p: ptr<i32>, %v: i32) {
          %0 = atomic_rmw {kind = "add"} (%p, %v, none) : i32
          %1 = atomic_rmw {kind = "max", sem = "relaxed", scope = "cta"} (%p, %v, none) : i32
        }
    """)
    module = parse_module(text)
    assert print_module(module) == text
    assert module.kernel.body.ops[0].sem is MemorySemantics.ACQ_REL
    assert InputPrecision("tf32") is InputPrecision.TF32
