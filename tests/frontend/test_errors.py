"""Every user error is one CompilationError: file:line, the source line with a caret, and a
plain message; no internal file name appears in it."""
import math
import pathlib

import numpy as np
import pytest

import anytile.language as tl
from anytile.errors import CompilationError
from anytile.ir import types as T
from anytile.runtime.jit import jit

from fe_kit import compile_ir, ptr

THIS_FILE = pathlib.Path(__file__)
SOURCE = THIS_FILE.read_text().splitlines()
PLAIN_GLOBAL = 3
ARRAY_GLOBAL = np.arange(4)


def compile_error(fn, constexprs=None, **arg_types) -> CompilationError:
    types = {"x_ptr": ptr(T.f32), "n": T.i32}
    types.update(arg_types)
    with pytest.raises(CompilationError) as info:
        compile_ir(fn, constexprs or {}, **types)
    return info.value


def check(err: CompilationError, message: str, code: str) -> None:
    """``err`` says ``message`` and points at the unique line of this file containing ``code``."""
    lines = [i + 1 for i, text in enumerate(SOURCE) if text.rstrip().endswith(code)]
    assert len(lines) == 1, f"{code!r} is not on exactly one line"
    text = str(err)
    assert message in err.message
    assert err.loc.file == str(THIS_FILE) and err.loc.line == lines[0]
    assert f"{THIS_FILE}:{lines[0]}:" in text
    assert code in text and "^" in text.splitlines()[2]
    assert "core/anytile" not in text and "Traceback" not in text
    # the broken rule is kept as the cause (Triton's tests read it there), bare: one line
    # above the error when printed, no compiler frames, nothing chained behind it
    cause = err.__cause__
    assert err.__suppress_context__ and cause is not None and cause.__traceback__ is None
    assert str(cause) in text and cause.__cause__ is None and cause.__context__ is None


# -- unsupported syntax ----------------------------------------------------------------------
@jit
def uses_lambda(x_ptr, n):
    f = lambda v: v + 1  # noqa: E731  lambda-here
    tl.store(x_ptr, f(1.0))


@jit
def uses_try(x_ptr, n):
    try:  # try-here
        tl.store(x_ptr, 1.0)
    except Exception:
        pass


@jit
def uses_with(x_ptr, n):
    with n:  # with-here
        pass


@jit
def uses_list_comprehension(x_ptr, n):
    values = [i for i in range(3)]  # listcomp-here
    tl.store(x_ptr, values[0])


@jit
def uses_break(x_ptr, n):
    for i in range(n):
        break  # break-here


@jit
def uses_continue(x_ptr, n):
    for i in range(n):
        continue  # continue-here


@pytest.mark.parametrize("fn,message,code", [
    (uses_lambda, "lambda expressions are not supported", "lambda-here"),
    (uses_try, "`try` statements are not supported", "try-here"),
    (uses_with, "`with` statements are not supported", "with-here"),
    (uses_list_comprehension, "list comprehensions are not supported", "listcomp-here"),
    (uses_break, "`break` is not supported", "break-here"),
    (uses_continue, "`continue` is not supported", "continue-here"),
])
def test_unsupported_syntax(fn, message, code):
    check(compile_error(fn), message, code)


# -- shapes ----------------------------------------------------------------------------------
@jit
def adds_mismatched_tiles(x_ptr, n):
    a = tl.arange(0, 128) + tl.arange(0, 256)  # mismatch-here
    tl.store(x_ptr + a, 1.0)


@jit
def dot_mismatched_k(x_ptr, n):
    a = tl.zeros([32, 16], dtype=tl.float32)
    b = tl.zeros([32, 16], dtype=tl.float32)
    c = tl.dot(a, b)  # dot-k-here
    tl.store(x_ptr, tl.sum(tl.sum(c, 1), 0))


def test_shape_mismatch_in_arithmetic():
    check(compile_error(adds_mismatched_tiles),
          "shape mismatch: cannot broadcast tiles of shapes [128] and [256] (dimension 0: "
          "128 vs 256)", "mismatch-here")


