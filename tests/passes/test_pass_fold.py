"""Constant folding honours ops.py exactly: wrapping, C division, precision of each type, and
leaves undefined cases alone."""
from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np
import pytest

from anytile.ir import ops as O
from anytile.ir.parser import parse_module
from anytile.ir.verifier import verify_module
from anytile.passes import run_pass

from pass_kit import check


def _fold(op_text: str, result_type: str, operands: list[tuple[object, str]]) -> object:
    """Fold ``%r = <op_text> (%0, %1, ...) : result_type`` over constant operands; the folded
    Python value, or None when the op was left alone."""
    lines = [f"  %{i} = constant {{value = {_literal(v)}}} : {t}"
             for i, (v, t) in enumerate(operands)]
    names = ", ".join(f"%{i}" for i in range(len(operands)))
    lines.append(f"  %r = {op_text} ({names}) : {result_type}")
    text = (f"kernel @k(%p: ptr<{result_type}>) {{\n" + "\n".join(lines) +
            "\n  store (%p, %r, none)\n}\n")
    module = parse_module(text)
    verify_module(module)
    run_pass(module, "fold", verify=True)
    run_pass(module, "dce", verify=True)
    stored = module.kernel.body.ops[-1].value
    return stored.owner.value if isinstance(stored.owner, O.ConstantOp) else None


def _literal(v: object) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return repr(v)


def binary(kind: str, ty: str, a: object, b: object) -> object:
    return _fold(f'binary {{kind = "{kind}"}}', ty, [(a, ty), (b, ty)])


INT_CASES = [
    # kind, type, lhs, rhs, expected
    ("add", "i8", 127, 1, -128),
    ("sub", "i8", -128, 1, 127),
    ("mul", "i8", 64, 4, 0),
    ("mul", "i16", 300, 300, 90000 - 65536 * 1),
    ("add", "u8", 200, 100, 44),
    ("sub", "u32", 0, 1, 4294967295),
    ("div", "i32", -7, 2, -3),
    ("div", "i32", 7, -2, -3),
    ("rem", "i32", -7, 2, -1),
    ("rem", "i32", 7, -2, 1),
    ("div", "i32", -2**31, -1, -2**31),
    ("div", "u8", 250, 7, 35),
    ("rem", "u8", 250, 7, 5),
    ("shr", "i8", -128, 3, -16),
    ("shr", "u8", 128, 3, 16),
    ("shl", "i8", 3, 6, -64),
    ("min", "u32", 4294967295, 1, 1),
    ("min", "i32", -1, 1, -1),
    ("max", "i64", -2**63, 5, 5),
    ("and", "i1", 1, 0, 0),
    ("or", "i1", 1, 0, 1),
    ("xor", "u16", 0xFF00, 0x0FF0, 0xF0F0),
]


@pytest.mark.parametrize("kind,ty,a,b,expected", INT_CASES)
def test_integer_binary_semantics(kind, ty, a, b, expected):
    assert binary(kind, ty, a, b) == expected


@pytest.mark.parametrize("kind,ty,a,b", [
    ("div", "i32", 5, 0), ("rem", "u8", 5, 0), ("shl", "i32", 1, 32), ("shr", "u8", 1, 8),
    ("shl", "i64", 1, -1)])
def test_undefined_integer_cases_are_not_folded(kind, ty, a, b):
    assert binary(kind, ty, a, b) is None


def _f16(x: float) -> float:
    return float(np.float16(x))


FLOAT_CASES = [
    # kind, type, lhs, rhs, expected (exact)
    ("add", "f16", 1.0, 2.0**-11, 1.0),                    # tie: to even
    ("add", "f16", 1.0 + 2.0**-10, 2.0**-11, 1.0 + 2.0**-9),  # tie: to even (up)
    ("add", "f16", 65504.0, 16.0, math.inf),               # rounds past the largest f16
    ("add", "bf16", 1.0, 2.0**-8, 1.0),
    ("mul", "f32", float(np.float32(0.1)), 3.0, float(np.float32(np.float32(0.1) * 3))),
    ("fdiv", "f32", 1.0, 3.0, float(np.float32(1) / np.float32(3))),
    ("fdiv", "f64", 1.0, 0.0, math.inf),
    ("div", "f32", -7.0, 2.0, -4.0),                      # floor(lhs / rhs) on floats
    ("rem", "f32", -7.0, 2.0, -1.0),                      # fmod keeps the sign of lhs
    ("min", "f32", math.nan, 1.5, 1.5),                   # minNum
    ("max", "f64", -0.5, math.nan, -0.5),
    ("sub", "f64", 0.1, 0.3, 0.1 - 0.3),
]


@pytest.mark.parametrize("kind,ty,a,b,expected", FLOAT_CASES)
def test_float_binary_semantics(kind, ty, a, b, expected):
    got = binary(kind, ty, a, b)
    assert isinstance(got, float)
    assert got == expected and math.copysign(1, got) == math.copysign(1, expected)


def test_float_results_carry_the_type_precision():
    # 1/3 in f16: the folded constant is the f16 value, not the f64 one
    got = binary("fdiv", "f16", 1.0, 3.0)
    assert got == _f16(1 / 3) and got != 1 / 3
    got = binary("fdiv", "bf16", 1.0, 3.0)
    assert got == float(ml_dtypes.bfloat16(1 / 3))


def test_nan_results_fold_to_nan():
    assert math.isnan(binary("sub", "f32", math.inf, math.inf))


