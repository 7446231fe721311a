"""Compile-time folding, loops with loop-carried values, if/else yields, while, calls."""
import anytile.language as tl
from anytile.ir import types as T
from anytile.runtime.jit import jit

from fe_kit import all_ops, compile_ir, kernel_ops, names, of_kind, ptr

MODULE_CONST: tl.constexpr = 5
WRAPPED_CONST = tl.constexpr(7)


@jit
def constexpr_folding(x_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    size = BLOCK * 2 + MODULE_CONST - WRAPPED_CONST  # folded: 2 * BLOCK - 2
    if MODE == "double":
        v = n * 2
    else:
        v = n * 3
    w = 4.0 if BLOCK > 100 else 8.0
    tl.store(x_ptr, v + size + w)


def test_constexpr_arithmetic_and_conditions_fold_at_compile_time():
    m = compile_ir(constexpr_folding, {"BLOCK": 64, "MODE": "double"}, x_ptr=ptr(T.f32), n=T.i32)
    ops = kernel_ops(m)
    assert "if" not in names(ops)
    consts = [op.value for op in of_kind(ops, "constant")]
    assert consts == [2, 126, 8.0]  # only the taken branch and the folded size appear
    m = compile_ir(constexpr_folding, {"BLOCK": 128, "MODE": "triple"}, x_ptr=ptr(T.f32),
                   n=T.i32)
    assert [op.value for op in of_kind(kernel_ops(m), "constant")] == [3, 254, 4.0]


@jit
def unrolled(x_ptr, n):
    acc = tl.zeros([8], dtype=tl.float32)
    for i in tl.static_range(1, 7, 2):
        acc += tl.load(x_ptr + i * 8 + tl.arange(0, 8))
    tl.store(x_ptr + tl.arange(0, 8), acc)


def test_static_range_unrolls():
    ops = kernel_ops(compile_ir(unrolled, x_ptr=ptr(T.f32), n=T.i32))
    assert "for" not in names(ops)
    assert len(of_kind(ops, "load")) == 3
    assert [op.value for op in of_kind(ops, "constant", result_types=None)
            if op.result.type == T.i32] == [8, 24, 40]  # i * 8 folded for i = 1, 3, 5


@jit
def runtime_loop(x_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    count = 0
    unchanged = 1.5
    for i in tl.range(0, n, 2, num_stages=3):
        temp = tl.load(x_ptr + i + tl.arange(0, BLOCK))
        acc += temp * unchanged
        count += 1
    tl.store(x_ptr + tl.arange(0, BLOCK), acc + count)


def test_for_loop_carries_assigned_variables():
    m = compile_ir(runtime_loop, {"BLOCK": 32}, x_ptr=ptr(T.f32), n=T.i32)
    (loop,) = of_kind(kernel_ops(m), "for")
    assert loop.num_stages == 3
    assert [v.type for v in loop.inits] == [T.TileType((32,), T.f32), T.i32]
    assert [a.name for a in loop.body.args] == ["i", "acc", "count"]
    assert loop.body.args[0].type == T.i32
    assert loop.body.ops[-1].NAME == "yield"
    assert [v.type for v in loop.body.ops[-1].values] == [T.TileType((32,), T.f32), T.i32]
    assert [r.name for r in loop.results] == ["acc", "count"]
    # the final add uses the loop's results
    add = [op for op in kernel_ops(m) if op.NAME == "binary" and op.kind == "add"][-1]
    assert loop.results[0] in (add.lhs, add.rhs)


@jit
def i64_loop(x_ptr, start, n):
    for i in range(start, n):
        tl.store(x_ptr + i, 1.0)


def test_loop_induction_variable_takes_the_promoted_bound_type():
    m = compile_ir(i64_loop, x_ptr=ptr(T.f32), start=T.i32, n=T.i64)
    (loop,) = of_kind(kernel_ops(m), "for")
    assert loop.lower.type == loop.upper.type == loop.step.type == T.i64
    assert loop.inits == []


@jit
def persistent_rows(out_ptr, n_rows, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        tl.store(out_ptr + row * BLOCK + tl.arange(0, BLOCK), 1.0)


def test_loop_bounds_can_be_runtime_values():
    m = compile_ir(persistent_rows, {"BLOCK": 16}, out_ptr=ptr(T.f32), n_rows=T.i32)
    (loop,) = of_kind(kernel_ops(m), "for")
    assert loop.lower.owner.NAME == "program_id" and loop.step.owner.NAME == "num_programs"


@jit
def branchy(x_ptr, n):
    a = 1.0
    b = tl.zeros([16], dtype=tl.float32)
    if n > 4:
        a = a * 2
        b = b + 1
        only_then = 3
    else:
        b = b - 1
    tl.store(x_ptr + tl.arange(0, 16), a + b)


def test_if_else_yields_the_variables_either_branch_assigns():
    m = compile_ir(branchy, x_ptr=ptr(T.f32), n=T.i32)
    (if_op,) = of_kind(kernel_ops(m), "if")
    assert if_op.cond.type == T.i1
    assert [r.name for r in if_op.results] == ["a", "b"]
    assert [r.type for r in if_op.results] == [T.f32, T.TileType((16,), T.f32)]
    then_yield, else_yield = if_op.then_body.ops[-1], if_op.else_body.ops[-1]
    assert then_yield.NAME == else_yield.NAME == "yield"
    # `a` is a number in the else branch: it is materialised as an f32 constant there
    assert else_yield.values[0].owner.NAME == "constant"
    assert else_yield.values[0].owner.value == 1.0


@jit
def ternary(x_ptr, n):
    v = n * 2 if n > 0 else 7
    tl.store(x_ptr, v)


def test_ternary_with_runtime_condition_is_an_if():
    (if_op,) = of_kind(kernel_ops(compile_ir(ternary, x_ptr=ptr(T.f32), n=T.i32)), "if")
    assert [r.type for r in if_op.results] == [T.i32]


@jit
def collatz_steps(x_ptr, n):
    steps = 0
    v = n
    while v != 1:
        v = tl.where(v % 2 == 0, v // 2, 3 * v + 1)
        steps += 1
    tl.store(x_ptr, steps)


def test_while_loop_carries_values_through_before_and_after():
    m = compile_ir(collatz_steps, x_ptr=ptr(T.i32), n=T.i32)
    (loop,) = of_kind(kernel_ops(m), "while")
    assert [b.name for b in loop.before.args] == ["v", "steps"]
    cond = loop.before.ops[-1]
    assert cond.NAME == "condition" and cond.values == loop.before.args
    assert loop.after.ops[-1].NAME == "yield"
    assert [r.type for r in loop.results] == [T.i32, T.i32]


@jit
def early_exit(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    tl.store(x_ptr + pid * BLOCK + tl.arange(0, BLOCK), 1.0)


def test_early_return_puts_the_rest_of_the_kernel_in_the_else_branch():
    m = compile_ir(early_exit, {"BLOCK": 16}, x_ptr=ptr(T.f32), n=T.i32)
    top = [op.NAME for op in m.kernel.body.ops]
    assert top[-1] == "if"
    if_op = m.kernel.body.ops[-1]
    assert names(if_op.then_body.ops) == ["yield"]
    assert "store" in names(if_op.else_body.ops)


# -- calls -----------------------------------------------------------------------------------
@jit
def affine(x, scale: tl.constexpr, shift=1.0):
    """Docstrings are fine."""
    return x * scale + shift


@jit
def pair(x):
    return x + 1, x - 1


@jit
def no_result(x_ptr, v):
    tl.store(x_ptr, v)


@jit
def caller(x_ptr, n, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = affine(x, 2.0)
    y = affine(y, 2.0)
    y = affine(y, scale=3.0, shift=0.5)
    z = affine(n, 2.0)
    hi, lo = pair(z)
    no_result(x_ptr, hi + lo)
    tl.store(x_ptr + tl.arange(0, BLOCK), y)


def test_calls_become_call_ops_to_specialised_functions():
    m = compile_ir(caller, {"BLOCK": 16}, x_ptr=ptr(T.f32), n=T.i32)
    calls = of_kind(kernel_ops(m), "call")
    assert len(calls) == 6
    callees = [c.callee for c in calls]
    assert callees[0] == callees[1]  # same types and constants: one specialisation
    assert len(set(callees)) == 5
    assert set(m.functions) == {"caller", *callees}
    assert m.kernel_name == "caller" and m.kernel.is_kernel
    spec = m.functions[callees[0]]
    assert not spec.is_kernel and [a.type for a in spec.args] == [T.TileType((16,), T.f32)]
    assert spec.result_types == [T.TileType((16,), T.f32)]
    assert spec.body.ops[-1].NAME == "return"
    assert [r.type for r in calls[4].results] == [T.f32, T.f32]  # i32 * 2.0 is f32
    assert calls[5].results == [] and m.functions[callees[5]].body.ops[-1].values == []
    assert all(c.callee.isidentifier() for c in calls)


def test_kernel_arguments_and_attributes():
    m = compile_ir(caller, {"BLOCK": 16}, {"x_ptr": {"divisibility": 16}}, x_ptr=ptr(T.f32),
                   n=T.i32)
    assert [a.name for a in m.kernel.args] == ["x_ptr", "n"]
    assert m.kernel.arg_attrs == [{"divisibility": 16}, {}]


def test_every_op_carries_the_user_source_location():
    m = compile_ir(caller, {"BLOCK": 16}, x_ptr=ptr(T.f32), n=T.i32)
    for op in all_ops(m):
        assert op.loc.file == __file__ and op.loc.line > 0, op
    affine_ops = [op for op in all_ops(m) if op.loc.func == "affine"]
    assert affine_ops and all(op.loc.line == affine.first_line + 2 for op in affine_ops
                              if op.NAME == "binary")


@jit
def combine_max_abs(a, b):
    return tl.maximum(tl.abs(a), tl.abs(b))


@jit
def reduce_with_jit_combine(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr, tl.reduce(x, 0, combine_max_abs))
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.associative_scan(x, 0, combine_max_abs, reverse=True))


def test_reduce_and_scan_call_the_combine_function_in_their_region():
    m = compile_ir(reduce_with_jit_combine, {"BLOCK": 32}, x_ptr=ptr(T.f32))
    (red,) = of_kind(kernel_ops(m), "reduce")
    (scan,) = of_kind(kernel_ops(m), "scan")
    assert scan.reverse
    for op in (red, scan):
        assert [a.type for a in op.combine.args] == [T.f32, T.f32]
        assert names(op.combine.ops) == ["call", "yield"]
    assert red.combine.ops[0].callee == scan.combine.ops[0].callee


@jit
def nested_early_exits(x_ptr, n, CHECK: tl.constexpr):
    pid = tl.program_id(0)
    if CHECK:
        tl.device_assert(n > 0)
    if pid >= n:
        tl.store(x_ptr, 0.0)
        return
    if pid == 0:
        return
    tl.store(x_ptr + pid, 1.0)
    if pid == 1:
        tl.store(x_ptr, 2.0)
        return


def test_several_early_returns_nest_as_else_branches():
    m = compile_ir(nested_early_exits, {"CHECK": False}, x_ptr=ptr(T.f32), n=T.i32)
    outer = m.kernel.body.ops[-1]
    assert outer.NAME == "if" and names(outer.then_body.ops)[-2:] == ["store", "yield"]
    inner = outer.else_body.ops[-2]
    assert inner.NAME == "if" and names(inner.then_body.ops) == ["yield"]
    last = inner.else_body.ops[-2]
    assert last.NAME == "if" and names(last.then_body.ops)[-2:] == ["store", "yield"]


@jit
def return_in_nested_if(x_ptr, n):
    if n > 0:
        if n > 5:
            return
        tl.store(x_ptr, 1.0)
    tl.store(x_ptr + 1, 2.0)


def test_return_nested_inside_a_runtime_if_skips_what_follows():
    # the statements after the outer `if` run in each branch that did not return
    import numpy as np
    import anytile as at
    kernel = at.jit(return_in_nested_if.fn)
    for n, want in ((7, [-1.0, -1.0]), (3, [1.0, 2.0]), (0, [-1.0, 2.0])):
        x = np.full(2, -1.0, np.float32)
        kernel[(1,)](x, n, device="interpreter")
        assert x.tolist() == want, n


@jit
def sign_or_zero(x):
    if x > 0:
        return x, 1
    elif x < 0:
        return -x, -1
    return x, 0


@jit
def clipped(x, LIMIT: tl.constexpr):
    if LIMIT is None:
        return x
    if x > LIMIT:
        return LIMIT * 1.0
    y = x * 2.0
    return y


@jit
def returns_from_branches(x_ptr, n, v):
    mag, sign = sign_or_zero(n)
    tl.store(x_ptr, mag * sign + clipped(v, 4) + clipped(v, None))


def test_device_functions_may_return_from_runtime_branches():
    m = compile_ir(returns_from_branches, x_ptr=ptr(T.f32), n=T.i32, v=T.f32)
    sign_fn = next(f for name, f in m.functions.items() if name.startswith("sign_or_zero"))
    (outer,) = [op for op in sign_fn.body.ops if op.NAME == "if"]
    assert [r.type for r in outer.results] == [T.i32, T.i32]
    inner = outer.else_body.ops[-2]
    assert inner.NAME == "if" and [r.type for r in inner.results] == [T.i32, T.i32]
    ret = sign_fn.body.ops[-1]
    assert ret.NAME == "return" and ret.values == outer.results
    clip_fns = [f for name, f in m.functions.items() if name.startswith("clipped")]
    assert sorted(len([op for op in f.body.ops if op.NAME == "if"]) for f in clip_fns) == [0, 1]


@jit
def returns_unbalanced(x):
    if x > 0:
        return x
    x = x + 1


@jit
def calls_unbalanced(x_ptr, n):
    tl.store(x_ptr, returns_unbalanced(n))


def test_a_branch_that_returns_nothing_cannot_merge_with_one_that_returns():
    import pytest
    from anytile.errors import CompilationError
    with pytest.raises(CompilationError, match="the two branches of this `if` return different "
                                               "numbers of values"):
        compile_ir(calls_unbalanced, x_ptr=ptr(T.f32), n=T.i32)


@jit
def store_or_value(x_ptr, n):
    v = tl.store(x_ptr, 1.0) if n > 0 else 2.0
    tl.store(x_ptr + 1, v)


def test_a_conditional_expression_with_one_void_branch_is_named():
    import pytest
    from anytile.errors import CompilationError
    with pytest.raises(CompilationError, match="one branch of this conditional expression gives "
                                               "no value"):
        compile_ir(store_or_value, x_ptr=ptr(T.f32), n=T.i32)
