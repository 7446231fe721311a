"""Canonicalisation rules as snapshot pairs (canonicalize, then dce to drop what it orphaned)."""
from __future__ import annotations

import pytest

from anytile.ir.parser import parse_module
from anytile.passes.canonicalize import CANONICALIZE_RULES
from anytile.passes.rewrite import P, RewriteLoopError, Rule, Var, apply_rules

from pass_kit import check, ir

PASSES = ["canonicalize", "dce"]


def scalar_case(ty: str, body: str, result: str, params: str = "") -> str:
    """A kernel storing ``result`` (computed by ``body`` from ``%x``, ``%y``) through ``%p``."""
    lines = "".join("  " + line + "\n" for line in ir(body).splitlines() if line.strip())
    extra = f", {params}" if params else ""
    return (f"kernel @k(%p: ptr<{ty}>, %x: {ty}, %y: {ty}{extra}) {{\n{lines}"
            f"  store (%p, {result}, none)\n}}\n")


IDENTITIES = [
    # (name, type, body, expected result after canonicalisation)
    ("add zero (int)", "i32", """
        %0 = constant {value = 0} : i32
        %r = binary {kind = "add"} (%x, %0) : i32""", "%x"),
    ("add zero on the left (int)", "i32", """
        %0 = constant {value = 0} : i32
        %r = binary {kind = "add"} (%0, %x) : i32""", "%x"),
    ("add -0.0 (float)", "f32", """
        %0 = constant {value = -0.0} : f32
        %r = binary {kind = "add"} (%x, %0) : f32""", "%x"),
    ("sub 0.0 (float)", "f32", """
        %0 = constant {value = 0.0} : f32
        %r = binary {kind = "sub"} (%x, %0) : f32""", "%x"),
    ("mul one (float)", "f32", """
        %0 = constant {value = 1.0} : f32
        %r = binary {kind = "mul"} (%x, %0) : f32""", "%x"),
    ("mul one (int)", "u8", """
        %0 = constant {value = 1} : u8
        %r = binary {kind = "mul"} (%x, %0) : u8""", "%x"),
    ("div one (int)", "i64", """
        %0 = constant {value = 1} : i64
        %r = binary {kind = "div"} (%x, %0) : i64""", "%x"),
    ("fdiv one", "f16", """
        %0 = constant {value = 1.0} : f16
        %r = binary {kind = "fdiv"} (%x, %0) : f16""", "%x"),
    ("and all ones (unsigned)", "u16", """
        %0 = constant {value = 65535} : u16
        %r = binary {kind = "and"} (%x, %0) : u16""", "%x"),
    ("and all ones (signed)", "i16", """
        %0 = constant {value = -1} : i16
        %r = binary {kind = "and"} (%x, %0) : i16""", "%x"),
    ("or zero", "i32", """
        %0 = constant {value = 0} : i32
        %r = binary {kind = "or"} (%x, %0) : i32""", "%x"),
    ("xor zero", "i32", """
        %0 = constant {value = 0} : i32
        %r = binary {kind = "xor"} (%x, %0) : i32""", "%x"),
    ("shift by zero", "i32", """
        %0 = constant {value = 0} : i32
        %1 = binary {kind = "shl"} (%x, %0) : i32
        %r = binary {kind = "shr"} (%1, %0) : i32""", "%x"),
    ("and self", "i32", """
        %r = binary {kind = "and"} (%x, %x) : i32""", "%x"),
    ("or self", "i1", """
        %r = binary {kind = "or"} (%x, %x) : i1""", "%x"),
    ("min self", "f32", """
        %r = binary {kind = "min"} (%x, %x) : f32""", "%x"),
    ("max self", "i8", """
        %r = binary {kind = "max"} (%x, %x) : i8""", "%x"),
    ("double negation", "f32", """
        %0 = unary {kind = "neg"} (%x) : f32
        %r = unary {kind = "neg"} (%0) : f32""", "%x"),
    ("not not", "i32", """
        %0 = unary {kind = "not"} (%x) : i32
        %r = unary {kind = "not"} (%0) : i32""", "%x"),
    ("select same values", "f32", """
        %c = compare {pred = "lt"} (%x, %y) : i1
        %r = select (%c, %x, %x) : f32""", "%x"),
    ("select true", "f32", """
        %c = constant {value = 1} : i1
        %r = select (%c, %x, %y) : f32""", "%x"),
    ("select false", "f32", """
        %c = constant {value = 0} : i1
        %r = select (%c, %x, %y) : f32""", "%y"),
    ("cast to the same type", "f32", """
        %r = cast (%x) : f32""", "%x"),
    ("bitcast to the same type", "i32", """
        %r = bitcast (%x) : i32""", "%x"),
]


