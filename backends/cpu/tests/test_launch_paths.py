"""How cpu launches run: the fast path's raw launcher (one program on the caller's thread,
more claimed by the pool's workers), its argument packing and read-only refusal, and the
code of streaming kernels (non-temporal stores for large write-only outputs, plain vector
accesses where a mask is whole)."""
import math

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import LaunchError
from anytile_cpu import launch as cpu_launch


def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def _scale_shift(x_ptr, out_ptr, s, k, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s + k, mask=mask)


def _accumulate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask),
             mask=mask)


def _count_programs(counts_ptr):
    tl.atomic_add(counts_ptr + tl.program_id(0), 1)


@pytest.fixture
def dev():
    return at.device("cpu")


def test_one_program_runs_on_the_callers_thread_through_the_fast_path(dev, rng):
    kernel = at.jit(_add)
    x, y = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    xa, ya = at.asarray(x, device=dev), at.asarray(y, device=dev)
    for _ in range(3):
        out = np.full(100, np.nan, np.float32)
        oa = at.asarray(out, device=dev)
        before = dict(cpu_launch.launch_counts)
        kernel[(1,)](xa, ya, oa, 100, BLOCK=128)
        assert cpu_launch.launch_counts["pool"] == before["pool"]
        assert cpu_launch.launch_counts["direct"] == before["direct"] + 1
        np.testing.assert_array_equal(out, x + y)
    assert len(kernel._fast_cache) == 1          # the later launches took the raw launcher


def test_many_programs_are_each_run_once_by_the_pool_or_the_caller(dev):
    """The pool's workers claim programs from a shared counter; programs that took less
    than the pool's hand-off last time run on the caller alone (in slices)."""
    kernel = at.jit(_count_programs)
    for programs in (2, 3, 1000, 4099):
        counts = np.zeros(programs, np.int32)
        ca = at.asarray(counts, device=dev)
        before = dict(cpu_launch.launch_counts)
        kernel[(programs,)](ca)                  # no estimate yet: the pool
        loaded = next(iter(kernel._plans.values())).loaded
        loaded.program_seconds = math.inf        # as if the programs had been slow
        kernel[(programs,)](ca)                  # through the fast path, the pool again
        assert cpu_launch.launch_counts["pool"] == before["pool"] + 2
        loaded.program_seconds = 0.0             # as if they had been quick
        kernel[(programs,)](ca)
        assert cpu_launch.launch_counts["direct"] == before["direct"] + 1
        assert cpu_launch.launch_counts["pool"] == before["pool"] + 2
        np.testing.assert_array_equal(counts, 3)
        kernel._plans.clear()
        kernel._fast_cache.clear()


def _count_programs_3d(counts_ptr, gx, gy):
    pid = (tl.program_id(2) * gy + tl.program_id(1)) * gx + tl.program_id(0)
    tl.atomic_add(counts_ptr + pid, 1)


@pytest.mark.parametrize("grid", [(5, 1, 1), (3, 4, 1), (7, 6, 2), (2, 9, 3), (1, 5, 1)])
def test_every_program_of_a_multi_dimensional_grid_runs_once(dev, grid):
    """2-D grids run in bands of y values (``kernel._program_ids``), ragged last band too."""
    gx, gy, gz = grid
    counts = np.zeros(gx * gy * gz, np.int32)
    ca = at.asarray(counts, device=dev)
    at.jit(_count_programs_3d)[grid](ca, gx, gy)
    np.testing.assert_array_equal(counts, 1)


def test_the_raw_launcher_refuses_a_read_only_output(dev):
    kernel = at.jit(_add)
    x = np.arange(64, dtype=np.float32)
    out = np.full(64, np.nan, np.float32)
    xa, oa = at.asarray(x, device=dev), at.asarray(out, device=dev)
    kernel[(1,)](xa, xa, oa, 64, BLOCK=64)
    kernel[(1,)](xa, xa, oa, 64, BLOCK=64)
    assert len(kernel._fast_cache) == 1
    frozen = out.copy()
    frozen.flags.writeable = False
    fa = at.asarray(frozen, device=dev)
    assert fa._spec_key == oa._spec_key          # the same fast key: the raw launcher decides
    with pytest.raises(LaunchError, match="'out_ptr' is a read-only array"):
        kernel[(1,)](xa, xa, fa, 64, BLOCK=64)
    np.testing.assert_array_equal(frozen, 2 * x)      # as the writeable launch left it
    kernel[(1,)](fa, fa, oa, 64, BLOCK=64)       # read through: fine
    np.testing.assert_array_equal(out, 4 * x)


@pytest.mark.parametrize("s, k", [(0.1, -3), (1e300, 7), (-2.5, 2**31 - 1)])
def test_the_raw_launcher_packs_scalars_as_the_general_path_does(dev, rng, s, k):
    kernel = at.jit(_scale_shift)
    x = rng.standard_normal(50).astype(np.float32)
    xa = at.asarray(x, device=dev)
    with np.errstate(over="ignore"):
        want = x * np.float32(s) + np.float32(k)
    for _ in range(2):                           # the general path, then the raw launcher
        out = np.full(50, np.nan, np.float32)
        kernel[(1,)](xa, at.asarray(out, device=dev), s, k, 50, BLOCK=64)
        np.testing.assert_array_equal(out, want)
    assert len(kernel._fast_cache) == 1


