"""Atomics on the cpu backend: contention between programs running on several threads,
every kind and element type, masked lanes that must not touch memory, returned old values."""
import numpy as np
import pytest

from anytile.ir import AtomicCASOp, AtomicRMWOp
from anytile.ir.types import scalar_type, i32

from cpu_kit import KernelBuilder, poisoned, ptr, run_cpu, run_interpreter

B = 64
SLOTS = 8


def _contended_module(kind, elem):
    """Program p adds x[p*B + i] into acc[i % SLOTS] (masked by n); returns nothing."""
    kb = KernelBuilder([("x", ptr(elem)), ("acc", ptr(elem)), ("n", i32)])
    base = kb.binary("mul", kb.pid(0), kb.const(B, i32))
    offs = kb.binary("add", kb.splat(base, (B,)), kb.arange(B))
    mask = kb.compare("lt", offs, kb.splat(kb.arg("n"), (B,)))
    x = kb.load(kb.ptrs(kb.arg("x"), offs), mask)
    slot = kb.binary("rem", kb.arange(B), kb.splat(kb.const(SLOTS, i32), (B,)))
    kb.op(AtomicRMWOp, kind, kb.ptrs(kb.arg("acc"), slot), x, mask)
    return kb.module


@pytest.mark.parametrize("name", ["i32", "i64", "u32", "f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("kind", ["add", "max", "min"])
def test_contended_rmw(rng, name, kind):
    elem = scalar_type(name)
    n = 64 * B - 5
    if elem.is_float:
        spread = 1 if name == "bf16" else 8                  # every partial sum stays exact
        x = rng.integers(-spread, spread + 1, n).astype(elem.np)
    else:
        x = rng.integers(-1000 if elem.is_signed else 0, 1000, n).astype(elem.np)
    start = (x[:SLOTS] * 0 + (3 if kind != "max" else -3 if elem.is_signed or elem.is_float else 0)).astype(elem.np)
    acc = np.concatenate([start, poisoned(4, elem.np)])
    run_cpu(_contended_module(kind, elem), 64, x, acc, n)
    padded = np.concatenate([x.astype(np.float64), np.full(5, np.nan)]).reshape(-1, SLOTS)
    if kind == "add":
        want = np.nansum(padded, axis=0) + start.astype(np.float64)
    elif kind == "max":
        want = np.maximum(np.nanmax(padded, axis=0), start.astype(np.float64))
    else:
        want = np.minimum(np.nanmin(padded, axis=0), start.astype(np.float64))
    np.testing.assert_array_equal(acc[:SLOTS].astype(np.float64), want)
    assert np.all(acc[SLOTS:].view(np.uint8) == poisoned(4, elem.np).view(np.uint8))


@pytest.mark.parametrize("kind", ["and", "or", "xor", "xchg"])
def test_bitwise_and_exchange_return_old_values(rng, kind):
    kb = KernelBuilder([("v", ptr(scalar_type("i32"))), ("mem", ptr(scalar_type("i32"))),
                        ("old", ptr(scalar_type("i32")))])
    offs = kb.arange(B)
    v = kb.load(kb.ptrs(kb.arg("v"), offs))
    old = kb.v(AtomicRMWOp, kind, kb.ptrs(kb.arg("mem"), offs), v, None)
    kb.store(kb.ptrs(kb.arg("old"), offs), old)
    v_np = rng.integers(0, 1 << 30, B).astype(np.int32)
    mem = rng.integers(0, 1 << 30, B).astype(np.int32)
    before = mem.copy()
    old_np = poisoned(B, np.int32)
    run_cpu(kb.module, 1, v_np, mem, old_np)
    np.testing.assert_array_equal(old_np, before)
    want = {"and": before & v_np, "or": before | v_np, "xor": before ^ v_np, "xchg": v_np}[kind]
    np.testing.assert_array_equal(mem, want)


@pytest.mark.parametrize("name", ["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_float_max_min_atomics_order_signed_zeros(rng, name, kind):
    """-0 < +0 in atomic max/min as in ``tl.maximum``: +0 wins a max, -0 a min, in memory
    holding either zero and for either value; the old values come back; as the interpreter."""
    elem = scalar_type(name)
    kb = KernelBuilder([("v", ptr(elem)), ("mem", ptr(elem)), ("old", ptr(elem))])
    offs = kb.arange(B)
    v = kb.load(kb.ptrs(kb.arg("v"), offs))
    old = kb.v(AtomicRMWOp, kind, kb.ptrs(kb.arg("mem"), offs), v, None)
    kb.store(kb.ptrs(kb.arg("old"), offs), old)
    zeros = np.array([0.0, -0.0], np.float64)
    v_np = rng.choice(zeros, B).astype(elem.np)
    mem = rng.choice(zeros, B).astype(elem.np)
    before = mem.copy()
    bits = np.dtype(f"u{np.dtype(elem.np).itemsize}")
    tie = np.bitwise_and if kind == "max" else np.bitwise_or
    want = tie(before.view(bits), v_np.view(bits))
    results = {}
    for where, run in (("cpu", run_cpu), ("interpreter", run_interpreter)):
        m, o = before.copy(), poisoned(B, elem.np)
        run(kb.module, 1, v_np, m, o)
        np.testing.assert_array_equal(o.view(bits), before.view(bits))
        results[where] = m.view(bits)
    np.testing.assert_array_equal(results["cpu"], want)
    np.testing.assert_array_equal(results["interpreter"], want)


def test_compare_and_swap_claims_each_slot_once():
    """Every program tries to claim every slot (0 -> pid + 1); each slot is claimed exactly
    once and the old values tell each program whether it won."""
    kb = KernelBuilder([("slots", ptr(i32)), ("wins", ptr(i32))])
    offs = kb.arange(B)
    me = kb.splat(kb.binary("add", kb.pid(0), kb.const(1, i32)), (B,))
    zero = kb.splat(kb.const(0, i32), (B,))
    old = kb.v(AtomicCASOp, kb.ptrs(kb.arg("slots"), offs), zero, me)
    won = kb.cast(kb.compare("eq", old, zero), i32)
    kb.op(AtomicRMWOp, "add", kb.ptrs(kb.arg("wins"), offs), won, None)
    slots = np.zeros(B, np.int32)
    wins = np.zeros(B, np.int32)
    run_cpu(kb.module, 50, slots, wins)
    assert (wins == 1).all()
    assert ((slots >= 1) & (slots <= 50)).all()