def test_dot_with_mismatched_inner_dimension():
    check(compile_error(dot_mismatched_k),
          "shape mismatch in tl.dot: [32, 16] @ [32, 16] (the inner dimensions K differ: "
          "16 vs 32)", "dot-k-here")


# -- compile-time values ---------------------------------------------------------------------
@jit
def arange_runtime_size(x_ptr, n):
    offs = tl.arange(0, n)  # runtime-arange-here
    tl.store(x_ptr + offs, 1.0)


@jit
def arange_not_power_of_two(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)  # pow2-here
    tl.store(x_ptr + offs, 1.0)


@jit
def static_range_runtime_bound(x_ptr, n):
    for i in tl.static_range(n + 1):  # static-range-here
        tl.store(x_ptr + i, 1.0)


def test_runtime_value_where_a_constexpr_is_needed():
    check(compile_error(arange_runtime_size),
          "`n` must be a tl.constexpr because tl.arange needs a static size",
          "runtime-arange-here")


@jit
def zeros_runtime_shape(x_ptr, n):
    acc = tl.zeros([16, n], dtype=tl.float32)  # runtime-shape-here
    tl.store(x_ptr, tl.sum(acc))


@jit
def reshape_runtime_shape(x_ptr, n):
    acc = tl.reshape(tl.zeros([16], dtype=tl.float32), 4, n // 4)  # runtime-reshape-here
    tl.store(x_ptr, tl.sum(acc))


def test_runtime_tile_shape_names_the_offending_element():
    check(compile_error(zeros_runtime_shape),
          "`n` must be a tl.constexpr because tile shapes must be known at compile time",
          "runtime-shape-here")
    check(compile_error(reshape_runtime_shape),
          "`n // 4` must be a tl.constexpr because tile shapes must be known at compile time",
          "runtime-reshape-here")


def test_runtime_bound_of_static_range_names_the_expression():
    check(compile_error(static_range_runtime_bound),
          "`n + 1` must be a tl.constexpr because tl.static_range is unrolled at compile time",
          "static-range-here")


def test_arange_size_must_be_a_power_of_two():
    check(compile_error(arange_not_power_of_two, {"BLOCK": 100}),
          "tl.arange(0, 100) has 100 elements, which is not a power of 2", "pow2-here")


@jit
def expand_twice_at_one_axis(x_ptr, n):
    tl.expand_dims(tl.arange(0, 8), (0, 0))  # dup-axes-here


@jit
def expand_past_the_rank(x_ptr, n):
    tl.expand_dims(tl.arange(0, 8), -3)  # bad-axis-here


def test_expand_dims_axes_are_checked():
    """Triton's rules and words: a repeated axis is refused (not two new dimensions), and
    an axis outside the new rank names the range."""
    check(compile_error(expand_twice_at_one_axis),
          "duplicate axes, normalized axes = [0, 0]", "dup-axes-here")
    check(compile_error(expand_past_the_rank),
          "invalid axis -3 for a tile of rank 2 (expected -2 <= axis < 2)", "bad-axis-here")


# -- arity -----------------------------------------------------------------------------------
@jit
def scale(x, factor):
    return x * factor


@jit
def builtin_too_few(x_ptr, n):
    offs = tl.arange(0)  # builtin-too-few-here
    tl.store(x_ptr + offs, 1.0)


@jit
def builtin_too_many(x_ptr, n):
    pid = tl.program_id(0, 1)  # builtin-too-many-here
    tl.store(x_ptr + pid, 1.0)


@jit
def jit_too_many(x_ptr, n):
    tl.store(x_ptr, scale(n, 2, 3))  # jit-too-many-here


@jit
def jit_too_few(x_ptr, n):
    tl.store(x_ptr, scale(n))  # jit-too-few-here


@pytest.mark.parametrize("fn,message,code", [
    (builtin_too_few, "tl.arange(): missing a required argument: 'end'", "builtin-too-few-here"),
    (builtin_too_many, "tl.program_id(): too many positional arguments", "builtin-too-many-here"),
    (jit_too_many, "scale(): too many positional arguments", "jit-too-many-here"),
    (jit_too_few, "scale(): missing a required argument: 'factor'", "jit-too-few-here"),
])
def test_wrong_number_of_arguments(fn, message, code):
    check(compile_error(fn), message, code)


# -- names -----------------------------------------------------------------------------------
@jit
def undefined_name(x_ptr, n):
    tl.store(x_ptr, not_defined_anywhere)  # noqa: F821  undefined-here


@jit
def plain_global(x_ptr, n):
    tl.store(x_ptr, n * PLAIN_GLOBAL)  # plain-global-here


def test_undefined_name():
    check(compile_error(undefined_name), "name `not_defined_anywhere` is not defined",
          "undefined-here")


def test_non_constexpr_global_is_rejected_with_a_fix():
    check(compile_error(plain_global),
          "global `PLAIN_GLOBAL` (int 3) cannot be used inside a @jit function: only "
          "tl.constexpr globals are allowed. Define it as `PLAIN_GLOBAL = tl.constexpr(3)`",
          "plain-global-here")


@jit
def array_global(x_ptr, n):
    tl.store(x_ptr, n * ARRAY_GLOBAL[0])  # array-global-here


def test_array_global_gets_advice_that_works():
    check(compile_error(array_global),
          "global `ARRAY_GLOBAL` is an array (ndarray of shape (4,)): a kernel cannot read host "
          "arrays from its globals. Pass it as an argument", "array-global-here")


@jit
def needs_static_size(x_ptr, N: tl.constexpr):
    return tl.load(x_ptr + tl.arange(0, N))


@jit
def passes_runtime_to_constexpr(x_ptr, n):
    tl.store(x_ptr + tl.arange(0, 16), needs_static_size(x_ptr, n))  # runtime-to-constexpr-here


def test_runtime_value_for_a_constexpr_parameter_blames_the_call():
    err = compile_error(passes_runtime_to_constexpr)
    check(err, "needs_static_size() needs compile-time values for `N` (annotated "
               "tl.constexpr), but this call passes run-time values", "runtime-to-constexpr-here")
    assert "tl.arange needs a static size" in err.message


# -- dtypes ----------------------------------------------------------------------------------
@jit
def bitwise_on_floats(x_ptr, n):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x | 1)  # bitwise-float-here


