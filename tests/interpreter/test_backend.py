"""The interpreter as a plugin: identity, options, discovery; constants and scalar ops."""
from __future__ import annotations

import math

import numpy as np
import pytest

from anytile.backend import CAPABILITIES, CompileOptions, Target
from anytile.interpreter import InterpreterBackend
from anytile.ir import AddPtrOp, ExpandDimsOp, StoreOp, UMulHiOp
from anytile.ir.types import bf16, f32, f64, i16, i32, u8, u32
from interp_kit import BACKEND, DEVICE, KernelBuilder, ptr, rng, run, run_elementwise


def test_identity_and_capabilities():
    backend = InterpreterBackend()
    assert backend.name == "interpreter" and backend.device_prefix == "interpreter"
    assert backend.availability().usable
    [device] = backend.devices()
    assert device.name == "interpreter:0" and device.description == "NumPy reference interpreter"
    assert backend.capabilities == frozenset(CAPABILITIES)
    assert backend.host_memory
    assert backend.targets() == ["reference"]
    assert backend.target_of(device) == Target("interpreter", "reference")
    assert backend.stages(Target("interpreter", "reference"), CompileOptions()) == []


def test_options_are_the_base_ones():
    assert BACKEND.parse_options(num_warps=8, debug=True) == CompileOptions(num_warps=8,
                                                                           debug=True)
    with pytest.raises(TypeError, match="no option"):
        BACKEND.parse_options(fast_math=True)


def test_found_through_the_entry_point():
    from anytile.runtime.discovery import get_backend
    assert isinstance(get_backend("interpreter"), InterpreterBackend)


def test_constants_wrap_and_round_to_their_type():
    kb = KernelBuilder([("out", ptr(f64))])
    values = [kb.cast(kb.const(-1, u32), f64), kb.cast(kb.const(300, u8), f64),
              kb.cast(kb.const(1 + 2.0 ** -8 + 2.0 ** -40, bf16), f64),
              kb.cast(kb.const(40000, i16), f64)]
    for k, v in enumerate(values):
        kb.op(StoreOp, kb.op(AddPtrOp, kb.arg("out"),
                             kb.const(k, i32)).result, v)
    out = np.zeros(4)
    run(kb.module, 1, out)
    assert out.tolist() == [2.0**32 - 1, 44.0, 1 + 2.0 ** -7, 40000.0 - 65536]


def test_scalar_expand_dims_makes_a_one_element_tile():
    kb = KernelBuilder([("out", ptr(i32))])
    tile = kb.op(ExpandDimsOp, kb.pid(0), 0).result
    kb.store(kb.ptrs(kb.arg("out"), kb.binary("add", kb.arange(1), tile)), tile)
    out = np.full(3, -1, np.int32)
    run(kb.module, 3, out)
    assert out.tolist() == [0, 1, 2]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_umulhi_narrow_types(dtype):
    info = np.iinfo(dtype)
    a = rng(1).integers(info.min, info.max, 64, endpoint=True).astype(dtype)
    b = rng(2).integers(info.min, info.max, 64, endpoint=True).astype(dtype)
    out = run_elementwise(lambda kb, x, y: kb.op(UMulHiOp, x, y).result, [a, b], dtype)
    bits = info.bits
    expected = (a.astype(np.int64) * b.astype(np.int64)) >> bits
    assert np.array_equal(out, expected.astype(dtype))


def test_f64_math_uses_double_precision():
    a = rng(3).random(64) * 3 + 0.1
    out = run_elementwise(lambda kb, x: kb.unary("erf", x), [a], np.float64)
    assert out.tolist() == [math.erf(v) for v in a]
    out = run_elementwise(lambda kb, x: kb.unary("log", x), [a], np.float64)
    assert np.array_equal(out, np.log(a))


def test_many_small_programs_run():
    # the conformance suite launches grids of thousands of short programs
    kb = KernelBuilder([("x", ptr(i32)), ("out", ptr(i32))])
    base = kb.binary("mul", kb.pid(0), kb.const(16, i32))
    offs = kb.binary("add", kb.splat(base, (16,)), kb.arange(16))
    value = kb.load(kb.ptrs(kb.arg("x"), offs))
    for _ in range(20):
        value = kb.binary("add", value, kb.splat(kb.const(1, i32), (16,)))
    kb.store(kb.ptrs(kb.arg("out"), offs), value)
    x = rng(4).integers(-100, 100, 2048 * 16).astype(np.int32)
    out = np.zeros_like(x)
    run(kb.module, 2048, x, out)
    assert np.array_equal(out, x + 20)
    assert DEVICE.name == "interpreter:0"


def test_overflowing_constants_and_arguments_become_infinity_quietly():
    kb = KernelBuilder([("out", ptr(f64)), ("a", f32)])
    big = kb.cast(kb.const(1e300, f32), f64)
    kb.op(StoreOp, kb.arg("out"), kb.binary("add", big, kb.cast(kb.arg("a"), f64)))
    out = np.zeros(1)
    run(kb.module, 1, out, -1e300)           # -inf + inf
    assert np.isnan(out[0])
