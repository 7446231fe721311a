"""The IR's text form: exact round trips for every op, names, attributes, locations, and
parser error messages."""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import pytest

from anytile.ir import (Block, Builder, Function, Loc, Module, OP_REGISTRY, UNKNOWN_LOC,
                        PointerType, TileType, f16, f32, i32)
from anytile.ir import ops as O
from anytile.ir import types as T
from anytile.ir.parser import IRParseError, parse_function, parse_module
from anytile.ir.printer import print_function, print_module
from anytile.ir.verifier import IRVerificationError, verify_module

from ir_text_kit import ALL_OPS, assert_round_trip, ir

# The ops of ops.py when this test was written; each must appear in ALL_OPS.
KNOWN_OPS = {"constant", "program_id", "num_programs", "arange", "splat", "broadcast",
             "expand_dims", "reshape", "permute", "binary", "compare", "unary", "fma",
             "umulhi", "select", "cast", "bitcast", "hint", "addptr", "load", "store",
             "atomic_rmw", "atomic_cas", "reduce", "scan", "dot", "yield", "condition",
             "return", "for", "if", "while", "call", "assert", "barrier", "assume"}


def test_every_op_kind_round_trips():
    module = assert_round_trip(ALL_OPS)
    used = {op.NAME for fn in module.functions.values() for op in fn.walk()}
    assert KNOWN_OPS <= used
    assert KNOWN_OPS <= set(OP_REGISTRY)


def test_parsed_module_structure():
    module = parse_module(ALL_OPS)
    assert module.kernel_name == "all_ops"
    kernel = module.kernel
    assert kernel.is_kernel and not module.functions["helper"].is_kernel
    assert kernel.arg_attrs[0] == {"divisibility": 16} and kernel.arg_attrs[1] == {}
    assert [str(a.type) for a in kernel.args] == ["ptr<f32>", "ptr<i32>", "i32", "i1"]
    reduce_op = next(op for op in kernel.walk() if op.NAME == "reduce")
    assert [str(r.type) for r in reduce_op.results] == ["f32", "i32"]
    assert len(reduce_op.combine.args) == 4
    load = next(op for op in kernel.walk() if op.NAME == "load")
    assert load.other is not None and load.volatile is False
    hint = next(op for op in kernel.walk() if op.NAME == "hint")
    assert hint.multiple_of == (16,) and isinstance(hint.multiple_of, tuple)
    assert module.functions["helper"].result_types == [f32]


def _build_add_kernel() -> Module:
    body = Block.with_args([PointerType(f32), PointerType(f32), i32], ["x_ptr", "out", "n"])
    fn = Function("add", body, arg_attrs=[{"divisibility": 16}, {}, {}], is_kernel=True,
                  loc=Loc("k.py", 1, 0, "add"))
    b = Builder(body, loc=Loc("k.py", 3, 10, "add"))
    pid = b.create(O.ProgramIdOp, axis=0).result
    pid.name = "pid"
    block = b.create(O.ConstantOp, value=64, result_types=[i32]).result
    start = b.create(O.BinaryOp, kind="mul", lhs=pid, rhs=block).result
    tile = TileType((64,), i32)
    offs = b.create(O.BinaryOp, kind="add", lhs=b.create(O.SplatOp, start,
                    result_types=[tile]).result,
                    rhs=b.create(O.ArangeOp, start=0, end=64).result).result
    offs.name = "offs"
    with b.at_loc(Loc("k.py", 4, 4, "add")):
        mask = b.create(O.CompareOp, pred="lt", lhs=offs,
                        rhs=b.create(O.SplatOp, body.args[2], result_types=[tile]).result).result
        ptr_tile = TileType((64,), PointerType(f32))
        px = b.create(O.AddPtrOp, b.create(O.SplatOp, body.args[0],
                      result_types=[ptr_tile]).result, offs).result
        x = b.create(O.LoadOp, px, mask).result
        x.name = "x"
        po = b.create(O.AddPtrOp, b.create(O.SplatOp, body.args[1],
                      result_types=[ptr_tile]).result, offs).result
        b.create(O.StoreOp, po, x, mask)
    module = Module()
    module.add(fn)
    verify_module(module)
    return module


def test_builder_kernel_snapshot():
    assert print_module(_build_add_kernel()) == ir("""
        kernel @add(%x_ptr: ptr<f32> {divisibility = 16}, %out: ptr<f32>, %n: i32) {
          %pid = program_id {axis = 0} : i32
          %0 = constant {value = 64} : i32
          %1 = binary {kind = "mul"} (%pid, %0) : i32
          %2 = splat (%1) : tile<64xi32>
          %3 = arange {start = 0, end = 64} : tile<64xi32>
          %offs = binary {kind = "add"} (%2, %3) : tile<64xi32>
          %4 = splat (%n) : tile<64xi32>
          %5 = compare {pred = "lt"} (%offs, %4) : tile<64xi1>
          %6 = splat (%x_ptr) : tile<64xptr<f32>>
          %7 = addptr (%6, %offs) : tile<64xptr<f32>>
          %x = load (%7, %5, none) : tile<64xf32>
          %8 = splat (%out) : tile<64xptr<f32>>
          %9 = addptr (%8, %offs) : tile<64xptr<f32>>
          store (%9, %x, %5)
        }
    """)


