"""Checked mode (``debug=True``): out-of-bounds loads, stores and atomics and integer
division by zero are reported with the kernel's line, the program, the lane and where the
address lies, as the interpreter reports them; the access is not made, so the process and
the memory around the arrays survive (it is poisoned here and compared afterwards)."""
import gc
import re

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import LaunchError, OutOfBoundsError

POISON = -7.25


@pytest.fixture
def cpu(monkeypatch):
    """NumPy arrays go to the default host device: make that the cpu backend."""
    monkeypatch.setenv("ANYTILE_DEVICE", "cpu")
    monkeypatch.delenv("ANYTILE_DEBUG", raising=False)
    return at.device("cpu")


def _line(kernel, text):
    """The line number of the kernel's (first) source line containing ``text``."""
    lines = kernel.src.splitlines()
    return kernel.first_line + next(i for i, line in enumerate(lines) if text in line)


def _facts(message):
    """The facts a report gives, addresses left out: op and program, place, lane."""
    head = re.search(r"(out-of-bounds [a-z ]+ in program \(\d+, \d+, \d+\))", message)
    place = re.search(r"is ((?:element|byte offset) -?\d+ of a \d+-element \(\d+-byte\) "
                      r"allocation|the null pointer)", message)
    lane = re.search(r"(lane \([\d, ]*\) of a [\dx]+(?:-lane)? pointer tile)", message)
    return tuple(m.group(1) if m else None for m in (head, place, lane))


class Arena:
    """A poisoned float32 array whose middle part ``view`` the kernel gets: what lies
    around it must be left alone."""

    def __init__(self, n, margin=64):
        self.whole = np.full(n + 2 * margin, POISON, np.float32)
        self.margin = margin
        self.view = self.whole[margin:margin + n]

    def surroundings_intact(self):
        m = self.margin
        return np.all(self.whole[:m] == POISON) and np.all(self.whole[-m:] == POISON)


