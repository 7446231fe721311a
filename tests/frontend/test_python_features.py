"""Python features allowed inside kernels on compile-time values and scalars."""
import pytest

import anytile.language as tl
from anytile.errors import CompilationError
from anytile.ir import types as T
from anytile.runtime.jit import jit

from fe_kit import compile_ir, kernel_ops, names, of_kind, ptr


@jit
def python_builtins(x_ptr, n, SHAPE: tl.constexpr, BIAS: tl.constexpr):
    size = len(SHAPE) + int(2.7) + min(SHAPE) + max(4, 9)  # 2 + 2 + 4 + 9
    ratio = float(size) / 2
    offs = tl.arange(0, SHAPE[1])
    if BIAS is not None and isinstance(BIAS, float):
        tl.store(x_ptr + offs, ratio + BIAS)
    else:
        tl.store(x_ptr + offs, ratio)
    tl.static_assert(isinstance(n, tl.tensor) and isinstance(BIAS, (tl.constexpr, int)))
    tl.static_assert(not isinstance(n, tl.constexpr))
    lo = min(n, 3)
    hi = max(n, lo, 100)
    tl.store(x_ptr, lo + hi)


def test_python_builtins_on_constexprs_and_min_max_on_tensors():
    m = compile_ir(python_builtins, {"SHAPE": (4, 8), "BIAS": 0.5}, x_ptr=ptr(T.f32), n=T.i32)
    ops = kernel_ops(m)
    assert 9.0 in [op.value for op in of_kind(ops, "constant")]  # 17 / 2 + 0.5, folded
    binary = [op.kind for op in of_kind(ops, "binary")]
    assert binary.count("min") == 1 and binary.count("max") == 2
    m = compile_ir(python_builtins, {"SHAPE": (4, 8), "BIAS": None}, x_ptr=ptr(T.f32), n=T.i32)
    assert 8.5 in [op.value for op in of_kind(kernel_ops(m), "constant")]


@jit
def boolean_logic(x_ptr, n, m, FLAG: tl.constexpr):
    if (n > 0 and m > 0) or not FLAG:
        tl.store(x_ptr, 1.0)
    if not (n == 3):
        tl.store(x_ptr, 2.0)
    ok = FLAG and n > 5
    tl.store(x_ptr, ok)


def test_and_or_not_on_scalars_build_i1_logic():
    ops = kernel_ops(compile_ir(boolean_logic, {"FLAG": True}, x_ptr=ptr(T.f32), n=T.i32,
                                m=T.i32))
    ifs = of_kind(ops, "if")
    assert len(ifs) == 2 and all(i.cond.type == T.i1 for i in ifs)
    kinds = [op.kind for op in of_kind(ops, "binary")]
    assert "and" in kinds and "or" in kinds
    assert "not" in [op.kind for op in of_kind(ops, "unary")]


def test_constexpr_operand_short_circuits():
    ops = kernel_ops(compile_ir(boolean_logic, {"FLAG": False}, x_ptr=ptr(T.f32), n=T.i32,
                                m=T.i32))
    # `... or not FLAG` is a tensor `or` with a constant; `FLAG and ...` folds to False
    stored = of_kind(ops, "store")[-1].value
    assert stored.owner.NAME == "constant" and stored.owner.value == 0.0


@jit
def unpacking(x_ptr, n):
    a, (b, c) = n, (n + 1, 2)
    a, b = b, a
    values = (a, b, c)
    total = 0
    for i in tl.static_range(len(values)):
        total += values[i]
    tl.store(x_ptr, total)
    pass


def test_tuple_unpacking_and_indexing():
    ops = kernel_ops(compile_ir(unpacking, x_ptr=ptr(T.i32), n=T.i32))
    # n + 1, then 0 + a, + b, + 2 (total becomes a tensor at its first tensor addend)
    assert [op.kind for op in of_kind(ops, "binary")] == ["add"] * 4


@jit
def static_while(x_ptr, n, STEPS: tl.constexpr):
    while STEPS > 100:
        tl.store(x_ptr, 1.0)
    tl.store(x_ptr, 2.0)