@pytest.mark.parametrize("name,ty,body,result", IDENTITIES, ids=[c[0] for c in IDENTITIES])
def test_identities(name, ty, body, result):
    check(PASSES, scalar_case(ty, body, "%r"), scalar_case(ty, "", result))


KEPT = [
    # float identities that IEEE does not allow, and integer ones on the wrong type
    ("x + 0.0 (x may be -0.0)", "f32", """
        %0 = constant {value = 0.0} : f32
        %r = binary {kind = "add"} (%x, %0) : f32"""),
    ("x - (-0.0)", "f32", """
        %0 = constant {value = -0.0} : f32
        %r = binary {kind = "sub"} (%x, %0) : f32"""),
    ("x * 0.0 (x may be inf or nan)", "f32", """
        %0 = constant {value = 0.0} : f32
        %r = binary {kind = "mul"} (%x, %0) : f32"""),
    ("x - x (float)", "f32", """
        %r = binary {kind = "sub"} (%x, %y) : f32"""),
    ("float div by one is floor", "f32", """
        %0 = constant {value = 1.0} : f32
        %r = binary {kind = "div"} (%x, %0) : f32"""),
    ("and with a non-all-ones constant", "u16", """
        %0 = constant {value = 32767} : u16
        %r = binary {kind = "and"} (%x, %0) : u16"""),
    ("float max keeps its operand order (signed zeros)", "f32", """
        %0 = constant {value = 0.0} : f32
        %r = binary {kind = "max"} (%0, %x) : f32"""),
    ("casts through another type", "i32", """
        %0 = cast (%x) : i8
        %r = cast (%0) : i32"""),
]


@pytest.mark.parametrize("name,ty,body", KEPT, ids=[c[0] for c in KEPT])
def test_rules_that_must_not_fire(name, ty, body):
    text = scalar_case(ty, body, "%r")
    check(PASSES, text, text)


def test_integer_zero_results():
    check(PASSES, scalar_case("i32", """
        %0 = constant {value = 0} : i32
        %1 = binary {kind = "mul"} (%x, %0) : i32
        %2 = binary {kind = "sub"} (%y, %y) : i32
        %3 = binary {kind = "xor"} (%x, %x) : i32
        %4 = binary {kind = "add"} (%1, %2) : i32
        %r = binary {kind = "add"} (%4, %3) : i32""", "%r"), """
        kernel @k(%p: ptr<i32>, %x: i32, %y: i32) {
          %0 = constant {value = 0} : i32
          store (%p, %0, none)
        }
    """)


def test_compare_with_itself_and_addptr_zero():
    check(PASSES, """
        kernel @k(%p: tile<4xptr<i1>>, %x: tile<4xi32>, %f: tile<4xf32>) {
          %0 = compare {pred = "le"} (%x, %x) : tile<4xi1>
          store (%p, %0, none)
          %1 = compare {pred = "ne"} (%x, %x) : tile<4xi1>
          store (%p, %1, none)
          %2 = compare {pred = "eq"} (%f, %f) : tile<4xi1>
          %zero = constant {value = 0} : tile<4xi64>
          %3 = addptr (%p, %zero) : tile<4xptr<i1>>
          store (%3, %2, none)
        }
    """, """
        kernel @k(%p: tile<4xptr<i1>>, %x: tile<4xi32>, %f: tile<4xf32>) {
          %0 = constant {value = 1} : tile<4xi1>
          store (%p, %0, none)
          %1 = constant {value = 0} : tile<4xi1>
          store (%p, %1, none)
          %2 = compare {pred = "eq"} (%f, %f) : tile<4xi1>
          store (%p, %2, none)
        }
    """)


