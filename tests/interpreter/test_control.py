"""Structured control flow, calls, program ids, assertions, arguments and error reporting."""
from __future__ import annotations

import os

import numpy as np
import pytest

from anytile.backend import KernelArg, PointerArg
from anytile.errors import DeviceAssertError, LaunchError
from anytile.ir import (AddPtrOp, AssertOp, AtomicRMWOp, BarrierOp, Block, CallOp, ConditionOp,
                        ForOp, HintOp, IfOp, LoadOp, NumProgramsOp, ReshapeOp, ReturnOp,
                        SelectOp, StoreOp, WhileOp)
from anytile.ir.types import TileType, f32, f64, i1, i32, i64, u8, u64
from interp_kit import BACKEND, DEVICE, KernelBuilder, ptr, rng, run

THIS_FILE = os.path.basename(__file__)


def build_for(kb: KernelBuilder, lower, upper, step, inits, body_fn):
    """A ``for`` whose body is ``body_fn(iv, *carried) -> new carried``; returns the op."""
    body = Block.with_args([lower.type] + [v.type for v in inits])
    op = kb.op(ForOp, lower, upper, step, list(inits), body)
    with kb.b.at_end_of(body):
        kb.yield_(*body_fn(*body.args))
    return op


def test_for_loop_carries_values_and_runs_zero_times():
    kb = KernelBuilder([("out", ptr(i64)), ("n", i32)])
    zero, one = kb.const(0, i32), kb.const(1, i64)
    step = kb.const(3, i32)
    loop = build_for(kb, zero, kb.arg("n"), step, [kb.const(0, i64), one],
                     lambda iv, total, prod: [kb.binary("add", total, kb.cast(iv, i64)),
                                              kb.binary("mul", prod, kb.const(2, i64))])
    offs = kb.arange(2)
    results = [kb.splat(r, (2,)) for r in loop.results]
    is_first = kb.compare("eq", offs, kb.splat(zero, (2,)))
    kb.store(kb.ptrs(kb.arg("out"), offs), kb.op(SelectOp, is_first,
                                                  results[0], results[1]).result)
    out = np.full(2, -1, np.int64)
    run(kb.module, 1, out, 20)
    assert out.tolist() == [sum(range(0, 20, 3)), 2 ** len(range(0, 20, 3))]
    run(kb.module, 1, out, 0)
    assert out.tolist() == [0, 1]


def test_for_loop_accumulates_tiles():
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(f32)), ("rows", i32)])
    acc0 = kb.splat(kb.const(0.0, f32), (16,))
    cols = kb.arange(16)

    def body(iv, acc):
        offs = kb.binary("add", cols, kb.splat(kb.binary("mul", iv, kb.const(16, i32)), (16,)))
        return [kb.binary("add", acc, kb.load(kb.ptrs(kb.arg("x"), offs)))]

    loop = build_for(kb, kb.const(0, i32), kb.arg("rows"), kb.const(1, i32), [acc0], body)
    kb.store(kb.ptrs(kb.arg("out"), cols), loop.result)
    x = rng(1).standard_normal((7, 16)).astype(np.float32)
    out = np.full(16, np.nan, np.float32)
    run(kb.module, 1, x, out, 7)
    expected = np.zeros(16, np.float32)
    for row in x:
        expected += row
    assert np.array_equal(out, expected)


def test_for_loop_with_non_positive_step_is_an_error():
    kb = KernelBuilder([("step", i32)])
    build_for(kb, kb.const(0, i32), kb.const(10, i32), kb.arg("step"), [], lambda iv: [])
    with pytest.raises(LaunchError, match=r"step must be positive in program \(0, 0, 0\): got 0"):
        run(kb.module, 1, 0)


def test_if_else_yields_per_program():
    kb = KernelBuilder([("out", ptr(i32))])
    pid = kb.pid(0)
    odd = kb.compare("ne", kb.binary("rem", pid, kb.const(2, i32)), kb.const(0, i32))
    then_body, else_body = Block(), Block()
    op = kb.op(IfOp, odd, then_body, else_body, result_types=[i32])
    with kb.b.at_end_of(then_body):
        kb.yield_(kb.binary("mul", pid, kb.const(100, i32)))
    with kb.b.at_end_of(else_body):
        kb.yield_(kb.unary("neg", pid))
    kb.op(StoreOp,
          kb.op(AddPtrOp, kb.arg("out"), pid).result, op.result)
    out = np.zeros(6, np.int32)
    run(kb.module, 6, out)
    assert out.tolist() == [0, 100, -2, 300, -4, 500]