def _llir(fn, *args, debug=False, **constexprs):
    return str(at.jit(fn, debug=debug).warmup(*args, grid=(1,), **constexprs).asm["llir"])


def test_large_write_only_stores_stream_and_whole_masks_use_plain_accesses(dev):
    x = at.asarray(np.zeros(1 << 14, np.float32), device=dev)
    big = _llir(_add, x, x, x, 1 << 14, BLOCK=4096)
    assert "!nontemporal" in big
    assert "fence seq_cst" in big                # the stores are visible when the launch ends
    lanes = max(4, dev.info.props["vector_bits"] // 32)
    assert "llvm.masked.load" in big and f"load <{lanes} x float>" in big
    assert "!nontemporal" not in _llir(_add, x, x, x, 1 << 14, BLOCK=256)   # a small tile
    assert "!nontemporal" not in _llir(_accumulate, x, x, 1 << 14, BLOCK=4096)  # out is read
    assert "!nontemporal" not in _llir(_add, x, x, x, 1 << 14, BLOCK=4096, debug=True)


@pytest.mark.parametrize("n, dtype", [(4096 * 6, np.float32), (4096 * 6 - 5, np.float32),
                                      (3000, np.float32), (4096 * 3 - 1, np.float64)])
def test_streaming_stores_at_every_alignment(dev, rng, monkeypatch, n, dtype):
    """Every element offset of the output (head, aligned body, tail), whole and partial
    blocks; what lies outside the output is never written."""
    monkeypatch.setattr(cpu_launch, "STREAM_LAUNCH_BYTES", 1)    # stream every launch
    kernel = at.jit(_add)
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    xa, ya = at.asarray(x, device=dev), at.asarray(y, device=dev)
    grid = (at.cdiv(n, 4096),)
    for offset in range(17):
        room = np.full(n + 40, np.nan, dtype)
        out = room[offset:offset + n]
        kernel[grid](xa, ya, at.asarray(out, device=dev), n, BLOCK=4096)
        np.testing.assert_array_equal(out, x + y)
        assert np.isnan(room[:offset]).all() and np.isnan(room[offset + n:]).all()
    loaded = next(iter(kernel._plans.values())).loaded
    assert loaded.stream_programs == 1           # the launches did pass "may stream"


def _bounded_copy(x_ptr, out_ptr, bias, lim, BLOCK: tl.constexpr, FORM: tl.constexpr):
    k = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if FORM == 0:
        mask = k + bias < lim             # i32: wraps when bias is near 2**31
    elif FORM == 1:
        mask = lim > k - bias
    elif FORM == 2:
        mask = k + bias >= lim
    else:
        mask = lim <= bias + k
    tl.store(out_ptr + k, tl.load(x_ptr + k, mask=mask, other=0.0) + 1.0, mask=mask)


@pytest.mark.parametrize("form", [0, 1, 2, 3])
@pytest.mark.parametrize("bias, lim", [(0, 4096 * 2 + 7), (5, 4096), (2**31 - 5000, 2**31 - 1),
                                       (2**31 - 5000, -(2**31)), (-3, 4096 * 3),
                                       (2**31 - 4096, 2**31 - 1)])
def test_streaming_stores_of_a_bounded_range_mask(dev, rng, monkeypatch, form, bias, lim):
    """A streaming store's mask ``offs < bound`` (and >, <=, >=, either side) is looked at in
    its first and last elements only: every lane as the ordinary loop says, also where
    ``offs`` wraps around i32 inside a block."""
    monkeypatch.setattr(cpu_launch, "STREAM_LAUNCH_BYTES", 1)    # stream every launch
    kernel = at.jit(_bounded_copy)
    n = 4096 * 3
    x = rng.standard_normal(n).astype(np.float32)
    k = np.arange(n, dtype=np.int64)
    shifted = (k + bias + 2**31) % 2**32 - 2**31            # i32 arithmetic
    low = (k - bias + 2**31) % 2**32 - 2**31
    want_mask = [shifted < lim, lim > low, shifted >= lim, lim <= shifted][form]
    out = np.full(n, np.nan, np.float32)
    kernel[(3,)](at.asarray(x, device=dev), at.asarray(out, device=dev), bias, lim,
                 BLOCK=4096, FORM=form)
    want = np.where(want_mask, x + np.float32(1), np.float32(np.nan))
    np.testing.assert_array_equal(out, want)


def _strided_fill(out_ptr, n, step):
    for i in range(0, n, step):
        tl.store(out_ptr + i, 1.0)


def test_the_raw_launcher_reports_runtime_check_failures(dev):
    """A failed run-time check (a for-loop step that is not positive) is the general
    path's ``LaunchError`` naming the line, through the raw launcher too."""
    kernel = at.jit(_strided_fill)
    out = np.zeros(64, np.float32)
    oa = at.asarray(out, device=dev)
    kernel[(1,)](oa, 64, 16)
    kernel[(1,)](oa, 64, 16)
    assert len(kernel._fast_cache) == 1
    np.testing.assert_array_equal(out[::16], 1.0)
    with pytest.raises(LaunchError, match="step must be positive"):
        kernel[(1,)](oa, 64, 0)                  # the same fast key as 16 (i32, divisible)
    assert len(kernel._fast_cache) == 1
