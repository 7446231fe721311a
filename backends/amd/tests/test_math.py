"""The AMD math library (``anytile_amd.math``) run on the host: every function in f32 and f64
against long-double NumPy references, within the conformance suite's ULP table, over the
suite's domains and beyond (huge sin/cos arguments, results near overflow and subnormal),
and IEEE special values exactly.  f32 functions compute in f32 only."""
import ctypes
import math

import numpy as np
import pytest
from llvmlite import ir

from anytile_amd.math import MATH_KINDS, MathLibrary
from anytile_conformance.tolerances import MATH_ULPS

_ENGINES = []


def _compiled(kind, dtype):
    """A host function ``run(x) -> kind(x)`` over a NumPy array, built from the library."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    t = ir.FloatType() if dtype == np.float32 else ir.DoubleType()
    i64 = ir.IntType(64)
    module = ir.Module("math")
    module.triple = llvm.get_process_triple()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType(), ir.PointerType(), i64]), "run")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    src, dst, n = fn.args
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    x = b.load(b.gep(src, [i], source_etype=t), typ=t)
    b.store(MathLibrary().emit(b, kind, x), b.gep(dst, [i], source_etype=t))
    step = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(step, loop)
    b.cbranch(b.icmp_signed("<", step, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
    engine = llvm.create_mcjit_compiler(parsed, tm)
    engine.finalize_object()
    _ENGINES.append(engine)
    raw = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("run"))

    def run(values):
        x = np.ascontiguousarray(values, dtype)
        y = np.full_like(x, np.nan)
        raw(x.ctypes.data, y.ctypes.data, x.size)
        return y
    return run, str(module)


_LONG = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin,
         "cos": np.cos, "tanh": np.tanh}


def _reference(kind, x):
    if kind == "erf":
        return np.array([math.erf(float(v)) for v in x], np.longdouble)
    return _LONG[kind](x.astype(np.longdouble))


def _ulps(got, exact, dtype):
    """|got - exact| in units of ``dtype``'s last place at ``exact`` (OpenCL's definition)."""
    info = np.finfo(dtype)
    mag = np.maximum(np.abs(exact), np.longdouble(info.tiny))
    unit = np.exp2(np.floor(np.log2(mag)) - info.nmant)
    return np.abs(got.astype(np.longdouble) - exact) / unit


#: (low, high) sample ranges per function: the conformance domains and wider
_DOMAINS = {
    "exp": {np.float32: [(-80, 80), (-103, 88.7)], np.float64: [(-700, 700), (-745, 709.7)]},
    "exp2": {np.float32: [(-120, 120), (-149, 127.9)], np.float64: [(-1000, 1000), (-1074, 1023.9)]},
    "sin": {np.float32: [(-100, 100), (-1e5, 1e5), (-3e38, 3e38)],
            np.float64: [(-100, 100), (-2e6, 2e6), (-1e300, 1e300)]},
    "tanh": {np.float32: [(-9, 9), (-0.7, 0.7), (-20, 20)], np.float64: [(-9, 9), (-0.7, 0.7), (-40, 40)]},
    "erf": {np.float32: [(-4, 4), (-1, 1), (-7, 7)], np.float64: [(-4, 4), (-1, 1), (-7, 7)]},
}
_DOMAINS["cos"] = _DOMAINS["sin"]


def _samples(kind, dtype, rng, n=20000):
    if kind in ("log", "log2"):
        tiny = np.finfo(dtype).smallest_subnormal
        parts = [np.exp(rng.uniform(np.log(1e-30 if dtype == np.float32 else 1e-300),
                                    np.log(1e30 if dtype == np.float32 else 1e300), n)),
                 rng.uniform(0.5, 2.0, n), np.array([tiny, 7 * tiny, np.finfo(dtype).tiny, 8.0])]
    else:
        parts = [rng.uniform(lo, hi, n) for lo, hi in _DOMAINS[kind][dtype]]
    x = np.concatenate(parts).astype(dtype)
    return x[x != 0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("kind", MATH_KINDS)
def test_within_the_ulp_table(kind, dtype, rng):
    run, text = _compiled(kind, dtype)
    x = _samples(kind, dtype, rng)
    if kind in ("sin", "cos"):   # inputs where the reduction is hardest for each format
        hard = [16367173 * 2.0 ** 72, 8192.0, 3.1415927] if dtype == np.float32 else \
            [6381956970095103 * 2.0 ** 797, 1e22, 5.319372648326541e+255, 1048576.1]
        x = np.concatenate([x, np.array(hard, dtype)])
    got = run(x)
    err = _ulps(got, _reference(kind, x), dtype)
    bound = MATH_ULPS[kind]["f32" if dtype == np.float32 else "f64"]
    worst = int(np.argmax(err))
    assert err[worst] <= bound, f"{kind}({x[worst]!r}) = {got[worst]!r}: {err[worst]:.2f} ulp"
    if dtype == np.float32:
        assert "double" not in text     # f32 in f32: no detour through f64


_SPECIAL = {   # (input, result) pairs: -0.0 and 0.0 are different inputs here
    "exp": [(-np.inf, 0.0), (np.inf, np.inf), (0.0, 1.0), (-1000.0, 0.0), (1000.0, np.inf)],
    "exp2": [(-np.inf, 0.0), (np.inf, np.inf), (0.0, 1.0), (3.0, 8.0), (-1.0, 0.5)],
    "log": [(0.0, -np.inf), (-0.0, -np.inf), (np.inf, np.inf), (-1.0, np.nan), (1.0, 0.0),
            (-np.inf, np.nan)],
    "log2": [(0.0, -np.inf), (np.inf, np.inf), (-1.0, np.nan), (1.0, 0.0), (8.0, 3.0), (0.25, -2.0)],
    "sin": [(np.inf, np.nan), (-np.inf, np.nan), (0.0, 0.0), (-0.0, -0.0)],
    "cos": [(np.inf, np.nan), (0.0, 1.0), (-0.0, 1.0)],
    "tanh": [(np.inf, 1.0), (-np.inf, -1.0), (0.0, 0.0), (-0.0, -0.0), (50.0, 1.0)],
    "erf": [(np.inf, 1.0), (-np.inf, -1.0), (0.0, 0.0), (-0.0, -0.0), (10.0, 1.0)],
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("kind", MATH_KINDS)
def test_special_values_exactly(kind, dtype):
    run, _ = _compiled(kind, dtype)
    cases = _SPECIAL[kind] + [(np.nan, np.nan)]
    x = np.array([c[0] for c in cases], dtype)
    got, want = run(x), np.array([c[1] for c in cases], dtype)
    assert np.array_equal(got, want, equal_nan=True), (x, got)
    numbers = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers])), (x, got)


def test_unknown_functions_and_types_are_left_to_the_caller():
    module = ir.Module("m")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.HalfType()]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    assert MathLibrary().emit(b, "exp", fn.args[0]) is None
    assert MathLibrary().emit(b, "lgamma", b.fpext(fn.args[0], ir.FloatType())) is None
