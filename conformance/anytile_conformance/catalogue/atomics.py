"""Atomics under contention: many programs (and many lanes of one tile) updating the same
few addresses.  Integer results are exact whatever the order; float sums are bounded by the
accumulation rule; the old values returned must be a consistent serialisation."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from .. import tolerances
from ..case import CaseFailure, family
from ..numerics import FLOAT_DTYPES, as_pyint, capabilities_for, wrap_int
from ..tolerances import EXACT
from .common import wide


def _atomic_needs(params: dict) -> set[str]:
    dtype = params["dtype"]
    needs = capabilities_for(dtype)
    if dtype in ("i64", "u64"):
        needs.add("int64_atomics")
    if dtype in FLOAT_DTYPES:
        needs.add("float_atomics")
    return needs


@at.jit
def atomic_rmw_kernel(x_ptr, target_ptr, old_ptr, slots, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    where = target_ptr + offs % slots
    if OP == "add":
        old = tl.atomic_add(where, x)
    elif OP == "max":
        old = tl.atomic_max(where, x)
    elif OP == "min":
        old = tl.atomic_min(where, x)
    elif OP == "and":
        old = tl.atomic_and(where, x)
    elif OP == "or":
        old = tl.atomic_or(where, x)
    else:
        old = tl.atomic_xor(where, x)
    tl.store(old_ptr + offs, old)


_INT_REDUCE = {"add": lambda a, b: a + b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
               "xor": lambda a, b: a ^ b, "max": max, "min": min}


@family("atomics",
        quick=dict(op=["add", "max", "min", "xor"], dtype=["i32"], programs=[8]),
        full=dict(op=["add", "max", "min", "and", "or", "xor"],
                  dtype=["i32", "u32", "i64", "u64", "f32", "f64", "f16"], programs=[8, 64]),
        needs=_atomic_needs,
        where=lambda op, dtype, programs: dtype not in FLOAT_DTYPES or op in ("add", "max", "min"))
def atomic_rmw(ctx, op, dtype, programs):
    """Every lane of every program updates one of a few slots; each slot ends as the
    reduction of everything sent to it, and the old values returned per slot are distinct
    prefixes of that reduction."""
    block, slots = 16, 4
    n = programs * block
    x = ctx.random((n,), dtype, -1000, 1000) if dtype in FLOAT_DTYPES or dtype.startswith("i") \
        else ctx.random((n,), dtype)
    init = ctx.random((slots,), dtype, -1000, 1000) if dtype not in ("u32", "u64") else ctx.random((slots,), dtype)
    target = ctx.input(init)
    old = ctx.output((n,), dtype)
    ctx.launch(atomic_rmw_kernel, (programs,), ctx.input(x), target, old, slots, OP=op, BLOCK=block)
    slot_of = np.arange(n) % slots
    if dtype in FLOAT_DTYPES:
        if op == "add":
            exact = np.array([wide(init, dtype)[s] + wide(x, dtype)[slot_of == s].sum() for s in range(slots)])
            magnitude = np.array([abs(wide(init, dtype)[s]) + np.abs(wide(x, dtype)[slot_of == s]).sum()
                                  for s in range(slots)])
            ctx.check("slots", target, exact, dtype, tolerances.accumulation(n // slots + 1, dtype),
                      magnitude)
        else:
            pick = np.maximum if op == "max" else np.minimum
            exact = np.array([pick.reduce(np.append(x[slot_of == s], init[s]).astype(np.float64))
                              for s in range(slots)])
            ctx.check("slots", target, exact, dtype, EXACT)
        return
    combine = _INT_REDUCE[op]
    finals = []
    for s in range(slots):
        acc = int(init[s])
        for v in as_pyint(x[slot_of == s]):
            acc = combine(acc, v)
        finals.append(acc)
    ctx.check("slots", target, wrap_int(finals, dtype), dtype, EXACT)
    if op == "add":
        _check_add_serialisation(ctx, old.numpy(), x, init, slot_of, dtype, wrap_int(finals, dtype))


@family("atomics", quick=dict(dtype=["f32"]), full=dict(dtype=["f32", "f64", "f16"]),
        needs=_atomic_needs)
def atomic_max_min_signed_zeros(ctx, dtype):
    """``tl.atomic_max``/``tl.atomic_min`` order -0 below +0 and take the other operand of a
    NaN, as ``tl.maximum``/``tl.minimum`` do: max(-0, +0) = +0, min(-0, +0) = -0, whichever
    of the two is in memory; the old value returned is the one that was there."""
    block = 64
    init = ctx.random((block,), dtype, -4.0, 4.0)
    x = ctx.random((block,), dtype, -4.0, 4.0)
    pairs = [(-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (0.0, 0.0), (-1.0, -0.0), (-0.0, -1.0),
             (1.0, -0.0), (-0.0, 1.0), (np.nan, -0.0), (-0.0, np.nan), (np.nan, 0.0), (0.0, np.nan)]
    where = ctx.rng.permutation(block)[:2 * len(pairs)]
    for k, i in enumerate(where):
        init[i], x[i] = pairs[k % len(pairs)]
    a, b = wide(init, dtype), wide(x, dtype)
    for op in ("max", "min"):
        pick, sign = (np.fmax, np.logical_and) if op == "max" else (np.fmin, np.logical_or)
        tie = np.where(sign(np.signbit(a), np.signbit(b)), -0.0, 0.0)
        expected = np.where((a == 0) & (b == 0), tie, pick(a, b))
        target, old = ctx.input(init), ctx.output((block,), dtype)
        ctx.launch(atomic_rmw_kernel, (1,), ctx.input(x), target, old, block, OP=op, BLOCK=block)
        for label, got, want in ((f"atomic_{op} of signed zeros", target, expected),
                                 (f"old values of atomic_{op}", old, a)):
            ctx.check(label, got, want, dtype, EXACT)
            host = wide(got.numpy(), dtype)
            wrong = (host == 0) & (np.signbit(host) != np.signbit(want))
            if wrong.any():
                i = int(np.flatnonzero(wrong)[0])
                raise CaseFailure(f"{label}: {int(wrong.sum())} zero(s) of the wrong sign, first "
                                  f"at {i}: got {host[i]}, expected {want[i]} (memory held "
                                  f"{a[i]}, the operand was {b[i]})\n    (case seed {ctx.seed})")


def _check_add_serialisation(ctx, old: np.ndarray, x: np.ndarray, init: np.ndarray,
                             slot_of: np.ndarray, dtype: str, final: np.ndarray) -> None:
    """For integer add, a serial history ``init = v0 -> v1 -> ... -> vn = final`` has each
    update see some ``v_k`` and make ``v_k+1``; so the multiset of old values plus the final
    value equals the multiset of (old + update) plus the initial value."""
    for s in range(len(init)):
        olds, adds = as_pyint(old[slot_of == s]), as_pyint(x[slot_of == s])
        seen = sorted(wrap_int(list(olds) + [int(final[s])], dtype).tolist())
        made = sorted(wrap_int(list(olds + adds) + [int(init[s])], dtype).tolist())
        if seen != made:
            raise CaseFailure(f"slot {s}: the old values atomic_add returned fit no serial order "
                              f"of the updates\n    (case seed {ctx.seed})")


@at.jit
def counter_kernel(counter_ptr, tickets_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    ticket = tl.atomic_add(counter_ptr, 1)
    tl.store(tickets_ptr + pid, ticket)
    lanes = tl.arange(0, BLOCK)
    tl.atomic_add(counter_ptr + 1 + lanes % 2, lanes, mask=lanes < BLOCK - 1)


@family("atomics", quick=dict(programs=[20]), full=dict(programs=[1, 20, 300]))
def scalar_counter(ctx, programs):
    """A scalar ticket counter: the tickets handed out are exactly 0..programs-1; masked-off
    lanes of a tile atomic do nothing."""
    block = 8
    counter = ctx.input(np.zeros(3, dtype=np.int32))
    tickets = ctx.output((programs,), "i32")
    ctx.launch(counter_kernel, (programs,), counter, tickets, BLOCK=block)
    got = np.sort(tickets.numpy())
    ctx.check("sorted tickets", got, np.arange(programs), "i32", EXACT)
    lanes = np.arange(block - 1)
    expected = [programs, programs * lanes[lanes % 2 == 0].sum(), programs * lanes[lanes % 2 == 1].sum()]
    ctx.check("counters", counter, np.array(expected), "i32", EXACT)


@at.jit
def cas_kernel(slot_ptr, won_ptr, xchg_ptr):
    pid = tl.program_id(0)
    old = tl.atomic_cas(slot_ptr, 0, pid + 1)
    tl.store(won_ptr + pid, (old == 0).to(tl.int32))
    prev = tl.atomic_xchg(xchg_ptr, pid + 1)
    tl.store(won_ptr + tl.num_programs(0) + pid, prev)


@family("atomics", quick=dict(programs=[16]), full=dict(programs=[2, 16, 200]))
def cas_and_xchg(ctx, programs):
    """Exactly one program wins a compare-and-swap on a zero slot, and the slot holds the
    winner's id; exchanges hand each previous value to exactly one program."""
    slot = ctx.input(np.zeros(1, dtype=np.int32))
    xchg = ctx.input(np.zeros(1, dtype=np.int32))
    won = ctx.output((2 * programs,), "i32")
    ctx.launch(cas_kernel, (programs,), slot, won, xchg)
    result = won.numpy()
    wins, prevs = result[:programs], result[programs:]
    ctx.check("number of CAS winners", np.array([wins.sum()]), np.array([1]), "i32", EXACT)
    ctx.check("CAS slot", slot, np.array([int(np.argmax(wins)) + 1]), "i32", EXACT)
    seen = np.sort(np.append(prevs, xchg.numpy()))
    ctx.check("values passed through xchg", seen, np.arange(programs + 1), "i32", EXACT)
