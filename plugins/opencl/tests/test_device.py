"""Kernels on ``opencl:0`` through each code path (``ocl_kit.ARCHES``): the host CPU's one
work-item with 16-wide vectors, and the GPU paths (128 and 32 work-items) PoCL also runs,
where tiles spread over work-items, move through local memory and small tiles are held in
copies.  Outputs are poisoned, inputs random, references NumPy in float64."""
import os

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import DeviceAssertError

from ocl_kit import ARCHES, arch, fresh, opencl_device, poisoned

pytestmark = pytest.mark.parametrize("path", list(ARCHES))


@at.jit
def row_softmax_kernel(x_ptr, out_ptr, n_rows, n_cols, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, COLS)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    tl.store(out_ptr + rows[:, None] * n_cols + cols[None, :], e / tl.sum(e, axis=1)[:, None],
             mask=mask)


def test_row_block_softmax(path, rng):
    dev = opencl_device()
    n_rows, n_cols = 37, 50
    x = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    out = at.asarray(poisoned((n_rows, n_cols), np.float32), device=dev)
    with arch(path) as opts:
        fresh(row_softmax_kernel)[(at.cdiv(n_rows, 4),)](at.asarray(x, device=dev), out, n_rows,
                                                         n_cols, ROWS=4, COLS=64, **opts)
    w = x.astype(np.float64)
    ref = np.exp(w - w.max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), ref / ref.sum(1, keepdims=True), rtol=2e-6, atol=1e-7)


@at.jit
def tile_algebra_kernel(a_ptr, b_ptr, bias_ptr, out_ptr, cols_ptr, arg_ptr, scan_ptr,
                        M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    bt = tl.load(b_ptr + rn[:, None] * K + rk[None, :])           # b transposed in memory
    acc = tl.dot(a, tl.trans(bt)) + tl.load(bias_ptr + rn)[None, :]
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc)
    tl.store(cols_ptr + rn, tl.min(acc, axis=0))
    tl.store(arg_ptr + rm, tl.argmax(acc, axis=1))
    tl.store(scan_ptr + rm[:, None] * N + rn[None, :], tl.cumsum(acc, axis=0, reverse=True))


def test_dot_transpose_reductions_and_scans(path, rng):
    dev = opencl_device()
    m, n, k = 16, 32, 16
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)      # exact sums: any order agrees
    bt = rng.integers(-4, 5, (n, k)).astype(np.float32)
    bias = rng.integers(-8, 9, n).astype(np.float32)
    outs = [at.asarray(poisoned(s, d), device=dev)
            for s, d in (((m, n), np.float32), (n, np.float32), (m, np.int32), ((m, n), np.float32))]
    with arch(path) as opts:
        fresh(tile_algebra_kernel)[(1,)](*(at.asarray(v, device=dev) for v in (a, bt, bias)),
                                         *outs, M=m, N=n, K=k, **opts)
    acc = a.astype(np.float64) @ bt.T.astype(np.float64) + bias
    np.testing.assert_array_equal(outs[0].numpy(), acc)
    np.testing.assert_array_equal(outs[1].numpy(), acc.min(0))
    np.testing.assert_array_equal(outs[2].numpy(), acc.argmax(1))
    np.testing.assert_array_equal(outs[3].numpy(), np.cumsum(acc[::-1], 0)[::-1])


