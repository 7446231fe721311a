"""The verifier accepts well-formed IR and names the op, its location and the problem for
each class of malformed IR."""
from __future__ import annotations

import pytest

from anytile.ir import (Block, Builder, Function, Loc, Module, PointerType, TileType, f32, i1,
                        i32)
from anytile.ir import ops as O
from anytile.ir.parser import IRParseError, parse_module
from anytile.ir.verifier import IRVerificationError, verify_function, verify_module

from ir_text_kit import ALL_OPS, ir
from ir_text_kit import assert_verify_fails as _fails


def test_accepts_every_op_kind():
    verify_module(parse_module(ALL_OPS))


# ---------------------------------------------------------------------------------------------
# SSA scoping and structure (built with the Builder: the parser refuses these)
# ---------------------------------------------------------------------------------------------
def _kernel(body: Block) -> Module:
    module = Module()
    module.add(Function("k", body, is_kernel=True))
    return module


def test_use_before_definition():
    body = Block.with_args([i32], ["n"])
    b = Builder(body, loc=Loc("k.py", 7, 2))
    later = O.ConstantOp(value=1, result_types=[i32])
    b.create(O.BinaryOp, kind="add", lhs=body.args[0], rhs=later.result)
    body.ops.append(later)
    with pytest.raises(IRVerificationError) as info:
        verify_module(_kernel(body))
    message = str(info.value)
    assert "op 'binary' at k.py:7:2" in message
    assert "operand 'rhs' (%1) is not defined before this op" in message
    assert info.value.op is body.ops[0]


def test_value_from_inside_a_region_used_after_it():
    body = Block.with_args([i1], ["c"])
    b = Builder(body)
    if_op = b.create(O.IfOp, body.args[0])
    with b.at_end_of(if_op.then_body):
        inner = b.create(O.ConstantOp, value=3, result_types=[i32]).result
        b.create(O.YieldOp, [])
    with b.at_end_of(if_op.else_body):
        b.create(O.YieldOp, [])
    b.create(O.UnaryOp, kind="neg", src=inner)
    with pytest.raises(IRVerificationError, match="operand 'src' .* is not defined before"):
        verify_module(_kernel(body))


def test_value_of_another_function():
    other = Block.with_args([i32], ["x"])
    body = Block()
    Builder(body).create(O.UnaryOp, kind="neg", src=other.args[0])
    with pytest.raises(IRVerificationError, match="is not defined before"):
        verify_module(_kernel(body))


def test_op_appearing_twice():
    body = Block()
    op = Builder(body).create(O.ConstantOp, value=1, result_types=[i32])
    body.ops.append(op)
    with pytest.raises(IRVerificationError, match="appears twice"):
        verify_module(_kernel(body))


def test_terminator_in_the_middle_of_a_block():
    _fails("""
        kernel @k(%c: i1) {
          if (%c) {
            yield ([])
            %0 = constant {value = 1} : i32
          } else_body {
            yield ([])
          }
        }
    """, "terminator is not the last op")


def test_yield_at_function_level():
    _fails("""
        kernel @k() {
          yield ([])
        }
    """, "op 'yield'", "function body must not end with a region terminator")


def test_return_inside_a_region():
    _fails("""
        func @f(%c: i1) -> i32 {
          if (%c) {
            return ([])
          } else_body {
            yield ([])
          }
          %0 = constant {value = 1} : i32
          return ([%0])
        }
    """, "'return' may only end a function body")


def test_missing_region_terminator():
    _fails("""
        kernel @k(%c: i1) {
          if (%c) {
          } else_body {
            yield ([])
          }
        }
    """, "then_body must end with 'yield', found an empty block")


def test_function_must_end_with_return():
    _fails("""
        func @f(%a: i32) -> i32 {
          %0 = unary {kind = "neg"} (%a) : i32
        }
    """, "function @f must end with 'return'")


def test_return_types_match_the_signature():
    _fails("""
        func @f(%a: i32) -> f32 {
          return ([%a])
        }
    """, "returns (i32) but @f is declared to return (f32)")


