"""Tuples and block pointers as loop-carried values, ``if`` results and helper arguments: they
travel as their leaves, and the IR round-trips."""
import pytest

import anytile.language as tl
from anytile.errors import CompilationError
from anytile.ir import types as T
from anytile.runtime.jit import jit

from fe_kit import all_ops, compile_ir, kernel_ops, names, of_kind, ptr

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
    tl.store(x_ptr, tl.load(x_ptr).to(tl.float8e4b8))


def test_unsupported_fp8_dtypes_are_named_but_not_usable():
    with pytest.raises(CompilationError, match="tl.float8e4b8 is a Triton dtype that anytile "
                                               "does not support"):
        compile_ir(makes_fp8, x_ptr=F32P)


@jit
def _descriptor_of(x, shape, strides, block_shape):
    if isinstance(x, tl.tensor_descriptor):
        return x
    else:
        return tl.make_tensor_descriptor(x, shape, strides, block_shape)


@jit
def _moved_on(p, step):
    return tl.advance(p, (step,)), step + 1


@jit
def descriptors_and_block_pointers_from_helpers(x_ptr, n):
    made = _descriptor_of(x_ptr, [n, 16], [16, 1], [4, 16])     # made by the helper
    same = _descriptor_of(made, [n, 16], [16, 1], [8, 16])        # given back as it is
    tl.static_assert(isinstance(same, tl.tensor_descriptor) and same.block_shape == [4, 16])
    p, nxt = _moved_on(tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (16,), (0,)), 16)
    same.store([0, 0], made.load([1, 0]) + tl.load(p, boundary_check=(0,))[None, :] + nxt)


def test_helpers_take_and_return_descriptors_and_block_pointers():
    module = compile_ir(descriptors_and_block_pointers_from_helpers, x_ptr=F32P, n=T.i32)
    helpers = sorted(f.name.split("__")[0] for f in module.functions.values() if not f.is_kernel)
    assert helpers == ["_descriptor_of", "_descriptor_of", "_moved_on"]
    made = next(f for f in module.functions.values() if f.name.startswith("_descriptor_of")
                and f.result_types)
    # its leaves come back as results: the base, two sizes and two strides
    assert [str(t) for t in made.result_types] == ["ptr<f32>", "i64", "i64", "i64", "i64"]


@jit
def _pick_descriptor(x_ptr, n, wide):
    if wide > 0:
        return tl.make_tensor_descriptor(x_ptr, [n, 16], [16, 1], [4, 16])
    return tl.make_tensor_descriptor(x_ptr, [n, 8], [8, 1], [4, 16])


@jit
def descriptor_chosen_at_run_time(x_ptr, n, wide):
    d = _pick_descriptor(x_ptr, n, wide)
    d.store([0, 0], d.load([1, 0]) * 2.0)


def test_a_helper_returns_a_descriptor_chosen_under_a_run_time_condition():
    module = compile_ir(descriptor_chosen_at_run_time, x_ptr=F32P, n=T.i32, wide=T.i32)
    (branch,) = of_kind(list(all_ops(module)), "if")
    assert len(branch.results) == 5


@jit
def _descriptor_or_number(x_ptr, n):
    if n > 0:
        return tl.make_tensor_descriptor(x_ptr, [n, 16], [16, 1], [4, 16])
    return 0


@jit
def descriptor_or_number(x_ptr, n):
    _descriptor_or_number(x_ptr, n)


def test_a_descriptor_in_one_branch_and_a_number_in_the_other_is_named():
    with pytest.raises(CompilationError, match="or values of different kinds"):
        compile_ir(descriptor_or_number, x_ptr=F32P, n=T.i32)


@jit
def _returns_a_dtype(x_ptr):
    return tl.float32


@jit
def returns_a_dtype(x_ptr):
    _returns_a_dtype(x_ptr)


def test_a_helper_returning_a_dtype_says_what_it_can_return():
    with pytest.raises(CompilationError, match="can return tensors, numbers, tensor "
                                               "descriptors, block pointers or tuples"):
        compile_ir(returns_a_dtype, x_ptr=F32P)


@jit
def triton_isinstance_checks(x_ptr, n, W: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    d = tl.make_tensor_descriptor(x_ptr, [n, 16], [16, 1], [4, 16])
    pair = tl.tuple([x, W])
    tl.static_assert(isinstance(pair, tl.tuple) and not isinstance(x, tl.tuple))
    tl.static_assert(isinstance(pair.type, tl.tuple_type) and len(pair.type) == 2)
    tl.static_assert(isinstance(W.type, tl.constexpr_type) and W.type == tl.constexpr_type(3))
    tl.static_assert(W.type.is_int() and W.type.scalar == tl.int32)   # a number's natural type
    tl.static_assert(isinstance(x, tl.base_value) and isinstance(d, tl.base_value))
    tl.static_assert(isinstance(W, tl.base_value) and isinstance(pair, tl.base_value))
    tl.static_assert(isinstance(d, tl.tensor_descriptor_base))
    tl.static_assert(not isinstance(x, tl.tensor_descriptor_base))
    tl.static_assert(isinstance(x.dtype, tl.base_type) and isinstance(x.type, tl.base_type))
    tl.static_assert(isinstance(W.type, tl.base_type) and not isinstance(x, tl.base_type))
    tl.static_assert(isinstance(x.type, tl.block_type) and isinstance(x_ptr.dtype, tl.pointer_type))
    tl.static_assert(not isinstance(0, tl.tensor) and isinstance(n, tl.tensor))
    tl.store(x_ptr + tl.arange(0, 16), x)


def test_isinstance_against_tritons_language_classes():
    compile_ir(triton_isinstance_checks, {"W": 3}, x_ptr=F32P, n=T.i32)