def test_while_loop_counts_collatz_steps():
    kb = KernelBuilder([("out", ptr(i32)), ("start", i32)])
    before, after = Block.with_args([i32, i32]), Block.with_args([i32, i32])
    loop = kb.op(WhileOp, [kb.arg("start"), kb.const(0, i32)], before, after)
    with kb.b.at_end_of(before):
        n, steps = before.args
        kb.op(ConditionOp, kb.compare("ne", n, kb.const(1, i32)), [n, steps])
    with kb.b.at_end_of(after):
        n, steps = after.args
        even = kb.compare("eq", kb.binary("rem", n, kb.const(2, i32)), kb.const(0, i32))
        half = kb.binary("div", n, kb.const(2, i32))
        triple = kb.binary("add", kb.binary("mul", n, kb.const(3, i32)), kb.const(1, i32))
        nxt = kb.op(SelectOp, even, half, triple).result
        kb.yield_(nxt, kb.binary("add", steps, kb.const(1, i32)))
    kb.op(StoreOp, kb.arg("out"), loop.results[1])
    out = np.zeros(1, np.int32)
    run(kb.module, 1, out, 27)
    assert out[0] == 111


def test_calls_to_other_functions_including_recursion():
    kb = KernelBuilder([("x", ptr(i64)), ("out", ptr(i64))])
    # fact(n) = n <= 1 ? 1 : n * fact(n - 1), a recursive call the interpreter must not inline
    fact = KernelBuilder([("n", i64)], name="fact", is_kernel=False, module=kb.module)
    fact.fn.result_types = [i64]
    n = fact.arg("n")
    small = fact.compare("le", n, fact.const(1, i64))
    then_body, else_body = Block(), Block()
    branch = fact.op(IfOp, small, then_body, else_body, result_types=[i64])
    with fact.b.at_end_of(then_body):
        fact.yield_(fact.const(1, i64))
    with fact.b.at_end_of(else_body):
        inner = fact.op(CallOp, "fact", [fact.binary("sub", n, fact.const(1, i64))],
                        result_types=[i64]).result
        fact.yield_(fact.binary("mul", n, inner))
    fact.op(ReturnOp, [branch.result])
    value = kb.op(LoadOp, kb.arg("x")).result
    result = kb.op(CallOp, "fact", [value], result_types=[i64]).result
    again = kb.op(CallOp, "fact", [kb.const(5, i64)], result_types=[i64]).result
    kb.op(StoreOp, kb.arg("out"), kb.binary("add", result, again))
    out = np.zeros(1, np.int64)
    run(kb.module, 1, np.array([10], np.int64), out)
    assert out[0] == 3628800 + 120


def test_call_to_missing_function_is_reported_at_load():
    kb = KernelBuilder([])
    kb.op(CallOp, "nowhere", [], result_types=[])
    with pytest.raises(LaunchError, match="cannot run op 'call'.*nowhere") as info:
        BACKEND.load(kb.module, DEVICE)
    assert THIS_FILE in str(info.value)


def test_program_ids_num_programs_and_launch_order():
    kb = KernelBuilder([("ids", ptr(i32)), ("order", ptr(i32)), ("counter", ptr(i32))])
    x, y, z = kb.pid(0), kb.pid(1), kb.pid(2)
    nx = kb.op(NumProgramsOp, 0).result
    ny = kb.op(NumProgramsOp, 1).result
    linear = kb.binary("add", x, kb.binary("mul", nx, kb.binary("add", y,
                                                                    kb.binary("mul", ny, z))))
    where = kb.op(AddPtrOp, kb.arg("ids"), linear).result
    kb.op(StoreOp, where, linear)
    ticket = kb.op(AtomicRMWOp, "add", kb.arg("counter"), kb.const(1, i32)).result
    slot = kb.op(AddPtrOp, kb.arg("order"), linear).result
    kb.op(StoreOp, slot, ticket)
    ids, order = np.full(24, -1, np.int32), np.full(24, -1, np.int32)
    counter = np.zeros(1, np.int32)
    run(kb.module, (4, 3, 2), ids, order, counter)
    assert ids.tolist() == list(range(24))
    assert order.tolist() == list(range(24))               # axis 0 fastest, z outermost
    assert counter[0] == 24


