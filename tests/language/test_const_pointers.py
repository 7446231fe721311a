"""``tl.const`` parameters (Triton's read-only pointers): loads through them work on every
device; a store or atomic through one, or an ``if`` merging one with a plain pointer at run
time, is a compile error naming the problem; the IR text keeps the ``const``."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.ir import types as irt


@at.jit
def copy_kernel(src: tl.const, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) * 2, mask=offs < n)


def test_loads_through_const_pointers(device, rng):
    x = rng.standard_normal(100).astype(np.float32)
    out = at.asarray(np.zeros(100, np.float32), device=device)
    copy_kernel[(1,)](at.asarray(x, device=device), out, 100, BLOCK=128)
    np.testing.assert_array_equal(out.numpy(), x * 2)


@at.jit
def store_to_const_kernel(src: tl.const, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(src + offs, 1.0)


@at.jit
def atomic_to_const_kernel(src: tl.const):
    tl.atomic_add(src, 1.0)


@at.jit(do_not_specialize=["choose"])
def merge_kernel(src: tl.const, dst, choose, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if choose:
        p = src
    else:
        p = dst
    tl.store(dst + offs, tl.load(p + offs))


@at.jit
def static_choice_kernel(src: tl.const, dst, CHOOSE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = src if CHOOSE else dst
    tl.store(dst + offs, tl.load(p + offs) + 1)


def test_writing_through_a_const_pointer_is_a_compile_error():
    x = at.asarray(np.zeros(16, np.float32))
    with pytest.raises(at.CompilationError, match="cannot write through a pointer to const"):
        store_to_const_kernel[(1,)](x, BLOCK=16)
    with pytest.raises(at.CompilationError, match="tl.atomic_add: cannot write through"):
        atomic_to_const_kernel[(1,)](x)


def test_a_const_pointer_does_not_merge_with_a_plain_one():
    x, y = at.asarray(np.ones(16, np.float32)), at.asarray(np.zeros(16, np.float32))
    with pytest.raises(at.CompilationError, match=r"ptr<f32, const> in the `then` branch but "
                                                  r"ptr<f32> in the `else`"):
        merge_kernel[(1,)](x, y, 1, BLOCK=16)
    static_choice_kernel[(1,)](x, y, CHOOSE=True, BLOCK=16)     # chosen at compile time: fine
    np.testing.assert_array_equal(y.numpy(), np.full(16, 2.0, np.float32))


def test_const_pointer_types_print_and_parse():
    t = irt.TileType((128,), irt.PointerType(irt.f32, const=True))
    assert str(t) == "tile<128xptr<f32, const>>"
    assert irt.parse_type(str(t)) == t
    assert tl.pointer_type(tl.float32, const=True) != tl.pointer_type(tl.float32)
    module = at.compile(copy_kernel, target="interpreter:reference",
                        signature={"src": "*fp32", "dst": "*fp32", "n": "i32"},
                        constexprs={"BLOCK": 128}).module
    assert "ptr<f32, const>" in str(module)