@at.jit
def small_tile_kernel(x_ptr, counter_ptr, tickets_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_add(counter_ptr + offs % 2, tl.load(x_ptr + offs))
    ticket = tl.atomic_add(counter_ptr + 2, 1)
    tl.store(tickets_ptr + tl.program_id(0), ticket)
    tl.store(out_ptr + tl.program_id(0) * BLOCK + offs, old * 0 + tl.sum(old * 0 + 1, axis=0))


def test_small_tiles_and_atomics_held_in_copies(path, rng):
    dev = opencl_device()
    block, programs = 8, 5
    x = rng.integers(1, 100, block).astype(np.int32)
    counter = at.asarray(np.zeros(3, np.int32), device=dev)
    tickets = at.asarray(poisoned(programs, np.int32), device=dev)
    out = at.asarray(poisoned(programs * block, np.int32), device=dev)
    with arch(path) as opts:
        fresh(small_tile_kernel)[(programs,)](at.asarray(x, device=dev), counter, tickets, out,
                                              BLOCK=block, **opts)
    got = counter.numpy()
    assert got[0] == programs * x[0::2].sum() and got[1] == programs * x[1::2].sum()
    assert got[2] == programs and sorted(tickets.numpy()) == list(range(programs))
    np.testing.assert_array_equal(out.numpy(), np.full(programs * block, block))


@at.jit
def write_then_read_kernel(buf_ptr, out_ptr, N: tl.constexpr):
    rows, cols = tl.arange(0, N), tl.arange(0, N)
    tile = rows[:, None] * N + cols[None, :]
    tl.store(buf_ptr + tile, tile * 3 + tl.program_id(0))
    back = tl.load(buf_ptr + cols[:, None] + rows[None, :] * N)    # read transposed
    tl.store(out_ptr + tile, back)


def test_a_program_reads_what_it_wrote(path):
    dev = opencl_device()
    n = 32
    buf = at.asarray(poisoned((n, n), np.int32), device=dev)
    out = at.asarray(poisoned((n, n), np.int32), device=dev)
    with arch(path) as opts:
        fresh(write_then_read_kernel)[(1,)](buf, out, N=n, **opts)
    tile = np.arange(n * n).reshape(n, n) * 3
    np.testing.assert_array_equal(out.numpy(), tile.T)


@at.jit
def carried_kernel(x_ptr, out_ptr, steps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs)
    b = a * 2
    i = 0
    while i < steps:
        a, b = b, a + 1                    # a swap of carried tiles
        i += 1
    for j in range(0, steps):
        if j % 2 == 0:
            a = a + tl.max(b, axis=0)
    tl.store(out_ptr + offs, a - b)


def test_loops_carry_tiles_as_a_parallel_copy(path, rng):
    dev = opencl_device()
    block, steps = 64, 5
    x = rng.integers(-50, 50, block).astype(np.int64)
    out = at.asarray(poisoned(block, np.int64), device=dev)
    with arch(path) as opts:
        fresh(carried_kernel)[(1,)](at.asarray(x, device=dev), out, steps, BLOCK=block, **opts)
    a, b = x.copy(), x * 2
    for _ in range(steps):
        a, b = b, a + 1
    for j in range(steps):
        if j % 2 == 0:
            a = a + b.max()
    np.testing.assert_array_equal(out.numpy(), a - b)


@at.jit
def assert_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_assert(x < 100, "x must stay below 100")


def test_device_assert_with_debug(path):
    dev = opencl_device()
    x = np.arange(32, dtype=np.int32)
    with arch(path) as opts:
        kernel = fresh(assert_kernel)
        kernel[(1,)](at.asarray(x, device=dev), BLOCK=32, debug=True, **opts)
        x[7] = 500
        with pytest.raises(DeviceAssertError, match="x must stay below 100") as info:
            kernel[(1,)](at.asarray(x, device=dev), BLOCK=32, debug=True, **opts)
    assert "test_device.py" in str(info.value)


@at.jit
def print_kernel(x_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    r, c = tl.arange(0, ROWS), tl.arange(0, COLS)
    tl.device_print("v", tl.load(x_ptr + r[:, None] * COLS + c[None, :]))
    tl.device_print("s", tl.load(x_ptr))


def test_device_print_once_per_element(path, capfd):
    # on the GPU paths small tiles are held in copies: each element still prints once
    dev = opencl_device()
    with arch(path) as opts:
        fresh(print_kernel)[(1,)](at.asarray(np.arange(8, dtype=np.int32), device=dev),
                                  ROWS=2, COLS=4, **opts)
    dev.synchronize()           # OpenCL prints when the kernel has finished
    lines = capfd.readouterr().out.splitlines()
    # several work-items print at once: their lines interleave
    assert sorted(lines) == sorted([f"pid (0, 0, 0) idx ({i // 4}, {i % 4}) v {i}"
                                    for i in range(8)] + ["pid (0, 0, 0) s 0"])


@at.jit
def sliced_dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def test_dot_in_k_slices_when_local_memory_is_small(path, rng):
    if path == "native":
        pytest.skip("one work-item reads its private arrays: no local memory involved")
    dev = opencl_device()
    m, n, k = 32, 32, 64                 # 16 KiB of f64 operands, 4 KiB of local memory
    a = rng.integers(-8, 9, (m, k)).astype(np.float64)
    b = rng.integers(-8, 9, (k, n)).astype(np.float64)
    out = at.asarray(poisoned((m, n), np.float64), device=dev)
    with arch(path) as opts:
        # inside arch(): it restores the variable (a monkeypatch would restore arch's value)
        small = os.environ["ANYTILE_OPENCL_ARCH"].replace("-l48k-", "-l4k-")
        os.environ["ANYTILE_OPENCL_ARCH"] = small
        kernel = fresh(sliced_dot_kernel)
        compiled = kernel.warmup(at.asarray(a, device=dev), at.asarray(b, device=dev), out,
                                 M=m, N=n, K=k, grid=(1,), **opts)
        assert "k0 += " in compiled.asm["opencl-c"]
        kernel[(1,)](at.asarray(a, device=dev), at.asarray(b, device=dev), out, M=m, N=n, K=k,
                     **opts)
    np.testing.assert_array_equal(out.numpy(), a @ b)


def test_metadata_reports_the_driver_and_programs_are_built_once(path, rng):
    from anytile_opencl import driver
    dev = opencl_device()
    n = 64
    x = at.asarray(rng.integers(-9, 9, n).astype(np.int32), device=dev)
    with arch(path) as opts:
        kernel = fresh(small_tile_kernel)
        args = (x, at.asarray(np.zeros(3, np.int32), device=dev),
                at.asarray(poisoned(1, np.int32), device=dev), at.asarray(poisoned(n, np.int32), device=dev))
        kernel[(1,)](*args, BLOCK=n, **opts)
        compiled = kernel.warmup(*args, BLOCK=n, grid=(1,), **opts)
    meta = compiled.metadata
    assert meta["work_group_size"] >= meta["threads_per_block"] >= 1
    assert meta["local_mem_bytes"] >= meta["shared"] and meta["private_mem_bytes"] >= 0
    record = next(r for r in driver.discover_devices() if r.info.name == dev.name)
    source = compiled.asm["opencl-c"]
    assert driver.build_program(record, source) is driver.build_program(record, source)


@at.jit
def nan_to_int_kernel(x_ptr, tile_out, scalar_out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(tile_out + offs, tl.load(x_ptr + offs).to(tl.int32))
    tl.store(scalar_out, tl.load(x_ptr).to(tl.int16))


def test_float_to_int_casts_saturate_and_send_nan_to_zero(path):
    """The IR's rule (NaN -> 0, out of range saturates) in tiles and in scalars: OpenCL's
    saturating conversions promise it, but NVIDIA's driver gives NaN the most negative
    integer, so the code makes NaNs zeros first (and a scalar double's isnan is an int)."""
    dev = opencl_device()
    for dtype in (np.float32, np.float64):
        x = np.array([np.nan, 1e30, -1e30, 2.9, -2.9, np.inf, -np.inf, 7.0], dtype)
        tile_out = at.asarray(poisoned(8, np.int32), device=dev)
        scalar_out = at.asarray(poisoned(1, np.int16), device=dev)
        with arch(path) as opts:
            fresh(nan_to_int_kernel)[(1,)](at.asarray(x, device=dev), tile_out, scalar_out,
                                           BLOCK=8, **opts)
        big, small = 2**31 - 1, -2**31
        assert tile_out.numpy().tolist() == [0, big, small, 2, -2, big, small, 7], dtype
        assert scalar_out.numpy()[0] == 0, dtype


@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_sin_and_cos_of_tiles_mixing_huge_and_tiny_arguments(path, fn):
    """PoCL's vector sin/cos get every small lane wrong once one lane is about 1e7 or more
    (sin(1e-6) = 8.19e-3): such vectors are computed lane by lane."""
    from anytile_conformance import oracle, tolerances
    from anytile_conformance.catalogue.math_fns import math_kernel, mixed_inputs
    dev = opencl_device()
    for dtype, name in ((np.float32, "f32"), (np.float64, "f64")):
        x = mixed_inputs(fn, name, 64)
        out = at.asarray(poisoned(64, dtype), device=dev)
        with arch(path) as opts:
            fresh(math_kernel)[(1,)](at.asarray(x, device=dev), out, 64, FN=fn, BLOCK=64, **opts)
        with np.errstate(all="ignore"):
            exact = getattr(np, fn)(x.astype(np.longdouble))
        mismatch = oracle.compare(fn, out.numpy(), exact, name, tolerances.math_function(fn, name))
        assert mismatch is None, str(mismatch)


@at.jit
def unmasked_copy_kernel(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(src + offs)
    tl.store(dst + offs, x)


def test_checked_mode_reports_out_of_bounds_accesses(path, rng):
    from anytile.errors import OutOfBoundsError
    dev = opencl_device()
    x = rng.standard_normal(8).astype(np.float32)
    short = at.asarray(x[:5].copy(), device=dev)
    out = at.asarray(poisoned(8, np.float32), device=dev)
    with arch(path) as opts:
        kernel = fresh(unmasked_copy_kernel)
        kernel[(1,)](at.asarray(x, device=dev), out, BLOCK=8, debug=True, **opts)   # in bounds
        np.testing.assert_array_equal(out.numpy(), x)
        for src, dst, access, name in ((short, out, "load", "src"),
                                       (at.asarray(x, device=dev), short, "store", "dst")):
            with pytest.raises(OutOfBoundsError) as info:
                kernel[(1,)](src, dst, BLOCK=8, debug=True, **opts)
            text = str(info.value)
            assert f"out-of-bounds {access}" in text and f"argument '{name}'" in text, text
            assert "of a 5-element (20-byte) allocation" in text, text
            assert "test_device.py" in text and f"tl.{access}(" in text, text
    np.testing.assert_array_equal(short.numpy(), x[:5])       # in-bounds lanes stored x