def test_locations_round_trip_when_asked():
    module = _build_add_kernel()
    text = print_module(module, locs=True)
    assert 'kernel @add(%x_ptr: ptr<f32> {divisibility = 16}, %out: ptr<f32>, %n: i32) ' \
           'loc("k.py":1:0 in "add") {' in text
    assert '%pid = program_id {axis = 0} : i32 loc("k.py":3:10 in "add")' in text
    assert 'store (%9, %x, %5) loc("k.py":4:4 in "add")' in text
    parsed = parse_module(text)
    assert print_module(parsed, locs=True) == text
    assert parsed.kernel.body.ops[0].loc == Loc("k.py", 3, 10, "add")
    assert parsed.kernel.loc == Loc("k.py", 1, 0, "add")
    assert "loc(" not in print_module(module)
    assert parse_module(print_module(module)).kernel.body.ops[0].loc == UNKNOWN_LOC


def test_locations_without_function_and_odd_file_names():
    text = ir(r"""
        kernel @k() {
          %0 = program_id {axis = 1} : i32 loc("dir with space/\\x\"q.py":12:0)
        }
    """)
    module = assert_round_trip(text, locs=True)
    assert module.kernel.body.ops[0].loc == Loc('dir with space/\\x"q.py', 12, 0, "")


def _bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


@pytest.mark.parametrize("value", [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 0.1,
                                   1e-300, 5e-324, 1.7976931348623157e308, 3.0, 1e16,
                                   -2.5e-7])
def test_special_floats_round_trip_exactly(value):
    body = Block()
    Builder(body).create(O.ConstantOp, value=value, result_types=[f32])
    module = Module()
    module.add(Function("k", body, is_kernel=True))
    text = print_module(module)
    again = parse_module(text).kernel.body.ops[0].value
    assert isinstance(again, float)
    if math.isnan(value):
        assert math.isnan(again) and math.copysign(1, again) == math.copysign(1, value)
    else:
        assert _bits(again) == _bits(value)
    assert print_module(parse_module(text)) == text


def test_ints_floats_and_bools_stay_distinct():
    module = assert_round_trip("""
        kernel @k() {
          %0 = constant {value = 1} : f32
          %1 = constant {value = 1.0} : f32
          %2 = constant {value = 1} : i1
          %3 = constant {value = -9223372036854775808} : i64
          %4 = constant {value = 18446744073709551615} : u64
        }
    """)
    values = [op.value for op in module.kernel.body.ops]
    assert [type(v) for v in values] == [int, float, int, int, int]
    assert values[3] == -2**63 and values[4] == 2**64 - 1


def test_default_attributes_are_omitted_and_others_printed():
    module = parse_module(ir("""
        kernel @k(%p: ptr<f32>) {
          %0 = load (%p, none, none) : f32
          %1 = load {volatile = True} (%p, none, none) : f32
          %2 = atomic_rmw {kind = "max"} (%p, %1, none) : f32
          %3 = atomic_rmw {kind = "max", sem = "release", scope = "sys"} (%p, %1, none) : f32
        }
    """))
    ops = module.kernel.body.ops
    assert ops[0].volatile is False and ops[1].volatile is True
    assert (ops[2].sem, ops[2].scope) == ("acq_rel", "gpu")
    assert (ops[3].sem, ops[3].scope) == ("release", "sys")
    text = print_module(module)
    assert "%0 = load (%p, none, none) : f32" in text
    assert '%2 = atomic_rmw {kind = "max"} (%p, %1, none) : f32' in text


def test_attribute_literals_round_trip():
    module = parse_module(ir("""
        module attributes {name = "k", nested = {"a key" = [1, 2.5, (), (3,), None]}, flag = False}

        kernel @k() {
          %0 = constant {value = 0} : f16 // a comment
        }  # another comment
    """))
    assert module.attrs == {"name": "k", "nested": {"a key": [1, 2.5, (), (3,), None]},
                            "flag": False}
    text = print_module(module)
    assert text.startswith('module attributes {name = "k", nested = {"a key" = [1, 2.5, (), '
                           '(3,), None]}, flag = False}\n')
    assert print_module(parse_module(text)) == text