@jit
def exp_of_pointer(x_ptr, n):
    tl.store(x_ptr, tl.exp(x_ptr))  # exp-pointer-here


@jit
def exp_of_int(x_ptr, n):
    tl.store(x_ptr, tl.exp(n))  # exp-int-here


@jit
def load_from_int(x_ptr, n):
    tl.store(x_ptr, tl.load(n))  # load-int-here


@jit
def float_mask(x_ptr, n):
    x = tl.load(x_ptr, mask=1.5)  # float-mask-here
    tl.store(x_ptr, x)


@pytest.mark.parametrize("fn,message,code", [
    (bitwise_on_floats, "invalid operands of type a tensor of tl.float32 and ",
     "bitwise-float-here"),
    (exp_of_pointer, "tl.exp needs a floating-point input, got "
                     "tl.pointer_type(tl.float32)", "exp-pointer-here"),
    (exp_of_int, "tl.exp needs a floating-point input, got tl.int32", "exp-int-here"),
    (load_from_int, "tl.load needs a pointer (or a tile of pointers), got tl.int32",
     "load-int-here"),
    (float_mask, "the mask of tl.load must be boolean (int1), got tl.float32", "float-mask-here"),
])
def test_dtype_not_allowed(fn, message, code):
    check(compile_error(fn), message, code)


# -- control flow ----------------------------------------------------------------------------
@jit
def loop_changes_type(x_ptr, n):
    acc = tl.zeros([16], dtype=tl.float32)
    for i in range(n):  # loop-type-here
        acc = acc.to(tl.float16)
    tl.store(x_ptr + tl.arange(0, 16), acc)


@jit
def loop_changes_shape(x_ptr, n):
    acc = 0.0
    for i in range(n):  # loop-shape-here
        acc += tl.load(x_ptr + tl.arange(0, 16))
    tl.store(x_ptr, acc)


@jit
def branches_disagree(x_ptr, n):
    if n > 0:  # branch-type-here
        v = tl.zeros([16], dtype=tl.float32)
    else:
        v = tl.zeros([16], dtype=tl.int32)
    tl.store(x_ptr + tl.arange(0, 16), v)