def test_constants_move_right_in_commutative_ops_and_compares():
    check(PASSES, scalar_case("i32", """
        %0 = constant {value = 7} : i32
        %1 = binary {kind = "mul"} (%0, %x) : i32
        %2 = binary {kind = "sub"} (%0, %1) : i32
        %c = compare {pred = "lt"} (%0, %2) : i1
        %r = select (%c, %1, %2) : i32""", "%r"), """
        kernel @k(%p: ptr<i32>, %x: i32, %y: i32) {
          %0 = constant {value = 7} : i32
          %1 = binary {kind = "mul"} (%x, %0) : i32
          %2 = binary {kind = "sub"} (%0, %1) : i32
          %c = compare {pred = "gt"} (%2, %0) : i1
          %r = select (%c, %1, %2) : i32
          store (%p, %r, none)
        }
    """)


def test_shape_op_rules():
    check(PASSES, """
        kernel @k(%p: tile<4x8xptr<f32>>, %q: tile<8x4xptr<f32>>, %s: f32, %t: tile<4x8xf32>) {
          %0 = splat (%s) : tile<4x1xf32>
          %1 = broadcast (%0) : tile<4x8xf32>
          store (%p, %1, none)
          %2 = broadcast (%t) : tile<4x8xf32>
          %3 = reshape (%2) : tile<4x8xf32>
          %4 = permute {order = (0, 1)} (%3) : tile<4x8xf32>
          store (%p, %4, none)
          %5 = permute {order = (1, 0)} (%t) : tile<8x4xf32>
          %6 = permute {order = (1, 0)} (%5) : tile<4x8xf32>
          store (%p, %6, none)
          %7 = reshape (%t) : tile<32xf32>
          %8 = reshape (%7) : tile<8x4xf32>
          store (%q, %8, none)
          %9 = splat (%s) : tile<32xf32>
          %10 = reshape (%9) : tile<8x4xf32>
          store (%q, %10, none)
          %11 = expand_dims {axis = 1} (%9) : tile<32x1xf32>
          %12 = reshape (%11) : tile<8x4xf32>
          store (%q, %12, none)
        }
    """, """
        kernel @k(%p: tile<4x8xptr<f32>>, %q: tile<8x4xptr<f32>>, %s: f32, %t: tile<4x8xf32>) {
          %0 = splat (%s) : tile<4x8xf32>
          store (%p, %0, none)
          store (%p, %t, none)
          store (%p, %t, none)
          %1 = reshape (%t) : tile<8x4xf32>
          store (%q, %1, none)
          %2 = splat (%s) : tile<8x4xf32>
          store (%q, %2, none)
          %3 = splat (%s) : tile<8x4xf32>
          store (%q, %3, none)
        }
    """)


def test_broadcast_of_broadcast():
    check(PASSES, """
        kernel @k(%p: tile<4x8xptr<f32>>, %t: tile<1x1xf32>) {
          %0 = broadcast (%t) : tile<4x1xf32>
          %1 = broadcast (%0) : tile<4x8xf32>
          store (%p, %1, none)
        }
    """, """
        kernel @k(%p: tile<4x8xptr<f32>>, %t: tile<1x1xf32>) {
          %0 = broadcast (%t) : tile<4x8xf32>
          store (%p, %0, none)
        }
    """)


def test_if_with_a_constant_condition_is_inlined():
    check(PASSES, """
        kernel @k(%p: ptr<f32>, %x: f32) {
          %true = constant {value = 1} : i1
          %false = constant {value = 0} : i1
          %a = if (%true) : f32 {
            %n = unary {kind = "neg"} (%x) : f32
            store (%p, %n, none)
            yield ([%n])
          } else_body {
            yield ([%x])
          }
          %b = if (%false) : f32 {
            yield ([%a])
          } else_body {
            %e = unary {kind = "exp"} (%a) : f32
            yield ([%e])
          }
          store (%p, %b, none)
        }
    """, """
        kernel @k(%p: ptr<f32>, %x: f32) {
          %n = unary {kind = "neg"} (%x) : f32
          store (%p, %n, none)
          %e = unary {kind = "exp"} (%n) : f32
          store (%p, %e, none)
        }
    """)


