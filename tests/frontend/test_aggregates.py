"""Tuples and block pointers as loop-carried values, ``if`` results and helper arguments: they
travel as their leaves, and the IR round-trips."""
import pytest

import anytile.language as tl
from anytile.errors import CompilationError
from anytile.ir import types as T
from anytile.runtime.jit import jit

from fe_kit import compile_ir, kernel_ops, names, of_kind, ptr

F32P = ptr(T.f32)


@jit
def carried_tuple(x_ptr, n):
    pair = (0, 1.0)
    for i in range(n):
        pair = (pair[0] + i, pair[1] * 2.0)
    tl.store(x_ptr + pair[0], pair[1])


def test_tuple_is_carried_as_its_leaves():
    module = compile_ir(carried_tuple, x_ptr=F32P, n=T.i32)
    (loop,) = of_kind(kernel_ops(module), "for")
    assert [str(v.type) for v in loop.results] == ["i32", "f32"]


@jit
def _load_block(p):
    return tl.load(p, boundary_check=(0,))


@jit
def block_ptr_through_if_and_call(x_ptr, n, FLAG: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (16,), (0,))
    if n > 3:
        p = tl.advance(p, (16,))
    tl.store(x_ptr + tl.arange(0, 16), _load_block(p))


def test_block_pointer_through_if_and_helper_call():
    module = compile_ir(block_ptr_through_if_and_call, {"FLAG": 1}, x_ptr=F32P, n=T.i32)
    (branch,) = of_kind(kernel_ops(module), "if")
    assert len(branch.results) == 4  # base, shape, stride, offset
    assert "call" in names(kernel_ops(module))


@jit
def changes_structure(x_ptr, n):
    pair = (x_ptr, 0)
    for i in range(n):
        pair = (x_ptr, 0, 1)
    tl.store(pair[0], 1.0)


def test_loop_carried_structure_change_is_an_error():
    with pytest.raises(CompilationError, match="changes its kind inside the loop"):
        compile_ir(changes_structure, x_ptr=F32P, n=T.i32)


@jit
def language_type(x_ptr):
    y = tl.load(x_ptr + tl.arange(0, 16))
    tl.static_assert(x_ptr.type.element_ty == tl.float32)
    tl.static_assert(y.type.shape == (16,) and y.type.element_ty == tl.float32)
    tl.static_assert(x_ptr.dtype.element_ty != tl.float8e5)
    tl.store(x_ptr + tl.arange(0, 16), y)


def test_x_type_is_the_language_type():
    compile_ir(language_type, x_ptr=F32P)


@jit
def makes_fp8(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to(tl.float8e4b15))


def test_unsupported_fp8_dtypes_are_named_but_not_usable():
    with pytest.raises(CompilationError, match="tl.float8e4b15 is a Triton dtype that anytile "
                                               "does not support"):
        compile_ir(makes_fp8, x_ptr=F32P)
