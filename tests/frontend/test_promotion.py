"""Type promotion follows Triton: the tables below are Triton's results."""
import pytest

import anytile.language as tl
from anytile.errors import CompilationError
from anytile.ir import types as T
from anytile.runtime.jit import jit

from fe_kit import compile_ir, kernel_ops, of_kind, ptr


@jit
def binop_kernel(a, b, out_ptr, OP: tl.constexpr):
    if OP == "+":
        r = a + b
    elif OP == "*":
        r = a * b
    elif OP == "/":
        r = a / b
    elif OP == "//":
        r = a // b
    elif OP == "%":
        r = a % b
    elif OP == "&":
        r = a & b
    elif OP == "<":
        r = a < b
    else:
        r = tl.where(a < b, a, b)
    tl.store(out_ptr, r)


@jit
def literal_kernel(a, out_ptr, LIT: tl.constexpr, OP: tl.constexpr):
    if OP == "+":
        r = a + LIT
    elif OP == "r*":
        r = LIT * a
    else:
        r = a / LIT
    tl.store(out_ptr, r)


def _result_type(module, kinds=("binary", "compare", "select")):
    # the value stored is the last arithmetic op's result
    ops = [op for op in kernel_ops(module) if op.NAME in kinds]
    return ops[-1]


@pytest.mark.parametrize("a,b,expected", [
    (T.i8, T.i32, T.i32), (T.i32, T.u32, T.u32), (T.i64, T.u32, T.i64), (T.u8, T.i8, T.u8),
    (T.i16, T.i16, T.i16), (T.i1, T.i1, T.i1), (T.i1, T.i32, T.i32),
    (T.f16, T.bf16, T.f32), (T.f16, T.f32, T.f32), (T.bf16, T.bf16, T.bf16),
    (T.f16, T.i32, T.f16), (T.i64, T.bf16, T.bf16), (T.f64, T.f32, T.f64), (T.u64, T.f16, T.f16),
])
def test_add_promotes_like_triton(a, b, expected):
    m = compile_ir(binop_kernel, {"OP": "+"}, a=a, b=b, out_ptr=ptr(expected))
    op = _result_type(m)
    assert op.kind == "add"
    assert op.result.type == expected
    assert op.lhs.type == op.rhs.type == expected


@pytest.mark.parametrize("op_text,a,b,kind,expected", [
    ("/", T.i32, T.i32, "fdiv", T.f32), ("/", T.i64, T.i8, "fdiv", T.f32),
    ("/", T.f16, T.f16, "fdiv", T.f32), ("/", T.bf16, T.f16, "fdiv", T.f32),
    ("/", T.f64, T.i32, "fdiv", T.f64),
    ("//", T.i32, T.i8, "div", T.i32), ("//", T.u32, T.u8, "div", T.u32),
    ("%", T.i16, T.i32, "rem", T.i32), ("%", T.f16, T.f16, "rem", T.f32),
    ("*", T.bf16, T.f16, "mul", T.f32), ("&", T.u8, T.i32, "and", T.i32),
    ("&", T.i1, T.i1, "and", T.i1),
])
def test_division_and_bitwise_promotion(op_text, a, b, kind, expected):
    m = compile_ir(binop_kernel, {"OP": op_text}, a=a, b=b, out_ptr=ptr(expected))
    op = _result_type(m)
    assert (op.kind, op.result.type) == (kind, expected)


def test_int_division_casts_operands_to_f32_first():
    m = compile_ir(binop_kernel, {"OP": "/"}, a=T.i32, b=T.i32, out_ptr=ptr(T.f32))
    casts = of_kind(kernel_ops(m), "cast")
    assert [c.result.type for c in casts] == [T.f32, T.f32]


def test_compare_promotes_operands_and_gives_i1():
    m = compile_ir(binop_kernel, {"OP": "<"}, a=T.i32, b=T.f16, out_ptr=ptr(T.i1))
    cmp = of_kind(kernel_ops(m), "compare")[0]
    assert cmp.lhs.type == T.f16 and cmp.result.type == T.i1 and cmp.pred == "lt"


def test_where_promotes_both_values():
    m = compile_ir(binop_kernel, {"OP": "where"}, a=T.i8, b=T.f32, out_ptr=ptr(T.f32))
    sel = of_kind(kernel_ops(m), "select")[0]
    assert sel.result.type == T.f32 and sel.cond.type == T.i1


@pytest.mark.parametrize("a,lit,op_text,expected", [
    (T.i32, 1.5, "+", T.f32), (T.f16, 2.0, "r*", T.f16), (T.i8, 1, "+", T.i8),
    (T.u8, 3, "+", T.u8), (T.f32, 1, "+", T.f32), (T.i1, 1, "+", T.i32),
    (T.i32, True, "+", T.i32), (T.bf16, 0.5, "+", T.bf16), (T.i64, 7, "r*", T.i64),
    (T.f16, 2.0, "/", T.f32), (T.i32, 2, "/", T.f32), (T.f64, 2, "/", T.f64),
])
def test_python_literals_adopt_the_tensor_dtype(a, lit, op_text, expected):
    m = compile_ir(literal_kernel, {"LIT": lit, "OP": op_text}, a=a, out_ptr=ptr(expected))
    op = _result_type(m)
    assert op.result.type == expected
    const = of_kind(kernel_ops(m), "constant")[-1]
    assert const.value == lit
    if op_text != "/":  # the literal is created directly in the computation type
        assert const.result.type == expected


def test_literal_out_of_range_for_tensor_dtype_is_an_error():
    with pytest.raises(CompilationError, match="out of range for tl.int8"):
        compile_ir(literal_kernel, {"LIT": 1000, "OP": "+"}, a=T.i8, out_ptr=ptr(T.i8))


def test_bitwise_on_floats_is_an_error():
    with pytest.raises(CompilationError, match="for bitwise `&`: it needs integer or boolean operands"):
        compile_ir(binop_kernel, {"OP": "&"}, a=T.f32, b=T.i32, out_ptr=ptr(T.f32))


def test_floor_division_with_mixed_signedness_is_an_error():
    with pytest.raises(CompilationError, match="different signedness"):
        compile_ir(binop_kernel, {"OP": "//"}, a=T.i32, b=T.u32, out_ptr=ptr(T.i32))


def test_floor_division_of_floats_is_an_error():
    with pytest.raises(CompilationError, match="`//` needs integer operands"):
        compile_ir(binop_kernel, {"OP": "//"}, a=T.f32, b=T.f32, out_ptr=ptr(T.f32))