def test_kernel_cannot_return_values():
    module = parse_module(ir("""
        kernel @k() {
        }
    """))
    module.kernel.result_types = [i32]
    with pytest.raises(IRVerificationError, match="a kernel cannot return values"):
        verify_module(module)


# ---------------------------------------------------------------------------------------------
# Types, one rule per test
# ---------------------------------------------------------------------------------------------
def test_elementwise_operand_types_must_agree():
    error = _fails("""
        kernel @k(%a: i32, %b: f32) {
          %0 = binary {kind = "add"} (%a, %b) : i32 loc("k.py":4:8)
        }
    """, "op 'binary' at k.py:4:8", "operand types differ: i32 vs f32",
        '%0 = binary {kind = "add"} (%a, %b) : i32')
    assert error.op.NAME == "binary"


def test_result_type_must_match_inference():
    _fails("""
        kernel @k(%a: i32) {
          %0 = binary {kind = "add"} (%a, %a) : i64
        }
    """, "result types (i64) should be (i32)")


def test_compare_gives_i1():
    _fails("""
        kernel @k(%a: tile<4xi32>) {
          %0 = compare {pred = "lt"} (%a, %a) : tile<4xi32>
        }
    """, "result types (tile<4xi32>) should be (tile<4xi1>)")


def test_unknown_binary_kind_and_float_only_kinds():
    # the parser (any op constructor) refuses an unknown kind; the verifier catches one
    # written into an op afterwards
    with pytest.raises(IRParseError, match="unknown binary kind 'pow'"):
        parse_module(ir("""
            kernel @k(%a: i32) {
              %0 = binary {kind = "pow"} (%a, %a) : i32
            }
        """))
    module = parse_module(ir("""
        kernel @k(%a: i32) {
          %0 = binary {kind = "add"} (%a, %a) : i32
        }
    """))
    module.kernel.body.ops[0].kind = "pow"
    with pytest.raises(IRVerificationError, match="op 'binary': unknown binary kind 'pow'"):
        verify_module(module)
    _fails("""
        kernel @k(%a: i32) {
          %0 = unary {kind = "exp"} (%a) : i32
        }
    """, "exp needs a float operand, found i32")
    _fails("""
        kernel @k(%a: f32) {
          %0 = binary {kind = "xor"} (%a, %a) : f32
        }
    """, "xor needs integers, found f32")


def test_select_condition_is_i1_of_the_same_shape():
    _fails("""
        kernel @k(%c: tile<8xi1>, %a: tile<4xf32>) {
          %0 = select (%c, %a, %a) : tile<4xf32>
        }
    """, "select condition: expected tile<4xi1>, found tile<8xi1>")


def test_addptr_needs_pointer_and_integer_of_one_shape():
    _fails("""
        kernel @k(%p: ptr<f32>, %o: f32) {
          %0 = addptr (%p, %o) : ptr<f32>
        }
    """, "addptr offset must be an integer, found f32")
    _fails("""
        kernel @k(%p: ptr<f32>, %o: tile<4xi32>) {
          %0 = addptr (%p, %o) : ptr<f32>
        }
    """, "addptr shapes differ")


def test_load_mask_and_other_types():
    _fails("""
        kernel @k(%p: tile<4xptr<f32>>, %m: tile<4xi32>) {
          %0 = load (%p, %m, none) : tile<4xf32>
        }
    """, "mask: expected tile<4xi1>, found tile<4xi32>")
    _fails("""
        kernel @k(%p: tile<4xptr<f32>>, %m: tile<4xi1>, %o: tile<4xf16>) {
          %0 = load (%p, %m, %o) : tile<4xf32>
        }
    """, "load other: expected tile<4xf32>, found tile<4xf16>")


def test_store_value_is_the_pointee_type():
    _fails("""
        kernel @k(%p: tile<4xptr<f32>>, %v: tile<4xi32>) {
          store (%p, %v, none)
        }
    """, "stored value: expected tile<4xf32>, found tile<4xi32>")