@at.jit
def copy_block(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(src + offs)
    tl.store(dst + offs, x)


@at.jit
def copy_by_program(src, dst, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs)
    tl.store(dst + offs, x * 2)


@at.jit
def shift_store(src, dst, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(src + offs)
    tl.store(dst + offs + shift, x)


@at.jit
def atomic_at(acc, x, offset, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    tl.atomic_add(acc + offset + offs, v)


def _report(kernel, grid, args, constexprs, interpreter=True):
    """The cpu's ``OutOfBoundsError`` (checked mode) and, on copies, the interpreter's."""
    with pytest.raises(OutOfBoundsError) as mine:
        kernel[grid](*args, debug=True, **constexprs)
    theirs = None
    if interpreter:
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        with pytest.raises(OutOfBoundsError) as theirs:
            kernel[grid](*copies, device="interpreter", **constexprs)
    return mine.value, theirs.value if theirs else None


def _expect_store_report(kernel, grid, args, block, program, place):
    """The store of ``kernel`` fails in ``program`` at lane 0, ``place`` in ``dst``, as on
    the interpreter."""
    mine, theirs = _report(kernel, grid, args, dict(BLOCK=block))
    assert mine.loc.line == _line(kernel, "tl.store")
    assert _facts(str(mine)) == (f"out-of-bounds store in {program}", place,
                                 f"lane (0,) of a {block}-lane pointer tile")
    assert _facts(str(mine)) == _facts(str(theirs)) and "argument 'dst'" in str(mine)


def test_unmasked_load_past_the_end(cpu, rng):
    src, dst = Arena(10), Arena(32)
    src.view[:] = rng.standard_normal(10)
    mine, theirs = _report(copy_block, (1,), (src.view, dst.view), dict(BLOCK=32))
    assert mine.loc.line == _line(copy_block, "tl.load")
    text = str(mine)
    assert "out-of-bounds load in program (0, 0, 0)" in text
    assert "is element 10 of a 10-element (40-byte) allocation" in text
    assert "argument 'src'" in text and "lane (10,) of a 32-lane pointer tile" in text
    assert "x = tl.load(src + offs)" in text          # the source line and its caret
    assert _facts(text) == _facts(str(theirs))
    assert src.surroundings_intact() and dst.surroundings_intact()


def test_store_from_a_program_past_the_data(cpu, rng):
    """Seven programs of 16 over 96 elements: program 6 stores wholly past the end."""
    src = rng.standard_normal(112).astype(np.float32)
    dst = Arena(96)
    _expect_store_report(copy_by_program, (7,), (src, dst.view), 16, "program (6, 0, 0)",
                         "element 96 of a 96-element (384-byte) allocation")
    assert dst.surroundings_intact()


def test_every_program_failing_at_once_gives_one_consistent_report(cpu, rng):
    """Programs on both workers fail together: one of them is reported, its facts agree."""
    src = rng.standard_normal(64 * 16).astype(np.float32)
    dst = Arena(16)
    for _ in range(5):
        mine, _ = _report(copy_by_program, (64,), (src, dst.view), dict(BLOCK=16),
                          interpreter=False)
        head, place, lane = _facts(str(mine))
        pid = int(re.search(r"program \((\d+),", head).group(1))
        element = int(re.search(r"element (\d+)", place).group(1))
        assert pid >= 1 and lane == "lane (0,) of a 16-lane pointer tile" and element == 16 * pid
    assert dst.surroundings_intact()


def test_negative_offset_store(cpu, rng):
    src = rng.standard_normal(16).astype(np.float32)
    dst = Arena(16)
    _expect_store_report(shift_store, (1,), (src, dst.view, -3), 16, "program (0, 0, 0)",
                         "element -3 of a 16-element (64-byte) allocation")
    assert dst.surroundings_intact()


def test_atomic_far_away(cpu, rng):
    """4 GiB past the accumulator: unchecked, this is a segmentation fault."""
    acc = Arena(8)
    x = rng.standard_normal(8).astype(np.float32)
    mine, _ = _report(atomic_at, (1,), (acc.view, x, 1 << 30), dict(BLOCK=8), interpreter=False)
    assert mine.loc.line == _line(atomic_at, "tl.atomic_add")
    assert _facts(str(mine)) == ("out-of-bounds atomic add in program (0, 0, 0)",
                                 "element 1073741824 of a 8-element (32-byte) allocation",
                                 "lane (0,) of a 8-lane pointer tile")
    assert "argument 'acc'" in str(mine)
    assert acc.surroundings_intact() and np.all(acc.view == POISON)


def test_store_past_the_end_of_a_numpy_array_leaves_the_heap_intact(cpu, rng):
    """Unchecked, these stores overwrite malloc's bookkeeping after each small array (glibc
    then aborts with "double free or corruption" when the arrays are freed)."""
    src = rng.standard_normal(64).astype(np.float32)
    for n in (1, 3, 10, 17):
        dst = np.full(n, POISON, np.float32)
        mine, _ = _report(copy_block, (1,), (src, dst), dict(BLOCK=64), interpreter=False)
        assert f"is element {n} of a {n}-element ({4 * n}-byte) allocation" in str(mine)
        assert "out-of-bounds store" in str(mine) and "argument 'dst'" in str(mine)
        del dst
        gc.collect()
    fresh = [np.ones(n, np.float32) for n in range(1, 64)]
    assert all(np.all(a == 1) for a in fresh)


def test_a_numpy_views_neighbours_are_outside_it(cpu, rng):
    """A view's span is its own elements, not its parent's: reading or writing the parent's
    elements next to the view is reported (relative to the view)."""
    src = Arena(10)
    src.view[:] = rng.standard_normal(10)
    dst = np.full(16, POISON, np.float32)
    mine, theirs = _report(copy_block, (1,), (src.view, dst), dict(BLOCK=16))
    assert "is element 10 of a 10-element (40-byte) allocation" in str(mine)
    assert _facts(str(mine)) == _facts(str(theirs))
    parent = np.full(40, POISON, np.float32)
    inside = parent[20:30]
    mine, _ = _report(shift_store, (1,), (rng.standard_normal(16).astype(np.float32), inside, 0),
                      dict(BLOCK=16), interpreter=False)
    assert "out-of-bounds store" in str(mine) and "argument 'dst'" in str(mine)
    # the neighbours are intact (the view's own lanes in SIMD chunks before the failing one
    # may be written: how many depends on the machine's vector width)
    assert np.all(parent[:20] == POISON) and np.all(parent[30:] == POISON)


@at.jit
def masked_far_away(src, dst, acc, n, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    inside = offs < n
    wild = tl.where(inside, offs, offs * far - far)     # off lanes point far away, both ways
    x = tl.load(src + wild, mask=inside, other=1.5)
    tl.store(dst + wild, x + 1, mask=inside)
    tl.atomic_add(acc + wild, x, mask=inside)
    one = tl.load(src + far, mask=n > 1000)             # a scalar access that is off
    tl.store(dst + far, one, mask=n > 1000)


def test_masked_off_lanes_are_never_reported(cpu, rng):
    n = 11
    src = rng.standard_normal(n).astype(np.float32)
    dst, acc = Arena(n), Arena(n)
    acc.view[:] = rng.standard_normal(n)
    want_acc = acc.view.astype(np.float64) + src
    masked_far_away[(1,)](src, dst.view, acc.view, n, 1 << 28, BLOCK=64, debug=True)
    np.testing.assert_array_equal(dst.view, src + 1)
    np.testing.assert_allclose(acc.view, want_acc, rtol=1e-6)
    assert dst.surroundings_intact() and acc.surroundings_intact()


@at.jit
def loop_carried(a, b, out, steps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    pa = a + offs
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(steps):
        acc += tl.load(pa)
        pa += BLOCK
    tl.store(out + offs, acc + tl.load(b + offs))


def test_pointers_carried_through_a_loop_are_checked_against_their_argument(cpu, rng):
    """The loop's pointer comes from ``a``: it is checked against ``a`` alone (``b`` right
    after it in memory does not make it pass), and named."""
    whole = rng.standard_normal(64).astype(np.float32)
    a, b = whole[:32], whole[32:48]
    out = np.full(16, np.nan, np.float32)
    loop_carried[(1,)](a, b, out, 2, BLOCK=16, debug=True)
    np.testing.assert_allclose(out, a[:16] + a[16:] + b, rtol=1e-6)
    mine, theirs = _report(loop_carried, (1,), (a, b, out, 3), dict(BLOCK=16))
    assert mine.loc.line == _line(loop_carried, "tl.load(pa)")
    assert _facts(str(mine)) == ("out-of-bounds load in program (0, 0, 0)",
                                 "element 32 of a 32-element (128-byte) allocation",
                                 "lane (0,) of a 16-lane pointer tile")
    assert "argument 'a'" in str(mine)
    assert _facts(str(mine))[:2] == _facts(str(theirs))[:2]


def test_a_null_pointer_argument_has_no_memory():
    """A pointer argument given as ``None`` (address 0) spans nothing."""
    from anytile.backend import CompileOptions
    from anytile.ir.types import f32
    from cpu_kit import CPU, CPU_DEVICE, KernelBuilder, compile_module, launch, ptr
    kb = KernelBuilder([("src", ptr(f32)), ("dst", ptr(f32))])
    offs = kb.arange(16)
    kb.store(kb.ptrs(kb.arg("dst"), offs), kb.load(kb.ptrs(kb.arg("src"), offs)))
    loaded = CPU.load(compile_module(kb.module, options=CompileOptions(debug=True)), CPU_DEVICE)
    with pytest.raises(OutOfBoundsError) as info:
        launch(CPU, loaded, 1, kb.fn.args, [np.ones(16, np.float32), None])
    assert _facts(str(info.value)) == ("out-of-bounds store in program (0, 0, 0)",
                                       "the null pointer", "lane (0,) of a 16-lane pointer tile")


@at.jit
def divide(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    b = tl.load(y + offs, mask=mask)
    q = a // b
    r = a % (b + 1)
    tl.store(out + offs, q + r, mask=mask)


@at.jit
def divide_by_scalar(x, out, d, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs) // d)


def _c_div(a, b):
    return np.trunc(a.astype(np.float64) / b).astype(a.dtype)


def test_integer_division_by_zero_is_reported(cpu, rng):
    n = 20
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    y = rng.integers(1, 50, n).astype(np.int32) * rng.choice([-1, 1], n).astype(np.int32)
    y[y == -1] = 3                                      # keep b + 1 nonzero
    out = np.full(n, -7, np.int32)
    divide[(1,)](x, y, out, n, BLOCK=32, debug=True)    # lanes past n load 0: never reported
    q = _c_div(x, y)
    np.testing.assert_array_equal(out, q + (x - _c_div(x, y + 1) * (y + 1)))
    y[13] = 0
    with pytest.raises(LaunchError) as info:
        divide[(1,)](x, y, out, n, BLOCK=32, debug=True)
    assert not isinstance(info.value, OutOfBoundsError)
    assert info.value.loc.line == _line(divide, "a // b")
    assert "integer division by zero in program (0, 0, 0) (lane (13,) of a 32-lane tile)" \
        in str(info.value)
    y[13], y[5] = 4, -1
    with pytest.raises(LaunchError) as info:
        divide[(1,)](x, y, out, n, BLOCK=32, debug=True)
    assert info.value.loc.line == _line(divide, "a % (b + 1)")
    assert "integer remainder by zero" in str(info.value) and "lane (5,)" in str(info.value)
    with pytest.raises(LaunchError) as info:
        divide_by_scalar[(1,)](x, np.empty(16, np.int32), 0, BLOCK=16, debug=True)
    assert info.value.loc.line == _line(divide_by_scalar, "// d")
    assert "integer division by zero in program (0, 0, 0)" in str(info.value)
    divide_by_scalar[(1,)](x, out, 0, BLOCK=16)         # unchecked: undefined, not reported


@at.jit
def divide_where_nonzero(x, y, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x + offs)
    b = tl.load(y + offs)
    tl.store(out + offs, tl.where(b != 0, a // b, 0) + tl.where(b == 0, 1, a % b + 1))


@at.jit
def divide_stored_where_nonzero(x, y, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x + offs)
    b = tl.load(y + offs)
    tl.store(out + offs, a // b * 2, mask=b != 0)


@at.jit
def divide_by_scalar_where_nonzero(x, out, d, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.where(d != 0, tl.load(x + offs) // d, -1))


@at.jit
def divide_where_positive(x, y, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x + offs)
    b = tl.load(y + offs)
    tl.store(out + offs, tl.where(a > 0, a // b, 0))


@pytest.fixture(params=["cpu", "gpusim", "amdsim64"])
def checked_device(request, monkeypatch):
    """The cpu and the simulated GPUs (opt-in devices: discovery refreshed around the test)."""
    from anytile.runtime.discovery import discover
    monkeypatch.delenv("ANYTILE_DEBUG", raising=False)
    if request.param == "cpu":
        yield at.device("cpu")
        return
    monkeypatch.setenv("ANYTILE_GPU_SIMULATOR", "1")
    discover(refresh=True)
    try:
        device = at.device(f"{request.param}:0")
    except Exception as exc:  # noqa: BLE001 -- the simulator's backend is not installed
        pytest.skip(f"{request.param}: {exc}")
    yield device
    monkeypatch.delenv("ANYTILE_GPU_SIMULATOR")
    discover(refresh=True)


def test_a_division_whose_lane_the_kernel_discards_is_not_reported(checked_device, rng):
    """``tl.where(b != 0, a // b, 0)``, a store masked by ``b != 0``: the lanes dividing by 0
    are dropped by every use, so checked mode does not report them (cpu and simulated GPUs
    alike); a division by zero whose lane is kept still is."""
    dev = checked_device
    n = 64
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    x[x == 0] = 5
    y = rng.integers(-9, 10, n).astype(np.int32)
    y[[3, 17, 40]] = 0
    nonzero = y != 0
    safe = np.where(nonzero, y, 1)
    out = at.asarray(np.full(n, -7, np.int32), device=dev)
    divide_where_nonzero[(1,)](at.asarray(x, device=dev), at.asarray(y, device=dev), out,
                               BLOCK=n, debug=True)
    quotient, remainder = _c_div(x, safe), x - _c_div(x, safe) * safe
    np.testing.assert_array_equal(out.numpy(), np.where(nonzero, quotient, 0) +
                                  np.where(nonzero, remainder + 1, 1))

    poison = np.full(n, -7, np.int32)
    out = at.asarray(poison, device=dev)
    divide_stored_where_nonzero[(1,)](at.asarray(x, device=dev), at.asarray(y, device=dev),
                                      out, BLOCK=n, debug=True)
    np.testing.assert_array_equal(out.numpy(), np.where(nonzero, quotient * 2, -7))

    out = at.asarray(np.full(16, -7, np.int32), device=dev)
    divide_by_scalar_where_nonzero[(1,)](at.asarray(x[:16], device=dev), out, 0,
                                         BLOCK=16, debug=True)
    np.testing.assert_array_equal(out.numpy(), np.full(16, -1, np.int32))

    # kept lanes: a > 0 there, and b is 0 in lane 3 only where a > 0
    x = np.abs(x)
    y = np.where(y == 0, 1, y).astype(np.int32)
    x[10], y[10] = -4, 0                                     # discarded: a <= 0
    divide_where_positive[(1,)](at.asarray(x, device=dev), at.asarray(y, device=dev),
                                at.asarray(np.full(n, -7, np.int32), device=dev),
                                BLOCK=n, debug=True)
    y[3] = 0
    with pytest.raises(LaunchError, match="integer division by zero"):
        divide_where_positive[(1,)](at.asarray(x, device=dev), at.asarray(y, device=dev),
                                    at.asarray(np.full(n, -7, np.int32), device=dev),
                                    BLOCK=n, debug=True)


def _warm(kernel, args, constexprs, **options):
    return kernel.warmup(*args, **constexprs, **options)


def test_without_debug_no_check_is_generated(cpu, monkeypatch):
    """``debug`` off compiles the code of before checked mode: nothing of ``CheckedMode``
    runs while lowering, the entry reads no spans and only reads the error word (each kernel
    here has no other runtime check); with ``debug`` the same kernels are checked."""
    from anytile_conformance.catalogue.kernels import (layer_norm_kernel, matmul_kernel,
                                                        softmax_kernel)
    from anytile_cpu.lowering import checked
    f32 = np.ones(64 * 64, np.float32)
    i32 = np.ones(64, np.int32)
    kernels = [
        (copy_block, (f32, f32), dict(BLOCK=64)),
        (atomic_at, (f32, f32, 3), dict(BLOCK=8)),
        (divide, (i32, i32, i32, 20), dict(BLOCK=32)),
        (loop_carried, (f32, f32, f32, 2), dict(BLOCK=16)),
        (softmax_kernel, (f32, f32, 64, 64, 64), dict(BLOCK=64)),
        (layer_norm_kernel, (f32, f32, f32, f32, f32, f32, 64, 64, 1e-5), dict(BLOCK=64)),
        (matmul_kernel, (f32, f32, f32, f32, 64, 64, 64, 64, 1, 64, 1, 64),
         dict(ACTIVATION="none", BM=32, BN=32, BK=16, GROUP_M=2)),
    ]

    def refuse(*_args, **_kw):
        raise AssertionError("checked mode used without debug")
    with monkeypatch.context() as patch:
        patch.setattr(checked.CheckedMode, "__init__", refuse)
        plain = [_warm(k, a, c) for k, a, c in kernels]
    entry = re.compile(r"define void @run\(ptr readonly [^,]*, i32 [^,]*, i32 [^,]*, i32 [^,]*, "
                       r"i64 [^,]*, i64 [^,]*, ptr readonly [^,]*\)")
    for (kernel, args, constexprs), compiled in zip(kernels, plain):
        assert not compiled.options.debug and not compiled.metadata["checked"]
        assert compiled.metadata["asserts"] == []
        assert entry.search(compiled.asm["llir"]), kernel.__name__
        debug = _warm(kernel, args, constexprs, debug=True)
        assert debug.metadata["checked"] and debug.metadata["asserts"]
        assert all(a[3] is not None for a in debug.metadata["asserts"])
        assert "check.report" in debug.asm["llir"] and "check.report" not in compiled.asm["llir"]