@jit
def return_in_loop(x_ptr, n):
    for i in range(n):
        return  # loop-return-here


@jit
def tile_condition(x_ptr, n):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if x > 0:  # tile-cond-here
        tl.store(x_ptr, 1.0)


@pytest.mark.parametrize("fn,message,code", [
    (loop_changes_type, "the type of loop-carried variable `acc` changes inside the loop: it "
                        "is tile<16xf32> before the loop but tile<16xf16> at the end of the body",
     "loop-type-here"),
    (loop_changes_shape, "the type of loop-carried variable `acc` changes inside the loop: it "
                         "is f32 before the loop but tile<16xf32>", "loop-shape-here"),
    (branches_disagree, "`v` is tile<16xf32> in the `then` branch but tile<16xi32> in the "
                        "`else` branch", "branch-type-here"),
    (return_in_loop, "`return` inside a loop", "loop-return-here"),
    (tile_condition, "the condition of an `if` must be a scalar, got a tile of shape [16]; "
                     "use tl.where", "tile-cond-here"),
])
def test_control_flow_errors(fn, message, code):
    check(compile_error(fn), message, code)


# -- errors inside called functions point at the innermost user line --------------------------
@jit
def inner_bad(x):
    return x + tl.arange(0, 3)  # inner-bad-here


@jit
def middle(x):
    return inner_bad(x) * 2


@jit
def calls_bad_helper(x_ptr, n):
    tl.store(x_ptr, middle(n))


def test_nested_jit_error_points_at_the_innermost_line():
    err = compile_error(calls_bad_helper)
    check(err, "tl.arange(0, 3) has 3 elements, which is not a power of 2", "inner-bad-here")
    assert err.loc.func == "inner_bad"


def test_static_assert_failure():
    @jit
    def checks(x_ptr, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of 32")  # static-assert-here
        tl.store(x_ptr, 1.0)

    err = compile_error(checks, {"BLOCK": 48})
    check(err, "static_assert failed: BLOCK must be a multiple of 32", "static-assert-here")


def _twice(v):
    return v * 2


@jit
def host_functions_on_tensors(x_ptr, n, WHICH: tl.constexpr):
    x = tl.load(x_ptr)
    if WHICH == 0:
        y = np.exp(x)                                   # host-exp
    elif WHICH == 1:
        y = math.exp(x)                                 # host-math-exp
    elif WHICH == 2:
        y = np.log10(x)                                 # host-log10
    elif WHICH == 3:
        y = np.float32(x)                               # host-cast
    elif WHICH == 4:
        y = np.sinc(x)                                  # host-sinc
    else:
        y = _twice(x)                                   # user-function
    tl.store(x_ptr, y + np.exp(2.0))


@pytest.mark.parametrize("which, message, code", [
    (0, "`np.exp` is a NumPy function: it runs while the kernel compiles and only takes "
        "compile-time values, but it was given a tensor; in a kernel use `tl.exp` instead",
     "# host-exp"),
    (1, "`math.exp` is a function of Python's math module: it runs while the kernel "
        "compiles", "# host-math-exp"),
    (2, "in a kernel use `tl.extra.libdevice.log10` instead", "# host-log10"),
    (3, "in a kernel use `x.to(tl.float32)` instead", "# host-cast"),
    (4, "anytile.language has no function of that name", "# host-sinc"),
    (5, "`_twice` is a plain Python function, so it only takes compile-time values, but it "
        "was given a tensor; decorate it with @jit", "# user-function"),
], ids=["np.exp", "math.exp", "np.log10", "np.float32", "np.sinc", "user-function"])
def test_host_functions_on_tensors_point_at_the_tl_equivalent(which, message, code):
    check(compile_error(host_functions_on_tensors, {"WHICH": which}), message, code)


def test_every_tl_equivalent_exists():
    from anytile.frontend.names import TL_EQUIVALENTS
    for host_name, spelled in TL_EQUIVALENTS.items():
        target = spelled.removeprefix("x.to(").removesuffix(")")
        obj = tl
        for part in target.split(".")[1:]:
            obj = getattr(obj, part)            # raises if the table names a missing function
        assert obj is not None, host_name