def test_shape_op_rules():
    _fails("""
        kernel @k(%a: tile<4xf32>) {
          %0 = splat (%a) : tile<4x4xf32>
        }
    """, "splat source must be a scalar")
    _fails("""
        kernel @k(%a: tile<4x2xf32>) {
          %0 = broadcast (%a) : tile<4x8xf32>
        }
    """, "cannot broadcast tile<4x2xf32> to tile<4x8xf32>")
    _fails("""
        kernel @k(%a: tile<4x2xf32>) {
          %0 = reshape (%a) : tile<16xf32>
        }
    """, "reshape changes the element count")
    _fails("""
        kernel @k(%a: tile<4x2xf32>) {
          %0 = permute {order = (0, 0)} (%a) : tile<4x4xf32>
        }
    """, "permute order (0, 0) is not a permutation of 2 dimensions")


def test_arange_size_is_a_power_of_two():
    _fails("""
        kernel @k() {
          %0 = arange {start = 0, end = 12} : tile<12xi32>
        }
    """, "arange size end - start must be a power of 2, found 12 - 0 = 12")


def test_dot_shapes_and_types():
    _fails("""
        kernel @k(%a: tile<16x8xf16>, %b: tile<16x32xf16>, %c: tile<16x32xf32>) {
          %0 = dot (%a, %b, %c) : tile<16x32xf32>
        }
    """, "dot inner dimensions differ")
    _fails("""
        kernel @k(%a: tile<16x8xf16>, %b: tile<8x32xf16>, %c: tile<16x16xf32>) {
          %0 = dot (%a, %b, %c) : tile<16x16xf32>
        }
    """, "dot accumulator tile<16x16xf32> is not 16x32")
    _fails("""
        kernel @k(%a: tile<16x8xi8>, %b: tile<8x32xi8>, %c: tile<16x32xf32>) {
          %0 = dot (%a, %b, %c) : tile<16x32xf32>
        }
    """, "dot of i8 cannot accumulate in f32")


def test_reduce_combine_arity_and_types():
    _fails("""
        kernel @k(%a: tile<8xf32>) {
          %0 = reduce {axis = 0} ([%a]) : f32 {
          ^(%x: f32):
            yield ([%x])
          }
        }
    """, "combine arguments (f32) should be (f32, f32)")
    _fails("""
        kernel @k(%a: tile<8xf32>) {
          %0 = reduce {axis = 0} ([%a]) : f32 {
          ^(%x: f32, %y: f32):
            %c = compare {pred = "lt"} (%x, %y) : i1
            yield ([%c])
          }
        }
    """, "combine yields (i1), expected (f32)")
    _fails("""
        kernel @k(%a: tile<8xf32>) {
          %0 = scan {axis = 1} ([%a]) : tile<8xf32> {
          ^(%x: f32, %y: f32):
            yield ([%x])
          }
        }
    """, "axis 1 out of range for tile<8xf32>")


def test_for_bounds_body_arguments_and_yield():
    _fails("""
        kernel @k(%lo: i32, %hi: i64, %acc: f32) {
          %0 = for (%lo, %hi, %lo, [%acc]) : f32 {
          ^(%i: i32, %a: f32):
            yield ([%a])
          }
        }
    """, "for upper bound: expected i32, found i64")
    _fails("""
        kernel @k(%lo: i32, %acc: f32) {
          %0 = for (%lo, %lo, %lo, [%acc]) : f32 {
          ^(%i: i32):
            yield ([%acc])
          }
        }
    """, "for body arguments (i32) should be (i32, f32)")
    _fails("""
        kernel @k(%lo: i32, %acc: f32) {
          %0 = for (%lo, %lo, %lo, [%acc]) : f32 {
          ^(%i: i32, %a: f32):
            yield ([%i])
          }
        }
    """, "for body yields (i32), expected (f32)")


