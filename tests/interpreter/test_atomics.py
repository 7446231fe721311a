"""Atomics: contention within a tile and across programs, old values, masks, CAS."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from anytile.errors import OutOfBoundsError
from anytile.ir import AddPtrOp, AtomicCASOp, AtomicRMWOp, StoreOp
from anytile.ir.types import f32, from_numpy, i32
from anytile.backend import KernelArg, PointerArg
from anytile.interpreter import atomics as interp_atomics
from interp_kit import BACKEND, DEVICE, KernelBuilder, ptr, rng, run


def histogram_kernel(block: int):
    """Program p adds 1 to ``hist[x[p*block + i]]`` for each of its ``block`` elements."""
    kb = KernelBuilder([("x", ptr(i32)), ("hist", ptr(i32)), ("old", ptr(i32))])
    base = kb.binary("mul", kb.pid(0), kb.const(block, i32))
    offs = kb.binary("add", kb.splat(base, (block,)), kb.arange(block))
    bins = kb.load(kb.ptrs(kb.arg("x"), offs))
    ones = kb.splat(kb.const(1, i32), (block,))
    old = kb.op(AtomicRMWOp, "add", kb.ptrs(kb.arg("hist"), bins), ones).result
    kb.store(kb.ptrs(kb.arg("old"), offs), old)
    return kb.module


def test_histogram_with_contention_inside_and_across_programs():
    x = rng(1).integers(0, 10, 64 * 32).astype(np.int32)
    hist, old = np.zeros(10, np.int32), np.full(x.size, -1, np.int32)
    run(histogram_kernel(32), 64, x, hist, old)
    assert np.array_equal(hist, np.bincount(x, minlength=10))
    # each lane saw the count of earlier lanes (programs in order, lanes row-major)
    seen = np.zeros(10, np.int32)
    expected_old = []
    for b in x:
        expected_old.append(seen[b])
        seen[b] += 1
    assert old.tolist() == expected_old


def rmw_kernel(kind: str, dtype, n: int, masked: bool = False):
    """Program p applies ``kind`` with ``v[p*n + i]`` to ``target[i % 4]``; lanes whose
    value is negative are masked off when ``masked``."""
    elem = from_numpy(dtype)
    kb = KernelBuilder([("v", ptr(elem)), ("target", ptr(elem)), ("old", ptr(elem))])
    base = kb.binary("mul", kb.pid(0), kb.const(n, i32))
    offs = kb.binary("add", kb.splat(base, (n,)), kb.arange(n))
    values = kb.load(kb.ptrs(kb.arg("v"), offs))
    slot = kb.binary("rem", kb.arange(n), kb.splat(kb.const(4, i32), (n,)))
    mask = kb.compare("ge", values, kb.splat(kb.const(0, elem), (n,))) if masked else None
    old = kb.op(AtomicRMWOp, kind, kb.ptrs(kb.arg("target"), slot), values, mask).result
    kb.store(kb.ptrs(kb.arg("old"), offs), old)
    return kb.module


@pytest.mark.parametrize("kind,fold", [
    ("max", max), ("min", min), ("and", lambda a, b: a & b), ("or", lambda a, b: a | b),
    ("xor", lambda a, b: a ^ b), ("xchg", lambda a, b: b), ("add", lambda a, b: a + b)])
def test_integer_rmw_kinds_serialise_in_lane_then_program_order(kind, fold):
    v = rng(2).integers(-1000, 1000, 8 * 16).astype(np.int32)
    target = rng(3).integers(-1000, 1000, 4).astype(np.int32)
    old = np.zeros_like(v)
    state = [int(t) for t in target]
    expected_old = []
    for i, value in enumerate(v):
        expected_old.append(state[i % 16 % 4])
        state[i % 16 % 4] = fold(state[i % 16 % 4], int(value))
    run(rmw_kernel(kind, np.int32, 16), 8, v, target, old)
    assert target.tolist() == state
    assert old.tolist() == expected_old


def test_masked_lanes_are_not_applied():
    v = rng(4).integers(-50, 50, 4 * 16).astype(np.int32)
    target, old = np.zeros(4, np.int32), np.full(v.size, -1, np.int32)
    run(rmw_kernel("add", np.int32, 16, masked=True), 4, v, target, old)
    kept = np.where(v >= 0, v, 0)
    assert target.tolist() == [int(kept[i::4].sum()) for i in range(4)]
    assert (old[v < 0] == 0).all()                          # documented: 0 where masked


def test_float_atomic_add_matches_sequential_f32_sum():
    v = rng(5).standard_normal(16 * 32).astype(np.float32)
    target, old = np.zeros(4, np.float32), np.zeros_like(v)
    run(rmw_kernel("add", np.float32, 32), 16, v, target, old)
    expected = np.zeros(4, np.float32)
    for i, value in enumerate(v):
        expected[i % 32 % 4] += value
    assert np.array_equal(target, expected)
    np.testing.assert_allclose(target, [v[i::4].astype(np.float64).sum() for i in range(4)],
                               rtol=1e-4, atol=1e-4)


def test_compare_and_swap_per_lane_and_across_programs():
    kb = KernelBuilder([("lock", ptr(i32)), ("old", ptr(i32)), ("cells", ptr(f32))])
    pid = kb.pid(0)
    prev = kb.op(AtomicCASOp, kb.arg("lock"), pid, kb.binary("add", pid, kb.const(1, i32))).result
    kb.op(StoreOp,
          kb.op(AddPtrOp, kb.arg("old"), pid).result, prev)
    cells = kb.ptrs(kb.arg("cells"), kb.arange(4))
    zero = kb.splat(kb.const(0.0, f32), (4,))
    kb.op(AtomicCASOp, cells, zero, kb.splat(kb.cast(pid, f32), (4,)))
    lock, old = np.zeros(1, np.int32), np.full(6, -1, np.int32)
    cells_np = np.array([0.0, -0.0, 1.0, 0.0], np.float32)
    run(kb.module, 6, lock, old, cells_np)
    assert lock[0] == 6 and old.tolist() == list(range(6))
    # program 0 swapped +0.0 for 0.0 (no visible change); program 1 then found +0.0 and
    # wrote 1.0; -0.0 never equals +0.0 bitwise, so that cell keeps its sign bit
    assert cells_np.tolist() == [1.0, 0.0, 1.0, 1.0]
    assert np.signbit(cells_np[1])


def test_out_of_bounds_atomic_is_reported():
    v = np.ones(16, np.int32)
    target, old = np.zeros(3, np.int32), np.zeros(16, np.int32)
    with pytest.raises(OutOfBoundsError, match="out-of-bounds atomic add.*element 3 of a "
                                               r"3-element \(12-byte\)"):
        run(rmw_kernel("add", np.int32, 16), 1, v, target, old)
    assert (target == 0).all()


def counting_kernel(n: int):
    """Every program adds 1 to each of ``counter[0:n]``."""
    kb = KernelBuilder([("counter", ptr(i32))])
    ones = kb.splat(kb.const(1, i32), (n,))
    kb.op(AtomicRMWOp, "add", kb.ptrs(kb.arg("counter"), kb.arange(n)), ones)
    return kb.module


class _ContendedLock:
    """A lock that sets ``contended`` when a thread finds it held (and then waits for it)."""

    def __init__(self, contended: threading.Event) -> None:
        self.inner, self.contended = threading.Lock(), contended

    def __enter__(self) -> None:
        if not self.inner.acquire(blocking=False):
            self.contended.set()
            self.inner.acquire()

    def __exit__(self, *exc: object) -> None:
        self.inner.release()


def test_atomics_of_two_launches_running_at_once_lose_no_update(monkeypatch):
    # two modules (two executors: nothing serialises their launches) add into one array from
    # two threads.  Launch A stops inside its first atomic, between its read and its write,
    # until launch B has run to its end or has found the atomics held (then it waits).
    n, programs = 16, 50
    a_inside, go_on = threading.Event(), threading.Event()
    monkeypatch.setattr(interp_atomics, "ATOMICS_LOCK", _ContendedLock(go_on), raising=False)
    real_combine = interp_atomics.rmw_combine
    paused: list[int] = []

    def pausing_combine(kind, elem):
        combine = real_combine(kind, elem)

        def first_pauses(old, value):
            if not paused:
                paused.append(threading.get_ident())
                a_inside.set()
                assert go_on.wait(timeout=600)       # a hang guard only
            return combine(old, value)
        return first_pauses
    monkeypatch.setattr(interp_atomics, "rmw_combine", pausing_combine)

    counter = rng(7).integers(-1000, 1000, n).astype(np.int32)
    expected = (counter + 2 * programs).tolist()
    imported = BACKEND.import_array(counter, DEVICE)
    modules = [counting_kernel(n) for _ in range(2)]
    executors = [BACKEND.load(m, DEVICE) for m in modules]
    errors: list[BaseException] = []

    def launch(i: int) -> None:
        arg = KernelArg(modules[i].kernel.args[0].type,
                        PointerArg(imported.buffer, imported.offset))
        try:
            BACKEND.launch(executors[i], (programs, 1, 1), [arg], DEVICE)
        except BaseException as exc:   # reported by the main thread
            errors.append(exc)
        finally:
            go_on.set()

    a = threading.Thread(target=launch, args=(0,))
    a.start()
    assert a_inside.wait(timeout=600)             # a hang guard only
    b = threading.Thread(target=launch, args=(1,))
    b.start()
    for t in (a, b):
        t.join(timeout=600)                       # a hang guard only
    assert not a.is_alive() and not b.is_alive() and not errors
    assert counter.tolist() == expected
