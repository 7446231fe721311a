"""Structured control flow with loop-carried tiles, device asserts, barriers and the error
for calls that were not inlined."""
import numpy as np
import pytest

from anytile.errors import CompilationError, DeviceAssertError, LaunchError
from anytile.ir import (AssertOp, BarrierOp, Block, Builder, CallOp, ConditionOp, ForOp, Function,
                        IfOp, ReturnOp, WhileOp)
from anytile.ir.types import TileType, f32, i32
from anytile.ir.verifier import IRVerificationError

from cpu_kit import KernelBuilder, poisoned, ptr, run_both, run_cpu

B = 64


def test_for_loop_carries_tiles_and_swaps_them(rng):
    """(a, b) <- (b, a + b) for k in range(lo, hi): a parallel assignment of two tiles."""
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(f32)), ("lo", i32), ("hi", i32)])
    offs = kb.arange(B)
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    one = kb.splat(kb.const(1.0, f32), (B,))

    def body(k, a, b, count):
        return [b, kb.binary("add", a, b), kb.binary("add", count, kb.const(1, i32))]
    a, b, count = kb.for_(kb.arg("lo"), kb.arg("hi"), kb.const(1, i32), [x, one, kb.const(0, i32)], body)
    kb.store(kb.ptrs(kb.arg("out"), offs), kb.binary("add", a, b))
    kb.store(kb.ptrs(kb.arg("out"), kb.binary("add", offs, kb.splat(kb.const(B, i32), (B,)))),
             kb.splat(kb.cast(count, f32), (B,)))
    x_np = rng.standard_normal(B).astype(np.float32)
    for lo, hi in [(0, 7), (3, 3), (5, 2)]:   # zero-trip loops keep the initial values
        out = poisoned(2 * B, np.float32)
        mine, ref = run_both(kb.module, 1, x_np, out, lo, hi)
        np.testing.assert_array_equal(mine[1], ref[1])
        a_np, b_np = x_np.astype(np.float64), np.ones(B)
        for _ in range(max(0, hi - lo)):
            a_np, b_np = b_np, a_np + b_np
        np.testing.assert_allclose(mine[1][:B], a_np + b_np, rtol=1e-6)
        assert (mine[1][B:] == max(0, hi - lo)).all()


def test_if_yields_tiles(rng):
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(f32))])
    offs = kb.arange(B)
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    odd = kb.compare("eq", kb.binary("and", kb.pid(0), kb.const(1, i32)), kb.const(1, i32))
    then_body = kb.region([], lambda: [kb.binary("mul", x, x), kb.const(1, i32)])
    else_body = kb.region([], lambda: [kb.unary("neg", x), kb.const(2, i32)])
    t, tag = kb.op(IfOp, odd, then_body, else_body,
                   result_types=[TileType((B,), f32), i32]).results
    row = kb.binary("mul", kb.pid(0), kb.const(B, i32))
    where = kb.binary("add", kb.splat(row, (B,)), offs)
    kb.store(kb.ptrs(kb.arg("out"), where), kb.binary("add", t, kb.splat(kb.cast(tag, f32), (B,))))
    x_np = rng.standard_normal(B).astype(np.float32)
    out = poisoned(4 * B, np.float32)
    run_cpu(kb.module, 4, x_np, out)
    for p in range(4):
        want = x_np * x_np + 1 if p % 2 else -x_np + 2
        np.testing.assert_array_equal(out[p * B:(p + 1) * B], want)


def test_while_loop_with_tile_and_scalar(rng):
    """while i < n: t = t * 2 - 1; i += 1"""
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(f32)), ("n", i32)])
    offs = kb.arange(B)
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    tile_t = TileType((B,), f32)
    before = Block.with_args([i32, tile_t])
    with kb.b.at_end_of(before):
        i, t = before.args
        kb.op(ConditionOp, kb.compare("lt", i, kb.arg("n")), [i, t])
    after = kb.region([i32, tile_t], lambda i, t: [
        kb.binary("add", i, kb.const(1, i32)),
        kb.binary("sub", kb.binary("mul", t, kb.splat(kb.const(2.0, f32), (B,))),
                  kb.splat(kb.const(1.0, f32), (B,)))])
    _, t = kb.op(WhileOp, [kb.const(0, i32), x], before, after).results
    kb.store(kb.ptrs(kb.arg("out"), offs), t)
    x_np = rng.standard_normal(B).astype(np.float32)
    for n in (0, 5):
        out = poisoned(B, np.float32)
        run_cpu(kb.module, 1, x_np, out, n)
        want = x_np.astype(np.float64)
        for _ in range(n):
            want = want * 2 - 1
        np.testing.assert_allclose(out, want, rtol=1e-6)