@pytest.mark.parametrize("pred,ty,a,b,expected", [
    ("lt", "i32", -1, 1, 1), ("lt", "u32", 4294967295, 1, 0), ("ge", "u8", 255, 0, 1),
    ("eq", "f32", math.nan, math.nan, 0), ("ne", "f32", math.nan, math.nan, 1),
    ("le", "f16", -0.0, 0.0, 1), ("gt", "i8", -128, 127, 0)])
def test_compare_semantics(pred, ty, a, b, expected):
    got = _fold(f'compare {{pred = "{pred}"}}', "i1", [(a, ty), (b, ty)])
    assert got == expected and type(got) is int


@pytest.mark.parametrize("kind,ty,x,expected", [
    ("neg", "i8", -128, -128), ("abs", "i32", -2**31, -2**31), ("abs", "i32", -5, 5),
    ("not", "u8", 5, 250), ("not", "i1", 1, 0), ("neg", "f32", 0.0, -0.0),
    ("sqrt", "f32", 2.0, float(np.sqrt(np.float32(2)))), ("floor", "f16", -1.5, -2.0),
    ("ceil", "f64", 1.25, 2.0), ("exp", "f32", 1.0, float(np.float32(math.e))),
    ("rsqrt", "f64", 4.0, 0.5), ("erf", "f64", 0.5, math.erf(0.5)),
    ("log", "f32", -1.0, math.nan)])
def test_unary_semantics(kind, ty, x, expected):
    got = _fold(f'unary {{kind = "{kind}"}}', ty, [(x, ty)])
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected and math.copysign(1, got) == math.copysign(1, expected)


@pytest.mark.parametrize("src,dst,x,expected", [
    ("f32", "i8", 300.7, 127), ("f32", "i8", -1.9, -1), ("f32", "i32", math.nan, 0),
    ("f64", "u8", -5.0, 0), ("f32", "u32", 1e20, 4294967295),
    ("i32", "u8", -1, 255), ("u8", "i32", 255, 255), ("i8", "i32", -1, -1),
    ("i32", "i1", 256, 1), ("f32", "i1", -0.0, 0), ("f32", "i1", math.nan, 1),
    ("i1", "f32", 1, 1.0), ("f64", "f16", 1.0 + 2.0**-11, 1.0),
    ("f64", "f16", 1e6, math.inf), ("i64", "f32", 2**60 + 1, float(2**60)),
    ("u64", "f32", 2**64 - 1, float(2**64)), ("i32", "f16", 2049, 2048.0),
    ("f64", "bf16", 1.0 + 2.0**-8 + 2.0**-30, 1.0 + 2.0**-7)])   # one rounding, not two
def test_cast_semantics(src, dst, x, expected):
    got = _fold("cast", dst, [(x, src)])
    assert got == expected and type(got) is type(expected)


def test_bitcast_fma_umulhi_select():
    one_bits = struct.unpack("<i", struct.pack("<f", 1.0))[0]
    assert _fold("bitcast", "i32", [(1.0, "f32")]) == one_bits
    assert _fold("bitcast", "f32", [(one_bits, "i32")]) == 1.0
    assert _fold("bitcast", "u16", [(-1, "i16")]) == 65535
    # a NaN's payload would be lost in a float constant: such bitcasts stay
    assert _fold("bitcast", "f32", [(0x7FC00001, "i32")]) is None
    assert _fold("bitcast", "f16", [(-1, "i16")]) is None
    # fma rounds once: (1 + 2^-12) * (1 - 2^-12) + -1 = -2^-24 exactly, lost with two roundings
    a, b = 1 + 2.0**-12, 1 - 2.0**-12
    assert _fold("fma", "f32", [(a, "f32"), (b, "f32"), (-1.0, "f32")]) == -2.0**-24
    assert _fold("umulhi", "u32", [(2**31, "u32"), (6, "u32")]) == 3
    assert _fold("umulhi", "i32", [(-2, "i32"), (3, "i32")]) == -1
    assert _fold("select", "f32", [(0, "i1"), (1.5, "f32"), (2.5, "f32")]) == 2.5


def test_tile_constants_fold_to_tile_constants():
    check(["fold", "dce"], """
        kernel @k(%p: tile<4x8xptr<f16>>) {
          %0 = constant {value = 3.0} : f16
          %1 = splat (%0) : tile<8xf16>
          %2 = expand_dims {axis = 0} (%1) : tile<1x8xf16>
          %3 = broadcast (%2) : tile<4x8xf16>
          %4 = constant {value = 0.5} : tile<4x8xf16>
          %5 = binary {kind = "mul"} (%3, %4) : tile<4x8xf16>
          %6 = permute {order = (1, 0)} (%5) : tile<8x4xf16>
          %7 = reshape (%6) : tile<4x8xf16>
          store (%p, %7, none)
        }
    """, """
        kernel @k(%p: tile<4x8xptr<f16>>) {
          %0 = constant {value = 1.5} : tile<4x8xf16>
          store (%p, %0, none)
        }
    """)


def test_non_constant_operands_and_memory_ops_are_not_folded():
    text = """
        kernel @k(%p: ptr<i32>, %x: i32) {
          %0 = constant {value = 3} : i32
          %1 = binary {kind = "add"} (%x, %0) : i32
          %2 = addptr (%p, %0) : ptr<i32>
          %3 = load (%2, none, none) : i32
          %4 = atomic_rmw {kind = "add"} (%p, %0, none) : i32
          %5 = binary {kind = "add"} (%1, %3) : i32
          %6 = binary {kind = "add"} (%5, %4) : i32
          store (%p, %6, none)
        }
    """
    check("fold", text, text)