def test_type_attributes_round_trip():
    module = Module(attrs={"types": (f16, PointerType(i32), TileType((2, 4), f32))})
    module.add(Function("k", Block(), is_kernel=True))
    text = print_module(module)
    assert "(!f16, !ptr<i32>, !tile<2x4xf32>)" in text
    assert parse_module(text).attrs == module.attrs


def test_value_names_are_made_unique_and_safe():
    body = Block.with_args([i32, i32], ["a", "a"])
    b = Builder(body)
    x = b.create(O.BinaryOp, kind="add", lhs=body.args[0], rhs=body.args[1]).result
    x.name = "a"
    y = b.create(O.BinaryOp, kind="add", lhs=x, rhs=x).result
    y.name = "3"      # digit-only hints are ignored: they would clash with the numbering
    z = b.create(O.BinaryOp, kind="add", lhs=y, rhs=y).result
    z.name = "x[1]+y"
    b.create(O.ReturnOp, [z])
    fn = Function("f", body, result_types=[i32])
    text = print_function(fn)
    assert text == ir("""
        func @f(%a: i32, %a_1: i32) -> i32 {
          %a_2 = binary {kind = "add"} (%a, %a_1) : i32
          %0 = binary {kind = "add"} (%a_2, %a_2) : i32
          %x_1__y = binary {kind = "add"} (%0, %0) : i32
          return ([%x_1__y])
        }
    """).rstrip("\n")
    assert parse_function(text + "\n") is not None
    module = Module()
    module.add(fn)
    assert print_module(parse_module(print_module(module))) == print_module(module)


def test_multiple_results_and_function_result_lists():
    assert_round_trip("""
        func @pair(%a: f32, %b: i32) -> (f32, i32) {
          return ([%a, %b])
        }

        func @nothing() {
          return ([])
        }

        kernel @k(%x: f32, %n: i32) {
          %0, %1 = call {callee = "pair"} ([%x, %n]) : f32, i32
          call {callee = "nothing"} ([])
        }
    """)


def test_layout_annotations_are_printed():
    class Blocked:
        def __str__(self):
            return "#blocked<4>"

    body = Block.with_args([TileType((4,), f32, layout=Blocked())], ["t"])
    text = print_function(Function("k", body, is_kernel=True))
    assert "%t: tile<4xf32, #blocked<4>>" in text
    with pytest.raises(IRParseError, match="line 1: bad type"):
        parse_module(text)


@dataclass(frozen=True)
class _Lanes:
    """A layout of a code generator the IR does not know."""

    n: int
    rank = 1

    def __str__(self) -> str:
        return f"#test.lanes<{self.n}>"


def test_registered_layouts_and_types_parse_back(monkeypatch):
    """Code generators register their layouts' and types' text forms; nested angle brackets
    of any depth stay one type; a layout with a ``rank`` fits only tiles of that rank."""
    text = ir("""
        kernel @k(%t: tile<4xptr<f32>, #test.lanes<8>>) {
          %0 = bitcast (%t) : tile<4xi64, #test.lanes<8>>
        }
    """)
    with pytest.raises(IRParseError, match=r"unknown layout #test.lanes \(known: "):
        parse_module(text)
    monkeypatch.setitem(T._LAYOUT_SYNTAX, "test.lanes", lambda body: _Lanes(int(body)))
    module = parse_module(text)
    verify_module(module)
    assert print_module(module) == text
    assert module.kernel.args[0].type.layout == _Lanes(8)
    wrong = parse_module("kernel @k(%t: tile<2x2xf32, #test.lanes<2>>) {\n}\n")
    with pytest.raises(IRVerificationError, match="has a layout of rank 1 on a tile of rank 2"):
        verify_module(wrong)
    monkeypatch.setitem(T._TYPE_SYNTAX, "test.box", lambda text: _Lanes(len(text)))
    assert T.parse_type("test.box<a<b<c>>>") == _Lanes(17)
    with pytest.raises(ValueError, match="'tile' is a type of the IR itself"):
        T.register_type_syntax("tile", T.parse_type)