def test_if_condition_and_branch_results():
    _fails("""
        kernel @k(%c: tile<4xi1>) {
          if (%c) {
            yield ([])
          } else_body {
            yield ([])
          }
        }
    """, "if condition: expected i1, found tile<4xi1>")
    _fails("""
        kernel @k(%c: i1, %a: f32, %n: i32) {
          %0 = if (%c) : f32 {
            yield ([%a])
          } else_body {
            yield ([%n])
          }
        }
    """, "else_body yields (i32), expected (f32)")


def test_while_regions():
    _fails("""
        kernel @k(%n: i32) {
          %0 = while ([%n]) : i32 {
          ^(%c: i32):
            yield ([%c])
          } after {
          ^(%d: i32):
            yield ([%d])
          }
        }
    """, "while before must end with 'condition', found 'yield'")
    _fails("""
        kernel @k(%n: i32) {
          %0 = while ([%n]) : i32 {
          ^(%c: i32):
            %m = compare {pred = "lt"} (%c, %n) : i1
            condition (%m, [%c])
          } after {
          ^(%d: i32):
            %e = compare {pred = "gt"} (%d, %n) : i1
            yield ([%e])
          }
        }
    """, "while after yields (i1), expected (i32)")


def test_calls_match_their_callee():
    _fails("""
        kernel @k(%a: f32) {
          %0 = call {callee = "missing"} ([%a]) : f32
        }
    """, "call of unknown function @missing")
    _fails("""
        func @f(%x: i32) -> i32 {
          return ([%x])
        }

        kernel @k(%a: f32) {
          %0 = call {callee = "f"} ([%a]) : i32
        }
    """, "call @f argument types (f32) do not match its parameters (i32)")
    _fails("""
        func @f(%x: i32) -> i32 {
          return ([%x])
        }

        kernel @k(%a: i32) {
          %0 = call {callee = "f"} ([%a]) : f32
        }
    """, "result types (f32) should be (i32)")


def test_constants_fit_their_type():
    _fails("""
        kernel @k() {
          %0 = constant {value = 300} : i8
        }
    """, "constant 300 does not fit in i8")
    _fails("""
        kernel @k() {
          %0 = constant {value = 1.5} : i32
        }
    """, "needs an int value, found 1.5")


def test_verify_function_alone_skips_call_checks():
    module = parse_module(ir("""
        kernel @k(%a: f32) {
          %0 = call {callee = "elsewhere"} ([%a]) : f32
        }
    """))
    verify_function(module.kernel)
    with pytest.raises(IRVerificationError):
        verify_module(module)


def test_error_on_builder_ir_names_the_values():
    body = Block.with_args([TileType((4,), PointerType(f32)), f32], ["ptrs", "value"])
    Builder(body, loc=Loc("k.py", 2, 0)).create(O.StoreOp, body.args[0], body.args[1])
    with pytest.raises(IRVerificationError) as info:
        verify_module(_kernel(body))
    assert str(info.value) == (
        "in @k: op 'store' at k.py:2:0: stored value: expected tile<4xf32>, found f32\n"
        "    store (%ptrs, %value, none)")


def test_operand_fields_hold_the_right_shape():
    body = Block.with_args([i1], ["c"])
    b = Builder(body)
    if_op = b.create(O.IfOp, body.args[0])
    with b.at_end_of(if_op.then_body):
        b.create(O.YieldOp, body.args[0])       # a Value where a list belongs
    with b.at_end_of(if_op.else_body):
        b.create(O.YieldOp, [])
    with pytest.raises(IRVerificationError, match="operand 'values' must be a list of values"):
        verify_module(_kernel(body))
    body = Block.with_args([i32], ["n"])
    Builder(body).create(O.UnaryOp, kind="neg", src=[body.args[0]], result_types=[i32])
    with pytest.raises(IRVerificationError, match="operand 'src' must be one value, found list"):
        verify_module(_kernel(body))
    body = Block()
    Builder(body).create(O.UnaryOp, kind="neg", src=None, result_types=[i32])
    with pytest.raises(IRVerificationError, match="operand 'src' is missing"):
        verify_module(_kernel(body))
