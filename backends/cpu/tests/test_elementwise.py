"""Elementwise ops, dtypes and casts on the cpu backend, checked against the interpreter
(the IR's definition).  Each test compiles one kernel computing many ops at once."""
import ml_dtypes
import numpy as np
import pytest

from anytile.ir import BitcastOp, FmaOp, SelectOp, UMulHiOp
from anytile.ir.types import TileType, from_numpy, scalar_type

from cpu_kit import (KernelBuilder, elementwise_module, multi_output_module, poisoned, ptr,
                     run_both, run_cpu)

N = 50           # not a multiple of the vector width: masked tail
TILE = 64

INT_TYPES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOAT_TYPES = ["f16", "bf16", "f32", "f64"]


def _random(rng, name, n=N, nonzero=False):
    t = scalar_type(name)
    if t.is_float:
        x = (rng.standard_normal(n) * 8).astype(t.np)
    else:
        info = np.iinfo(t.np)
        x = rng.integers(info.min, info.max, n, endpoint=True, dtype=t.np)
    if nonzero:
        x[x == 0] = 3
    return x


def _run_outputs(inputs, outputs):
    """Run one kernel with ``outputs`` [(type, body)]; returns (cpu, interpreter) lists."""
    module = multi_output_module(TILE, [from_numpy(x.dtype) for x in inputs], outputs)
    outs = [poisoned(N, t.np) for t, _ in outputs]
    mine, ref = run_both(module, 1, *inputs, *outs, N)
    k = len(inputs)
    return mine[k:k + len(outs)], ref[k:k + len(outs)]


def _assert_same(mine, ref, labels):
    for m, r, label in zip(mine, ref, labels):
        if m.dtype.kind == "b":
            np.testing.assert_array_equal(m, r, err_msg=label)
        else:
            np.testing.assert_array_equal(m.astype(np.float64) if m.dtype.kind == "f" or
                                          m.dtype.name == "bfloat16" else m,
                                          r.astype(np.float64) if r.dtype.kind == "f" or
                                          r.dtype.name == "bfloat16" else r, err_msg=label)


@pytest.mark.parametrize("name", INT_TYPES)
def test_integer_binary_matches_interpreter(rng, name):
    t = scalar_type(name)
    a = _random(rng, name)
    b = _random(rng, name, nonzero=True)
    d = (b % 97).astype(b.dtype) + np.array(1, b.dtype)   # small divisors: real quotients
    if t.is_signed:
        d[::3] = -d[::3]
    kinds = ["add", "sub", "mul", "and", "or", "xor", "min", "max"]
    outputs = [(t, lambda kb, x, y, z, k=k: kb.binary(k, x, y)) for k in kinds]
    outputs += [(t, lambda kb, x, y, z, k=k: kb.binary(k, x, z)) for k in ("div", "rem")]
    mine, ref = _run_outputs([a, b, d], outputs)
    _assert_same(mine, ref, kinds + ["div", "rem"])


@pytest.mark.parametrize("name", ["i32", "u32", "i64", "u8"])
def test_shifts(rng, name):
    t = scalar_type(name)
    a = _random(rng, name)
    b = rng.integers(0, t.bits, N).astype(a.dtype)
    outputs = [(t, lambda kb, x, y, k=k: kb.binary(k, x, y)) for k in ("shl", "shr")]
    _assert_same(*_run_outputs([a, b], outputs), ["shl", "shr"])


@pytest.mark.parametrize("name", ["i32", "u32", "i64", "i8", "u8"])
def test_shifts_out_of_range_give_the_interpreters_results(rng, name):
    """Amounts < 0 or >= bits are undefined in the IR; the interpreter gives 0 (or the sign
    fill), and so does the cpu backend instead of LLVM poison."""
    t = scalar_type(name)
    a = _random(rng, name)
    lo = -3 * t.bits if t.is_signed else 0
    b = rng.integers(lo, 3 * t.bits if t.bits < 64 else 2**62, N).astype(a.dtype)
    b[:4] = np.array([t.bits, t.bits + 1, 0, t.bits - 1]).astype(a.dtype)
    outputs = [(t, lambda kb, x, y, k=k: kb.binary(k, x, y)) for k in ("shl", "shr")]
    _assert_same(*_run_outputs([a, b], outputs), ["shl", "shr"])
    # scalars take the scalar instructions, which on x86 shift by the amount mod the width
    kb = KernelBuilder([("out", ptr(t)), ("x", t), ("s", t)])
    for k, kind in enumerate(("shl", "shr")):
        value = kb.binary(kind, kb.arg("x"), kb.arg("s"))
        kb.store(kb.ptrs(kb.arg("out"), kb.arange(1, k)), kb.splat(value, (1,)))
    for amount in (t.bits, t.bits + 1, 2 * t.bits + 3) + ((-1,) if t.is_signed else ()):
        x = int(a[0]) | 1 << (t.bits - 1) if not t.is_signed else -abs(int(a[0])) - 1
        mine, ref = run_both(kb.module, 1, poisoned(2, t.np), x, amount)
        np.testing.assert_array_equal(mine[0], ref[0], err_msg=f"{x} by {amount}")