# ---------------------------------------------------------------------------------------------
# Parser errors: each names the line and the problem
# ---------------------------------------------------------------------------------------------
_PARSE_ERRORS = [
    ("kernel @k() {\n  %0 = frobnicate : i32\n}", 2, "unknown op 'frobnicate'"),
    ("kernel @k() {\n  %0 = constant {value = 1} : i32\n  %1 = binary {kind = \"add\"} "
     "(%0, %9) : i32\n}", 3, "use of undefined value %9"),
    ("kernel @k(%a: i32) {\n  %0 = binary {kind = \"add\"} (%a) : i32\n}", 2,
     "'binary' takes 2 operand groups"),
    ("kernel @k(%a: i32) {\n  %0, %1 = unary {kind = \"neg\"} (%a) : i32\n}", 2,
     "2 result names but 1 result types"),
    ("kernel @k() {\n  %0 = constant {value = 1} : i33\n}", 2, "bad type 'i33'"),
    ("kernel @k() {\n  %0 = constant {valu = 1} : i32\n}", 2,
     "op 'constant' has no attribute 'valu'"),
    ("kernel @k() {\n  %0 = constant {value = 1} : i32\n", 3, "missing '}'"),
    ("kernel @k(%a: i32) {\n  %a = constant {value = 1} : i32\n}", 2,
     "value %a is defined twice"),
    ("kernel @k(%a: i32) {\n  yield (%a)\n}", 2, "operand 'values' is a list"),
    ("kernel @k() {\n  %0 = constant : i32\n}", 2, "cannot build 'constant'"),
    ("kernel @k() {\n  %0 = constant {value = 1} : i32 $\n}", 2, "unexpected character '$'"),
    ("kernel @k() {\n}\nkernel @k() {\n}", 3, "function @k is defined twice"),
    ("fn @k() {\n}", 1, "expected 'kernel' or 'func'"),
    ("kernel @k(%c: i1) {\n  if (%c) {\n    yield ([])\n  } else {\n    yield ([])\n  }\n}",
     4, "expected 'else_body' (region 2 of 'if')"),
    ("kernel @k() {\n  %0 = constant {value = (1)} : i32\n}", 2, "one-element tuple"),
]


@pytest.mark.parametrize("text,line,message", _PARSE_ERRORS)
def test_parse_errors_name_line_and_problem(text, line, message):
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    assert info.value.line == line
    assert str(info.value).startswith(f"line {line}: ")
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_inner_values_are_not_visible_after_their_region():
    text = ir("""
        kernel @k(%c: i1) {
          if (%c) {
            %inner = constant {value = 1} : i32
            yield ([])
          } else_body {
            yield ([])
          }
          %0 = binary {kind = "add"} (%inner, %inner) : i32
        }
    """)
    with pytest.raises(IRParseError, match="line 8: use of undefined value %inner"):
        parse_module(text)


def test_function_names_that_need_quotes():
    assert_round_trip("""
        func @"outer.<locals>.helper-1"(%a: i32) -> i32 {
          return ([%a])
        }

        kernel @k(%a: i32) {
          %0 = call {callee = "outer.<locals>.helper-1"} ([%a]) : i32
        }
    """)


def test_trailing_empty_list_operands_are_left_out_and_read_back():
    """A load's ``box`` and ``array`` are empty for every load but a box read: the printer
    leaves trailing empty lists that have a default out (never the only group), and the
    parser reads the text with or without them."""
    module = parse_module(ir("""
        kernel @k(%p: ptr<f16> {divisibility = 16}, %m: i64, %n: i64, %s: i64, %r: i32) {
          %one = constant {value = 1} : i64
          %0 = splat (%p) : tile<16x16xptr<f16>>
          %1 = load (%0, none, none) : tile<16x16xf16>
          %2 = load (%0, none, none, [], []) : tile<16x16xf16>
          %3 = load (%0, none, none, [%r, %r], [%p, %m, %n, %s, %one]) : tile<16x16xf16>
        }
    """))
    verify_module(module)
    loads = module.kernel.body.ops[2:]
    assert [len(op.box) for op in loads] == [0, 0, 2] and len(loads[2].array) == 5
    text = print_module(module)
    assert text.count("load (%0, none, none) : tile<16x16xf16>") == 2
    assert "[%r, %r], [%p, %m, %n, %s, %one]) : tile<16x16xf16>" in text
    assert print_module(parse_module(text)) == text
    with pytest.raises(IRVerificationError, match="go together"):
        verify_module(parse_module(text.replace(", [%p, %m, %n, %s, %one]", "")))


def test_a_store_of_a_box_reads_back():
    """A store says which box it writes as a load does (``StoreOp.box`` and ``array``);
    other stores print as before."""
    module = parse_module(ir("""
        kernel @k(%p: ptr<f16> {divisibility = 16}, %m: i64, %n: i64, %s: i64, %r: i32) {
          %one = constant {value = 1} : i64
          %0 = splat (%p) : tile<16x16xptr<f16>>
          %1 = load (%0, none, none) : tile<16x16xf16>
          store (%0, %1, none)
          store (%0, %1, none, [%r, %r], [%p, %m, %n, %s, %one])
        }
    """))
    verify_module(module)
    stores = module.kernel.body.ops[3:]
    assert [len(op.box) for op in stores] == [0, 2] and len(stores[1].array) == 5
    text = print_module(module)
    assert "  store (%0, %1, none)\n" in text
    assert print_module(parse_module(text)) == text
    with pytest.raises(IRVerificationError, match="coordinates"):
        verify_module(parse_module(text.replace("[%r, %r]", "[%r]")))
