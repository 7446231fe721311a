"""Control flow: ``for`` loops (runtime bounds, zero trips, steps, ``tl.static_range``),
``while`` loops with data-dependent trip counts, nested ``if``/``else`` yielding values, and
early exits from programs that have nothing to do."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from ..case import family
from ..numerics import as_pyint, wrap_int
from ..tolerances import EXACT


@at.jit
def for_loop_kernel(x_ptr, out_ptr, start, stop, step, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for i in range(start, stop, step):
        acc = acc * 3 + x + i
    tl.store(out_ptr + offs, acc)


@family("control-flow",
        quick=dict(bounds=[(0, 5, 1), (2, 2, 1), (1, 20, 3)]),
        full=dict(bounds=[(0, 5, 1), (2, 2, 1), (1, 20, 3), (5, 1, 1), (-4, 9, 2), (0, 100, 7)]))
def for_loop(ctx, bounds):
    """A loop with runtime bounds and step (zero trips when start >= stop) carrying a tile."""
    start, stop, step = bounds
    block = 16
    x = ctx.random((block,), "i32", -1000, 1000)
    out = ctx.output((block,), "i32")
    ctx.launch(for_loop_kernel, (1,), ctx.input(x), out, start, stop, step, BLOCK=block)
    acc = np.zeros(block, dtype=object)
    for i in range(start, stop, step):
        acc = acc * 3 + as_pyint(x) + i
    ctx.check("loop result", out, wrap_int(acc, "i32"), "i32", EXACT)


@at.jit
def static_range_kernel(x_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs)
    for i in tl.static_range(N):
        acc = tl.where(offs % (i + 2) == 0, acc * 2, acc - i)
    tl.store(out_ptr + offs, acc)


@family("control-flow", quick=dict(trips=[3]), full=dict(trips=[0, 1, 3, 8]))
def static_range(ctx, trips):
    """``tl.static_range`` unrolls with a compile-time induction variable."""
    block = 32
    x = ctx.random((block,), "i32", -1000, 1000)
    out = ctx.output((block,), "i32")
    ctx.launch(static_range_kernel, (1,), ctx.input(x), out, N=trips, BLOCK=block)
    acc = x.astype(np.int64)
    offs = np.arange(block)
    for i in range(trips):
        acc = np.where(offs % (i + 2) == 0, acc * 2, acc - i)
    ctx.check("unrolled", out, acc, "i32", EXACT)


@at.jit
def collatz_kernel(x_ptr, steps_ptr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    steps = 0
    while (x != 1) & (steps < 1000):   # bounded, so a miscompiled step cannot hang the suite
        if x % 2 == 0:
            x = x // 2
        else:
            x = 3 * x + 1
        steps += 1
    tl.store(steps_ptr + pid, steps)


@family("control-flow", quick=dict(programs=[6]), full=dict(programs=[1, 6, 40]))
def while_loop(ctx, programs):
    """A ``while`` with a data-dependent trip count and an ``if`` inside (Collatz steps)."""
    x = ctx.random((programs,), "i32", 1, 60)
    out = ctx.output((programs,), "i32")
    ctx.launch(collatz_kernel, (programs,), ctx.input(x), out)
    expected = []
    for v in x.tolist():
        steps = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            steps += 1
        expected.append(steps)
    ctx.check("steps", out, np.array(expected, dtype=np.int32), "i32", EXACT)


@at.jit
def nested_if_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    s = tl.load(x_ptr + pid * BLOCK)
    v = tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK))
    if s > 0:
        if s > 50:
            r = v * 2
        else:
            r = v + 100
    else:
        if s < -50:
            r = v - 7
        else:
            r = -v
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), r)


@family("control-flow", quick=dict(programs=[8]), full=dict(programs=[8, 33]))
def nested_if(ctx, programs):
    """Nested scalar ``if``/``else`` whose branches define the value used after them."""
    block = 16
    x = ctx.random((programs, block), "i32", -100, 100)
    x[:4, 0] = [80, 20, -80, -20]
    out = ctx.output((programs, block), "i32")
    ctx.launch(nested_if_kernel, (programs,), ctx.input(x), out, BLOCK=block)
    s = x[:, :1]
    expected = np.where(s > 0, np.where(s > 50, x * 2, x + 100), np.where(s < -50, x - 7, -x))
    ctx.check("branches", out, expected, "i32", EXACT)


@at.jit
def early_exit_kernel(x_ptr, out_ptr, active, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid >= active:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)


@family("control-flow", quick=dict(active=[3]), full=dict(active=[0, 3, 7]))
def early_exit(ctx, active):
    """Programs past ``active`` return at once: their part of the output stays unwritten."""
    programs, block = 7, 8
    x = ctx.random((programs * block,), "i32", -1000, 1000)
    out = ctx.output((programs * block,), "i32")
    ctx.launch(early_exit_kernel, (programs,), ctx.input(x), out, active, BLOCK=block)
    written = np.arange(programs * block) < active * block
    ctx.check("early exit", out, np.where(written, x + 1, 0), "i32", EXACT, unwritten=~written)


@at.jit
def loop_if_kernel(x_ptr, out_ptr, n_iter, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs).to(tl.float32)
    total = 0.0
    for i in range(n_iter):
        m = tl.max(acc, axis=0)
        if m > 100.0:
            acc = acc * 0.5
        else:
            acc = acc + 3.0
        total += m
    tl.store(out_ptr + offs, acc + total)


@family("control-flow", quick=dict(n_iter=[10]), full=dict(n_iter=[0, 1, 10, 20]))
def loop_with_reduction_and_if(ctx, n_iter):
    """A loop whose ``if`` depends on a reduction of the loop-carried tile (values stay exact
    binary fractions, so any correct order of operations gives the same bits)."""
    block = 16
    x = ctx.random((block,), "i32", -64, 64)
    out = ctx.output((block,), "f32")
    ctx.launch(loop_if_kernel, (1,), ctx.input(x), out, n_iter, BLOCK=block)
    acc, total = x.astype(np.float64), 0.0
    for _ in range(n_iter):
        m = acc.max()
        acc = acc * 0.5 if m > 100.0 else acc + 3.0
        total += m
    ctx.check("loop/if", out, acc + total, "f32", EXACT)


@at.jit
def assert_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.device_assert(x > 0, "x must be positive")
    tl.store(out_ptr + offs, x + 1)


@family("control-flow", quick=dict(violated=[False, True]), needs=["device_assert"])
def device_assert(ctx, violated):
    """``tl.device_assert`` (launched with ``debug=True``) is silent when it holds and stops
    the launch with ``DeviceAssertError`` and its message when any element violates it."""
    from anytile.errors import DeviceAssertError
    from ..case import CaseFailure
    block = 16
    x = ctx.random((block,), "i32", 1, 100)
    if violated:
        x[5] = -3
    out = ctx.output((block,), "i32")
    try:
        ctx.launch(assert_kernel, (1,), ctx.input(x), out, BLOCK=block, debug=True)
    except DeviceAssertError as exc:
        if not violated:
            raise CaseFailure(f"the assert holds everywhere but raised: {exc}") from None
        if "x must be positive" not in str(exc):
            raise CaseFailure(f"DeviceAssertError lacks the assert's message: {exc}") from None
        return
    if violated:
        raise CaseFailure("an element violates tl.device_assert but the launch succeeded")
    ctx.check("x + 1", out, x + 1, "i32", EXACT)


@at.jit
def assume_kernel(x_ptr, out_ptr, M, GROUPS, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    in_group = 2 * GROUPS
    first = (pid // in_group) * 2
    size = tl.minimum(tl.cdiv(M, BLOCK) - first, 2)
    pid_m = first + (pid % in_group) % size
    tl.assume(pid_m >= 0)
    tl.assume(M > 0)
    tl.assume(0 <= pid)
    rows = (pid_m * BLOCK + tl.arange(0, BLOCK)) % M
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), tl.load(x_ptr + rows))


@family("control-flow", quick=dict(m=[40]), full=dict(m=[16, 40, 64]))
def assume(ctx, m):
    """``tl.assume`` promises (Triton's tutorial matmul makes them of its program ids): a
    backend may optimise with them or drop them; the wrapped rows read are the same."""
    block, groups = 16, 1
    programs = -(-m // block)
    x = ctx.random((m,), "i32", -1000, 1000)
    out = ctx.output((programs * block,), "i32")
    ctx.launch(assume_kernel, (programs,), ctx.input(x), out, m, groups, BLOCK=block)
    expected = []
    for pid in range(programs):
        first = (pid // (2 * groups)) * 2
        size = min(programs - first, 2)
        pid_m = first + (pid % (2 * groups)) % size
        expected.append(x[(pid_m * block + np.arange(block)) % m])
    ctx.check("wrapped rows", out, np.concatenate(expected), "i32", EXACT)