def test_division_by_zero_does_not_trap(rng):
    """Undefined result, but a zero divisor or INT_MIN / -1 must not crash the process."""
    a = _random(rng, "i32")
    b = np.zeros(N, np.int32)
    b[0] = -1
    a[0] = np.iinfo(np.int32).min
    t = scalar_type("i32")
    module = multi_output_module(TILE, [t, t], [(t, lambda kb, x, y, k=k: kb.binary(k, x, y))
                                                for k in ("div", "rem")])
    q, r = poisoned(N, np.int32), poisoned(N, np.int32)
    run_cpu(module, 1, a, b, q, r, N)
    assert q[0] == np.iinfo(np.int32).min and r[0] == 0


@pytest.mark.parametrize("name", FLOAT_TYPES)
def test_float_binary_matches_interpreter(rng, name):
    t = scalar_type(name)
    a = _random(rng, name)
    b = _random(rng, name, nonzero=True)
    a[:4] = np.array([np.nan, 1.0, -0.0, np.inf]).astype(a.dtype)
    b[:4] = np.array([2.0, np.nan, 0.5, 3.0]).astype(a.dtype)
    kinds = ["add", "sub", "mul", "fdiv", "div", "rem", "min", "max"]
    outputs = [(t, lambda kb, x, y, k=k: kb.binary(k, x, y)) for k in kinds]
    _assert_same(*_run_outputs([a, b], outputs), kinds)


@pytest.mark.parametrize("name", FLOAT_TYPES + ["i32", "u16", "i64"])
def test_compare(rng, name):
    a = _random(rng, name)
    b = a.copy()
    b[::2] = _random(rng, name)[::2]
    if scalar_type(name).is_float:
        a[1] = np.nan
    preds = ["eq", "ne", "lt", "le", "gt", "ge"]
    outputs = [(scalar_type("i1"), lambda kb, x, y, p=p: kb.compare(p, x, y)) for p in preds]
    _assert_same(*_run_outputs([a, b], outputs), preds)


CAST_TARGETS = ["i8", "i16", "i32", "i64", "u8", "u32", "u64", "f16", "bf16", "f32", "f64", "i1"]


@pytest.mark.parametrize("src", ["i8", "i32", "i64", "u8", "u32", "u64", "f16", "bf16", "f32",
                                 "f64", "i1"])
def test_cast_matches_interpreter(rng, src):
    s = scalar_type(src)
    if s.is_bool:
        a = rng.integers(0, 2, N).astype(np.bool_)
    else:
        a = _random(rng, src)
    if s.is_float:   # saturation, NaN -> 0, rounding ties, huge values
        with np.errstate(over="ignore"):
            a[:8] = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 2.5, -2.5, 65519.0]).astype(a.dtype)
            a[8:16] = (rng.standard_normal(8) * 1e9).astype(a.dtype)
    targets = [d for d in CAST_TARGETS if d != src]
    outputs = [(scalar_type(d), lambda kb, x, d=d: kb.cast(x, scalar_type(d))) for d in targets]
    _assert_same(*_run_outputs([a], outputs), [f"{src}->{d}" for d in targets])


def test_int_to_bf16_rounds_once():
    """i32 -> bf16 must round the exact integer, not an f32 rounding of it."""
    a = np.array([(1 << 24) + 1 + (1 << 16) * k for k in range(N)], np.int32)
    module = elementwise_module(TILE, [scalar_type("i32")], scalar_type("bf16"),
                                lambda kb, x: kb.cast(x, scalar_type("bf16")), masked_n=True)
    out = poisoned(N, ml_dtypes.bfloat16)
    run_cpu(module, 1, a, out, N)
    m, e = np.frexp(a.astype(np.float64))              # exact: |a| < 2^53
    exact = np.ldexp(np.round(m * 256.0), e - 8)         # 8 significant bits, ties to even
    np.testing.assert_array_equal(out.astype(np.float64), exact)


@pytest.mark.parametrize("src", ["i64", "u64"])
def test_64_bit_int_to_bf16_rounds_once(rng, src):
    """Integers above 2^53 are inexact in f64: going through f64 by nearest can make a bf16
    tie that the exact integer is not (2^62 + 2^54 + 1 must round up to 2^62 + 2^55)."""
    signed = src == "i64"
    top = 62 if signed else 63
    crafted = [(1 << top) + (1 << (top - 8)) + 1, (1 << top) + (1 << (top - 8)) - 1,
               (1 << top) + (3 << (top - 8)) - 1]
    shifts = rng.integers(40, top, N)
    values = [int(rng.integers(1, 1 << 20)) << int(k) | int(rng.integers(1, 1 << 12))
              for k in shifts[len(crafted):]]
    values = crafted + [v % (1 << top) for v in values]
    if signed:
        values = [-v if i % 2 else v for i, v in enumerate(values)]
    a = np.array(values, scalar_type(src).np)
    module = elementwise_module(TILE, [scalar_type(src)], scalar_type("bf16"),
                                lambda kb, x: kb.cast(x, scalar_type("bf16")), masked_n=True)
    mine, ref = run_both(module, 1, a, poisoned(N, ml_dtypes.bfloat16), N)
    exact = [_round_int_to_bits(v, 8) for v in values]
    np.testing.assert_array_equal(mine[1].astype(np.float64), exact)
    np.testing.assert_array_equal(mine[1].view(np.uint16), ref[1].view(np.uint16))