def test_device_assert_reports_message_line_and_lane():
    kb = KernelBuilder([("x", ptr(i32))])
    values = kb.load(kb.ptrs(kb.arg("x"), kb.arange(8)))
    positive = kb.compare("gt", values, kb.splat(kb.const(0, i32), (8,)))
    kb.op(AssertOp, positive, "x must be positive")
    run(kb.module, 2, np.arange(1, 9, dtype=np.int32))
    bad = np.arange(1, 9, dtype=np.int32)
    bad[5] = -3
    with pytest.raises(DeviceAssertError) as info:
        run(kb.module, 2, bad)
    text = str(info.value)
    assert "x must be positive" in text and "first failing lane (5,)" in text
    assert "device_assert failed in program (0, 0, 0)" in text
    line = next(op for op in kb.fn.body.ops if isinstance(op, AssertOp)).loc.line
    assert f"{THIS_FILE}:{line}" in text


def test_scalar_arguments_take_the_parameter_types():
    kb = KernelBuilder([("out", ptr(f64)), ("a", f32), ("b", i1), ("c", u64), ("d", i64),
                        ("e", u8)])
    parts = [kb.cast(kb.arg("a"), f64), kb.cast(kb.arg("b"), f64), kb.cast(kb.arg("c"), f64),
             kb.cast(kb.arg("d"), f64), kb.cast(kb.arg("e"), f64)]
    for k, part in enumerate(parts):
        where = kb.op(AddPtrOp, kb.arg("out"), kb.const(k, i32)).result
        kb.op(StoreOp, where, part)
    out = np.zeros(5)
    run(kb.module, 1, out, 0.1, True, 2**64 - 1, -5, 300)
    assert out.tolist() == [float(np.float32(0.1)), 1.0, float(2**64 - 1), -5.0, 300 % 256]


def test_argument_count_and_kind_are_checked():
    kb = KernelBuilder([("x", ptr(f32)), ("n", i32)])
    executor = BACKEND.load(kb.module, DEVICE)
    with pytest.raises(LaunchError, match="takes 2 runtime argument"):
        BACKEND.launch(executor, (1, 1, 1), [KernelArg(i32, 1)], DEVICE)
    with pytest.raises(LaunchError, match="'x' is a pointer"):
        BACKEND.launch(executor, (1, 1, 1), [KernelArg(ptr(f32), 1.5), KernelArg(i32, 1)],
                       DEVICE)


def test_hint_and_barrier_change_nothing():
    kb = KernelBuilder([("out", ptr(i32))])
    offs = kb.op(HintOp, kb.arange(16), (16,), (16,)).result
    kb.op(BarrierOp)
    kb.store(kb.ptrs(kb.arg("out"), offs), offs)
    out = np.full(16, -1, np.int32)
    run(kb.module, 1, out)
    assert out.tolist() == list(range(16))


def test_numpy_failure_inside_an_op_becomes_a_launch_error():
    kb = KernelBuilder([("out", ptr(i32))])
    kb.op(ReshapeOp, kb.arange(16), result_types=[TileType((3, 5), i32)])
    with pytest.raises(LaunchError) as info:
        run(kb.module, 1, np.zeros(1, np.int32))
    text = str(info.value)
    assert "failed running 'reshape'" in text and THIS_FILE in text
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_loads_through_a_compiled_kernel_object():
    from anytile.backend import CompileOptions, CompiledKernel
    kb = KernelBuilder([("out", ptr(i32))])
    kb.store(kb.ptrs(kb.arg("out"), kb.arange(4)), kb.arange(4))
    kernel = CompiledKernel("kernel", BACKEND.target_of(DEVICE), CompileOptions(),
                            [("out", ptr(i32))], {}, {}, {}, kb.module)
    out = np.full(4, -1, np.int32)
    imported = BACKEND.import_array(out, DEVICE)
    BACKEND.launch(BACKEND.load(kernel, DEVICE), (1, 1, 1),
                   [KernelArg(ptr(i32), PointerArg(imported.buffer))], DEVICE)
    assert out.tolist() == [0, 1, 2, 3]