def test_device_assert_reports_message_and_location(rng):
    kb = KernelBuilder([("x", ptr(f32)), ("out", ptr(f32))])
    offs = kb.arange(B)
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    kb.op(BarrierOp)
    kb.op(AssertOp, kb.compare("lt", x, kb.splat(kb.const(100.0, f32), (B,))), "x must be small")
    kb.store(kb.ptrs(kb.arg("out"), offs), x)
    x_np = rng.uniform(0, 1, B).astype(np.float32)
    out = poisoned(B, np.float32)
    run_cpu(kb.module, 3, x_np, out)
    np.testing.assert_array_equal(out, x_np)
    x_np[17] = 1000.0
    with pytest.raises(DeviceAssertError) as info:
        run_cpu(kb.module, 3, x_np, out)
    assert "x must be small" in str(info.value)
    assert "test_control.py" in str(info.value)


def test_call_left_in_the_module_is_a_clear_compile_error():
    kb = KernelBuilder([("x", ptr(f32))])
    helper = Block.with_args([ptr(f32)], ["p"])
    Builder(helper).create(ReturnOp, [])
    kb.module.add(Function("helper", helper))   # well-formed IR, but the inliner never ran
    kb.op(CallOp, "helper", [kb.arg("x")], result_types=[])
    with pytest.raises(CompilationError) as info:
        run_cpu(kb.module, 1, np.zeros(1, np.float32))
    assert "helper" in str(info.value) and "inline" in str(info.value)


def _counting_loop() -> KernelBuilder:
    """``count = 0; for k in range(lo, hi, step): count += 1`` -> out[0]."""
    kb = KernelBuilder([("out", ptr(i32)), ("lo", i32), ("hi", i32), ("step", i32)])
    count, = kb.for_(kb.arg("lo"), kb.arg("hi"), kb.arg("step"), [kb.const(0, i32)],
                     lambda k, c: [kb.binary("add", c, kb.const(1, i32))])
    kb.store(kb.ptrs(kb.arg("out"), kb.arange(1)), kb.splat(count, (1,)))
    return kb


def test_for_loop_near_the_top_of_i32_ends_as_range_does():
    """``iv + step`` would wrap past INT32_MAX: the loop must stop, not run forever."""
    top = 2**31 - 1
    for lo, hi, step in [(top - 10, top, 4), (top - 5, top, 2**30), (top - 1, top, 1)]:
        out = poisoned(1, np.int32)
        mine, ref = run_both(_counting_loop().module, 1, out, lo, hi, step)
        assert mine[0][0] == ref[0][0] == len(range(lo, hi, step))


def test_for_loop_with_a_runtime_step_that_is_not_positive_is_a_launch_error():
    kb = _counting_loop()
    loop = next(op for op in kb.fn.body.ops if isinstance(op, ForOp))
    for step in (0, -3):
        with pytest.raises(LaunchError) as info:
            run_cpu(kb.module, 2, poisoned(1, np.int32), 0, 10, step)
        assert not isinstance(info.value, DeviceAssertError)
        assert "step must be positive" in str(info.value)
        assert info.value.loc == loop.loc and f"cpu_kit.py:{loop.loc.line}" in str(info.value)


def test_an_op_kind_the_tables_lack_is_a_compile_error_at_its_line(monkeypatch):
    """``fdiv`` on integers is ill-typed (the verifier's business); lowering it anyway names
    the op's location instead of failing inside the code generator."""
    kb = KernelBuilder([("x", ptr(i32))])
    offs = kb.arange(B)
    x = kb.load(kb.ptrs(kb.arg("x"), offs))
    kb.store(kb.ptrs(kb.arg("x"), offs), kb.binary("fdiv", x, x))
    bad = next(op for op in kb.fn.body.ops if getattr(op, "kind", None) == "fdiv")
    monkeypatch.setenv("ANYTILE_VERIFY", "1")
    with pytest.raises(IRVerificationError, match="fdiv needs floats"):
        run_cpu(kb.module, 1, np.ones(B, np.int32))
    monkeypatch.setenv("ANYTILE_VERIFY", "0")
    with pytest.raises(CompilationError) as info:
        run_cpu(kb.module, 1, np.ones(B, np.int32))
    assert "fdiv" in str(info.value) and info.value.loc == bad.loc