def _round_int_to_bits(v: int, bits: int) -> float:
    """``v`` rounded to ``bits`` significant bits, ties to even, in exact integer arithmetic."""
    drop = max(0, abs(v).bit_length() - bits)
    q, r = divmod(abs(v), 1 << drop)
    half = 1 << drop >> 1
    if drop and (r > half or (r == half and q & 1)):
        q += 1
    return float(q << drop) * (1 if v >= 0 else -1)


def test_bitcasts(rng):
    pairs = [("f32", "i32"), ("f16", "i16"), ("bf16", "u16"), ("f64", "u64")]
    for src, dst in pairs:
        s, d = scalar_type(src), scalar_type(dst)
        a = _random(rng, src)
        module = elementwise_module(
            TILE, [s], d, lambda kb, x: kb.v(BitcastOp, x, result_types=[TileType(x.type.shape, d)]),
            masked_n=True)
        out = poisoned(N, d.np)
        run_cpu(module, 1, a, out, N)
        np.testing.assert_array_equal(out.view(np.uint8), a.view(np.uint8))
        back = elementwise_module(
            TILE, [d], s, lambda kb, x: kb.v(BitcastOp, x, result_types=[TileType(x.type.shape, s)]),
            masked_n=True)
        again = poisoned(N, s.np)
        run_cpu(back, 1, out, again, N)
        np.testing.assert_array_equal(again.view(np.uint8), a.view(np.uint8))


@pytest.mark.parametrize("name", ["f32", "f16", "f64"])
def test_fma_and_select(rng, name):
    t = scalar_type(name)
    a, b, c = (_random(rng, name) for _ in range(3))

    def body(kb, x, y, z):
        return kb.v(SelectOp, kb.compare("gt", x, y), kb.v(FmaOp, x, y, z), z)
    mine, ref = _run_outputs([a, b, c], [(t, body)])
    np.testing.assert_allclose(mine[0].astype(np.float64), ref[0].astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("name, a, b, want", [
    ("f16", 1.75, 439 * 2.0**-9, 1.5 + 2.0**-10),     # a * b = 1.5 + 2^-11, an f16 tie
    ("bf16", 1.25, 77 * 2.0**-6, 1.5 + 2.0**-7)])     # a * b = 1.5 + 2^-8, a bf16 tie
def test_narrow_fma_rounds_once(rng, name, a, b, want):
    """``a * b + 2^-24`` is just above a tie: one rounding goes up, while rounding to float
    first (the tiny addend is half a float ulp there) lands on the tie and then goes to even."""
    t = scalar_type(name)
    a_np, b_np = np.full(N, a, t.np), np.full(N, b, t.np)
    c_np = np.full(N, 2.0**-24, t.np)
    c_np[1::2] = _random(rng, name)[1::2]               # other lanes: the interpreter decides
    mine, ref = _run_outputs([a_np, b_np, c_np], [(t, lambda kb, x, y, z: kb.v(FmaOp, x, y, z))])
    assert (mine[0][::2].astype(np.float64) == want).all()
    np.testing.assert_array_equal(mine[0].view(np.uint16), ref[0].view(np.uint16))


def test_umulhi(rng):
    for name in ("i32", "u32", "i64", "u64"):
        t = scalar_type(name)
        a, b = _random(rng, name), _random(rng, name)
        _assert_same(*_run_outputs([a, b], [(t, lambda kb, x, y: kb.v(UMulHiOp, x, y))]), [name])


@pytest.mark.parametrize("name", FLOAT_TYPES + ["i32", "i8", "u32"])
def test_unary(rng, name):
    t = scalar_type(name)
    a = _random(rng, name)
    kinds = ["neg", "abs"] + (["sqrt", "rsqrt", "floor", "ceil"] if t.is_float else ["not"])
    if t.is_float:
        a[:3] = np.array([-0.0, np.inf, np.nan]).astype(a.dtype)
    outputs = [(t, lambda kb, x, k=k: kb.unary(k, kb.unary("abs", x) if k in ("sqrt", "rsqrt")
                                               else x)) for k in kinds]
    mine, ref = _run_outputs([a], outputs)
    for m, r, k in zip(mine, ref, kinds):
        np.testing.assert_allclose(m.astype(np.float64), r.astype(np.float64),
                                   rtol=2e-7 if t.bits >= 32 else 1e-2, err_msg=k)
