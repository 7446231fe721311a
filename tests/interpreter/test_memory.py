"""Checked memory: bounds and alignment errors, masks, freed buffers, zero-copy imports."""
from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from anytile.backend import KernelArg, PointerArg
from anytile.errors import LaunchError, OutOfBoundsError
from anytile.ir import LoadOp, StoreOp
from anytile.ir.types import bf16, f32, i1, i32, i64
from interp_kit import BACKEND, DEVICE, KernelBuilder, ptr, rng, run

THIS_FILE = os.path.basename(__file__)


def copy_kernel(n: int, elem=f32, masked: bool = False, other: bool = False):
    """``out[i] = x[i + shift]`` for ``i < n`` (with ``mask = i < limit`` when ``masked``)."""
    kb = KernelBuilder([("x", ptr(elem)), ("out", ptr(elem)), ("shift", i32), ("limit", i32)])
    offs = kb.arange(n)
    src = kb.binary("add", offs, kb.splat(kb.arg("shift"), (n,)))
    mask = kb.compare("lt", src, kb.splat(kb.arg("limit"), (n,))) if masked else None
    fill = kb.splat(kb.const(-7.5, elem), (n,)) if other else None
    value = kb.load(kb.ptrs(kb.arg("x"), src), mask, fill)
    kb.store(kb.ptrs(kb.arg("out"), offs), value)
    return kb