def test_while_with_false_constant_condition_disappears():
    ops = kernel_ops(compile_ir(static_while, {"STEPS": 3}, x_ptr=ptr(T.f32), n=T.i32))
    assert "while" not in names(ops) and len(of_kind(ops, "store")) == 1


@jit
def iterate_tuple(x_ptr, n):
    for v in (1, 2):
        tl.store(x_ptr, v)


def test_only_range_loops_are_supported():
    with pytest.raises(CompilationError, match=r"only `range\(...\)`, `tl.range\(...\)` and "
                                               r"`tl.static_range\(...\)` loops are supported"):
        compile_ir(iterate_tuple, x_ptr=ptr(T.f32), n=T.i32)


@jit
def truth_of_tile(x_ptr, n):
    x = tl.arange(0, 16)
    y = x if x else x


def test_runtime_tile_in_a_ternary_is_rejected():
    with pytest.raises(CompilationError, match="the condition of a conditional expression must "
                                               "be a scalar"):
        compile_ir(truth_of_tile, x_ptr=ptr(T.f32), n=T.i32)


@jit
def annotated(x_ptr, n):
    K: tl.constexpr = 4
    m: tl.constexpr = n  # must be compile-time


def test_constexpr_annotation_needs_a_compile_time_value():
    with pytest.raises(CompilationError, match="`m` is annotated tl.constexpr but its value is "
                                               "only known when the kernel runs"):
        compile_ir(annotated, x_ptr=ptr(T.f32), n=T.i32)


@jit
def fstring_message(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK < 64, f"BLOCK={BLOCK} is too large")


def test_fstrings_format_compile_time_values():
    with pytest.raises(CompilationError, match="static_assert failed: BLOCK=128 is too large"):
        compile_ir(fstring_message, {"BLOCK": 128}, x_ptr=ptr(T.f32), n=T.i32)


def test_static_print_prints_at_compile_time(capsys):
    @jit
    def prints(x_ptr, BLOCK: tl.constexpr):
        tl.static_print("block is", BLOCK)
        print("twice", BLOCK * 2)

    compile_ir(prints, {"BLOCK": 8}, x_ptr=ptr(T.f32))
    assert capsys.readouterr().out == "block is 8\ntwice 16\n"


def test_jit_functions_defined_in_a_function_see_its_variables():
    scale = tl.constexpr(3)

    @jit
    def helper(x):
        return x * scale

    @jit
    def kernel(x_ptr, n):
        tl.store(x_ptr, helper(n))

    m = compile_ir(kernel, x_ptr=ptr(T.i32), n=T.i32)
    assert [op.value for op in of_kind(list(m.functions.values())[1].body.ops, "constant")] == [3]


def plain_python_helper(a, b):
    return a * b + 1


@jit
def calls_plain_python(x_ptr, n, BLOCK: tl.constexpr):
    size = plain_python_helper(BLOCK, 2)
    tl.store(x_ptr + tl.arange(0, size - 1), 1.0)
    tl.store(x_ptr, plain_python_helper(n, 2))


def test_plain_python_functions_take_only_compile_time_values():
    with pytest.raises(CompilationError, match="`plain_python_helper` is a plain Python "
                                               "function, so it only takes compile-time values"):
        compile_ir(calls_plain_python, {"BLOCK": 8}, x_ptr=ptr(T.f32), n=T.i32)


@jit
def reassigns_dtype_in_loop(x_ptr, n):
    dt = tl.float16
    for i in range(n):
        dt = tl.float32
    tl.store(x_ptr, n.to(dt))


def test_compile_time_values_cannot_change_in_a_runtime_loop():
    with pytest.raises(CompilationError, match="`dt` holds a compile-time value "
                                               r"\(tl.float16\) and cannot be reassigned"):
        compile_ir(reassigns_dtype_in_loop, x_ptr=ptr(T.f32), n=T.i32)


@jit
def prints_tensor(x_ptr, n):
    print("n is", n, 3)


def test_print_of_run_time_values_is_device_print():
    text = str(compile_ir(prints_tensor, x_ptr=ptr(T.f32), n=T.i32))
    assert 'print {prefix = "n is 3"} (%n)' in text