def test_for_with_constant_bounds_zero_and_one_trip():
    check(PASSES, """
        kernel @k(%p: ptr<f32>, %x: f32) {
          %0 = constant {value = 5} : i32
          %1 = constant {value = 2} : i32
          %2 = constant {value = 4} : i32
          %zero = for (%0, %1, %1, [%x]) : f32 {
          ^(%i: i32, %a: f32):
            store (%p, %a, none)
            yield ([%a])
          }
          %once = for (%1, %2, %1, [%zero]) : f32 {
          ^(%j: i32, %b: f32):
            %c = cast (%j) : f32
            %d = binary {kind = "add"} (%b, %c) : f32
            yield ([%d])
          }
          store (%p, %once, none)
        }
    """, """
        kernel @k(%p: ptr<f32>, %x: f32) {
          %0 = constant {value = 2} : i32
          %c = cast (%0) : f32
          %d = binary {kind = "add"} (%x, %c) : f32
          store (%p, %d, none)
        }
    """)


def test_for_bounds_compare_signed():
    # u32 bounds 0 .. 0xFFFFFFFF: as signed numbers -1 < 0, so the loop runs zero times
    check(PASSES, """
        kernel @k(%p: ptr<u32>, %x: u32) {
          %lo = constant {value = 0} : u32
          %hi = constant {value = 4294967295} : u32
          %r = for (%lo, %hi, %hi, [%x]) : u32 {
          ^(%i: u32, %a: u32):
            %b = binary {kind = "add"} (%a, %i) : u32
            yield ([%b])
          }
          store (%p, %r, none)
        }
    """, """
        kernel @k(%p: ptr<u32>, %x: u32) {
          store (%p, %x, none)
        }
    """)


def test_loops_with_unknown_trip_counts_are_kept():
    text = """
        kernel @k(%p: ptr<f32>, %x: f32, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %r = for (%0, %n, %1, [%x]) : f32 {
          ^(%i: i32, %a: f32):
            %b = binary {kind = "mul"} (%a, %a) : f32
            yield ([%b])
          }
          store (%p, %r, none)
        }
    """
    check(PASSES, text, text)


def test_rules_apply_inside_regions():
    check(PASSES, """
        kernel @k(%p: ptr<i32>, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %r = for (%0, %n, %1, [%0]) : i32 {
          ^(%i: i32, %a: i32):
            %b = binary {kind = "mul"} (%1, %i) : i32
            %c = binary {kind = "add"} (%a, %b) : i32
            yield ([%c])
          }
          store (%p, %r, none)
        }
    """, """
        kernel @k(%p: ptr<i32>, %n: i32) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %r = for (%0, %n, %1, [%0]) : i32 {
          ^(%i: i32, %a: i32):
            %c = binary {kind = "add"} (%a, %i) : i32
            yield ([%c])
          }
          store (%p, %r, none)
        }
    """)


def test_rule_names_are_unique():
    names = [rule.name for rule in CANONICALIZE_RULES]
    assert len(names) == len(set(names))


def test_engine_reports_rules_that_do_not_converge():
    flip = Rule("flip", P("binary", Var("a"), Var("b"), kind="add"),
                lambda m: m.new(type(m.op), kind="add", lhs=m.b, rhs=m.a).result)
    module = parse_module(ir("""
        kernel @k(%p: ptr<i32>, %x: i32, %y: i32) {
          %0 = binary {kind = "add"} (%x, %y) : i32
          store (%p, %0, none)
        }
    """))
    with pytest.raises(RewriteLoopError, match="last rule: flip"):
        apply_rules(module, [flip], max_rewrites=100)