def test_unmasked_out_of_bounds_load_names_line_program_and_element():
    kb = copy_kernel(1024)
    x = rng(1).standard_normal(1000).astype(np.float32)
    out = np.full(1024, np.nan, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        run(kb.module, 1, x, out, 0, 0)
    load = next(op for op in kb.fn.body.ops if isinstance(op, LoadOp))
    text = str(info.value)
    assert f"{THIS_FILE}:{load.loc.line}" in text
    assert "value = kb.load(" in text                      # the source line, with a caret
    assert "out-of-bounds load" in text and "program (0, 0, 0)" in text
    assert "element 1000 of a 1000-element (4000-byte) allocation" in text
    assert "24 of 1024 active lanes are out of bounds" in text
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert np.isnan(out).all()                             # nothing was stored


def test_out_of_bounds_store_writes_nothing_and_reports_negative_element():
    kb = KernelBuilder([("out", ptr(i32)), ("shift", i32)])
    offs = kb.binary("add", kb.arange(64), kb.splat(kb.arg("shift"), (64,)))
    kb.store(kb.ptrs(kb.arg("out"), offs), offs)
    out = np.full(64, -99, np.int32)
    with pytest.raises(OutOfBoundsError) as info:
        run(kb.module, (3, 2), out, -2)
    assert "out-of-bounds store" in str(info.value)
    assert "element -2 of a 64-element (256-byte) allocation" in str(info.value)
    assert "lane (0,)" in str(info.value)
    assert (out == -99).all()
    run(kb.module, 1, out, 0)
    assert np.array_equal(out, np.arange(64))


def test_error_names_the_failing_program():
    kb = KernelBuilder([("out", ptr(i32))])
    pid = kb.pid(0)
    base = kb.binary("mul", pid, kb.const(16, i32))
    offs = kb.binary("add", kb.arange(16), kb.splat(base, (16,)))
    kb.store(kb.ptrs(kb.arg("out"), offs), offs)
    out = np.full(40, -1, np.int32)
    with pytest.raises(OutOfBoundsError, match=r"program \(2, 0, 0\)"):
        run(kb.module, 4, out)
    assert np.array_equal(out[:32], np.arange(32))          # programs 0 and 1 ran first


def test_masked_off_lanes_may_point_anywhere_and_read_other():
    kb = copy_kernel(128, masked=True, other=True)
    x = rng(2).standard_normal(100).astype(np.float32)
    out = np.full(128, np.nan, np.float32)
    run(kb.module, 1, x, out, 0, 100)
    assert np.array_equal(out[:100], x)
    assert (out[100:] == -7.5).all()
    kb = copy_kernel(128, masked=True)
    out[:] = np.nan
    run(kb.module, 1, x, out, 50, 100)
    assert np.array_equal(out[:50], x[50:])


def test_access_to_a_freed_buffer_is_out_of_bounds():
    kb = copy_kernel(16)
    buf = BACKEND.alloc(DEVICE, 64)
    BACKEND.copy_to_device(buf, 0, np.arange(16, dtype=np.float32))
    out = np.full(16, np.nan, np.float32)
    out_imp = BACKEND.import_array(out, DEVICE)
    args = [KernelArg(ptr(f32), PointerArg(buf)),
            KernelArg(ptr(f32), PointerArg(out_imp.buffer, out_imp.offset)),
            KernelArg(i32, 0), KernelArg(i32, 16)]
    executor = BACKEND.load(kb.module, DEVICE)
    BACKEND.launch(executor, (1, 1, 1), args, DEVICE)
    assert np.array_equal(out, np.arange(16))
    BACKEND.free(buf)
    with pytest.raises(OutOfBoundsError, match=r"element 0 of a freed 16-element \(64-byte\)"):
        BACKEND.launch(executor, (1, 1, 1), args, DEVICE)


def test_misaligned_access_is_an_error():
    kb = copy_kernel(4)
    raw = np.zeros(64, np.uint8)
    imported = BACKEND.import_array(raw, DEVICE)
    out = np.zeros(4, np.float32)
    out_imp = BACKEND.import_array(out, DEVICE)
    args = [KernelArg(ptr(f32), PointerArg(imported.buffer, 2)),
            KernelArg(ptr(f32), PointerArg(out_imp.buffer)), KernelArg(i32, 0),
            KernelArg(i32, 4)]
    with pytest.raises(LaunchError, match="misaligned load.*multiple of the 4-byte"):
        BACKEND.launch(BACKEND.load(kb.module, DEVICE), (1, 1, 1), args, DEVICE)


def test_duplicate_store_addresses_last_lane_wins():
    kb = KernelBuilder([("out", ptr(i32))])
    offs = kb.binary("rem", kb.arange(64), kb.splat(kb.const(4, i32), (64,)))
    kb.store(kb.ptrs(kb.arg("out"), offs), kb.arange(64))
    out = np.full(4, -1, np.int32)
    run(kb.module, 1, out)
    assert out.tolist() == [60, 61, 62, 63]


def test_same_array_passed_twice_aliases():
    kb = KernelBuilder([("x", ptr(i64)), ("y", ptr(i64))])
    p = kb.ptrs(kb.arg("x"), kb.arange(32))
    q = kb.ptrs(kb.arg("y"), kb.arange(32))
    kb.store(q, kb.binary("add", kb.load(p), kb.load(q)))
    x = rng(3).integers(-100, 100, 32)
    expected = 2 * x
    run(kb.module, 1, x, x)
    assert np.array_equal(x, expected)


@pytest.mark.parametrize("make_view", [lambda a: a[::2][:8], lambda a: a[::-1][::3][:8],
                                       lambda a: a[5:13]], ids=["step2", "reversed", "slice"])
def test_zero_copy_import_of_strided_and_reversed_views(make_view):
    kb = KernelBuilder([("x", ptr(f32)), ("stride", i32)])
    offs = kb.binary("mul", kb.arange(8), kb.splat(kb.arg("stride"), (8,)))
    p = kb.ptrs(kb.arg("x"), offs)
    kb.store(p, kb.binary("mul", kb.load(p), kb.splat(kb.const(10.0, f32), (8,))))
    base = rng(4).standard_normal(32).astype(np.float32)
    expected = base.copy()
    make_view(expected)[:] *= np.float32(10)
    imported = BACKEND.import_array(make_view(base), DEVICE)
    assert imported.shape == (8,)
    args = [KernelArg(ptr(f32), PointerArg(imported.buffer, imported.offset)),
            KernelArg(i32, imported.strides[0])]
    BACKEND.launch(BACKEND.load(kb.module, DEVICE), (1, 1, 1), args, DEVICE)
    assert np.array_equal(base, expected)


def test_2d_import_reports_element_strides():
    a = np.zeros((6, 10), np.int16)[1:5, ::3]
    imported = BACKEND.import_array(a, DEVICE)
    assert imported.shape == (4, 4) and imported.strides == (10, 3)
    assert imported.buffer.handle.size == imported.buffer.nbytes
    assert imported.offset == 0 and imported.buffer.nbytes == (3 * 10 + 3 * 3 + 1) * 2


def test_imported_registrations_end_with_their_buffer():
    gc.collect()
    before = BACKEND.memory.live_count
    kb = copy_kernel(8)
    for k in range(20):
        x = np.full(8, k, np.float32)
        out = np.zeros(8, np.float32)
        run(kb.module, 1, x, out, 0, 8)
        assert (out == k).all()
    del x, out
    gc.collect()
    assert BACKEND.memory.live_count == before


def test_store_into_read_only_array_is_reported():
    kb = copy_kernel(8)
    x = np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    out.flags.writeable = False
    with pytest.raises(LaunchError, match="read-only"):
        run(kb.module, 1, x, out, 0, 8)


def test_unsupported_objects_are_refused():
    assert BACKEND.import_array([1.0, 2.0], DEVICE) is None
    assert BACKEND.import_array(np.float32(1), DEVICE) is None
    assert BACKEND.import_array(np.zeros(3, np.complex64), DEVICE) is None
    data = bytearray(16)
    imported = BACKEND.import_array(data, DEVICE)
    assert imported is not None and imported.buffer.nbytes == 16


def test_alloc_copy_round_trip_and_poison():
    buf = BACKEND.alloc(DEVICE, 40)
    assert buf.address % 256 == 0 and buf.address >= 2**32
    other = BACKEND.alloc(DEVICE, 8)
    assert other.address - (buf.address + 40) >= 2**20
    host = np.empty(10, np.float32)
    BACKEND.copy_to_host(buf, 0, host)
    assert np.isnan(host).all()                            # fresh memory is poisoned
    data = rng(5).standard_normal(10).astype(np.float32)
    BACKEND.copy_to_device(buf, 0, data)
    back = np.empty(8, np.float32)
    BACKEND.copy_to_host(buf, 8, back)
    assert np.array_equal(back, data[2:])
    with pytest.raises(ValueError, match="does not fit"):
        BACKEND.copy_to_device(buf, 32, data)
    BACKEND.free(buf)
    with pytest.raises(ValueError, match="freed"):
        BACKEND.copy_to_host(buf, 0, back)
    BACKEND.free(other)


@pytest.mark.parametrize("elem,dtype", [(i1, np.bool_), (bf16, None)])
def test_bool_and_bf16_memory_round_trip(elem, dtype):
    dtype = dtype or elem.np
    kb = copy_kernel(64, elem)
    x = (rng(6).standard_normal(64) > 0).astype(dtype) if elem is i1 else \
        rng(6).standard_normal(64).astype(dtype)
    out = np.zeros(64, dtype)
    run(kb.module, 1, x, out, 0, 64)
    assert np.array_equal(out, x)


def test_scalar_load_and_store():
    kb = KernelBuilder([("x", ptr(i64)), ("out", ptr(i64))])
    value = kb.op(LoadOp, kb.arg("x")).result
    doubled = kb.binary("add", value, value)
    kb.op(StoreOp, kb.arg("out"), doubled)
    x, out = np.array([21], np.int64), np.zeros(1, np.int64)
    run(kb.module, 1, x, out)
    assert out[0] == 42
