"""Launch errors a user can act on: each names the argument, grid or option and what was
expected, and its traceback shows the user's call and at most one anytile frame (the generated
launcher), on the fast path, the general path (``run``/``warmup``) and for NumPy arguments."""
import traceback

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import LaunchArgumentError, LaunchValueError


@at.jit
def scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * factor, mask=offs < n)


def _anytile_frames(exc):
    """The frames of ``exc``'s traceback that are anytile's own code (not this test)."""
    frames = traceback.extract_tb(exc.__traceback__)
    assert frames[0].filename == __file__, frames
    return [f for f in frames[1:] if f.filename != __file__]


@pytest.fixture
def arrays():
    x = at.asarray(np.arange(16, dtype=np.float32), device="interpreter")
    return x, at.empty_like(x)


CASES = [
    # (grid, args, options, error type, message)
    ((1,), ("two",), {}, LaunchArgumentError, "argument 'factor' is a str"),
    ((2.5,), (1.0,), {}, LaunchArgumentError, r"axis 0 is 2\.5 \(float\)"),
    (lambda meta: (16 / 8,), (1.0,), {}, LaunchArgumentError, r"grid callable's result .* axis 0 is 2\.0"),
    (lambda meta: "abc", (1.0,), {}, LaunchArgumentError, "grid callable's result must be 1 to 3 ints"),
    (lambda meta: None, (1.0,), {}, LaunchArgumentError, "got None"),
    ((1, 1, 1, 1), (1.0,), {}, LaunchValueError, "1 to 3 non-negative ints, got 4"),
    ((-1,), (1.0,), {}, LaunchValueError, "non-negative"),
    ((2**31,), (1.0,), {}, LaunchValueError, "too large"),
    ((1,), (1.0,), {"num_warps": 3}, LaunchValueError, "num_warps=3: expected a power of 2"),
    ((1,), (1.0,), {"num_warps": 2.0}, LaunchValueError, "num_warps=2.0: expected a positive int"),
    ((1,), (1.0,), {"num_wraps": 4}, LaunchArgumentError, r"no option\(s\) \['num_wraps'\]"),
    ((1,), (1.0,), {"BLOCK": [16]}, LaunchArgumentError, "constexpr 'BLOCK' must be hashable"),
]


@pytest.mark.parametrize("grid, args, options, error, message", CASES)
@pytest.mark.parametrize("path", ["fast", "run"])
def test_launch_errors(arrays, grid, args, options, error, message, path):
    x, out = arrays
    options = {"BLOCK": 16, **options}
    with pytest.raises(error, match=message) as info:
        if path == "fast":
            scale[grid](x, out, 16, *args, **options)
        else:
            scale.run(x, out, 16, *args, grid=grid, **options)
    assert len(_anytile_frames(info.value)) <= 1
    assert isinstance(info.value, TypeError if error is LaunchArgumentError else ValueError)


@pytest.mark.parametrize("call", ["run", "warmup"])
def test_arguments_that_do_not_bind_are_named_without_internal_frames(arrays, call):
    x, out = arrays
    with pytest.raises(TypeError, match=r"scale\(\) missing 1 required positional argument: "
                                        r"'factor'") as info:
        getattr(scale, call)(x, out, 16, grid=(1,), BLOCK=16)
    assert len(_anytile_frames(info.value)) <= 1
    with pytest.raises(TypeError, match=r"scale\(\) got multiple values for argument 'n'"):
        getattr(scale, call)(x, out, 16, 2.0, n=16, grid=(1,), BLOCK=16)


def test_an_int_too_large_names_the_argument(arrays):
    x, out = arrays
    with pytest.raises(LaunchValueError, match="argument 'n' is 36893488147419103232") as info:
        scale[(1,)](x, out, 2**65, 1.0, BLOCK=16)
    assert len(_anytile_frames(info.value)) <= 1


def test_an_unsupported_numpy_dtype_names_the_argument():
    x = np.arange(16, dtype=np.complex64)
    with pytest.raises(LaunchArgumentError, match="argument 'x_ptr' cannot be passed") as info:
        scale[(1,)](x, np.empty(16, np.float32), 16, 1.0, BLOCK=16, device="interpreter")
    assert len(_anytile_frames(info.value)) <= 1


def test_numpy_grid_sizes_are_ints(arrays):
    x, out = arrays
    scale[(np.int64(1),)](x, out, 16, 2.0, BLOCK=16)
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(16, dtype=np.float32))


@pytest.mark.parametrize("view", [lambda a: a[::2], lambda a: a[::-1], lambda a: a.reshape(4, 8).T,
                                  lambda a: np.broadcast_to(a[:1], (32,))],
                         ids=["every other", "reversed", "transposed", "broadcast"])
def test_non_contiguous_numpy_arguments_are_refused(view, device):
    """A kernel gets the address of element 0 only: a NumPy view read as contiguous would
    touch memory outside it, so it is refused, naming the argument, and nothing is written
    (on every usable device)."""
    base = np.arange(32, dtype=np.float32)
    out = np.full(64, np.nan, np.float32)
    with pytest.raises(LaunchArgumentError, match="argument 'x_ptr' is a non-contiguous NumPy "
                                                  "array") as info:
        scale[(1,)](view(base), out, 16, 2.0, BLOCK=16, device=device)
    assert "np.ascontiguousarray(x_ptr)" in str(info.value)
    assert np.isnan(out).all()
    assert len(_anytile_frames(info.value)) <= 1


@at.jit
def strided_scale(x_ptr, out_ptr, n, stride, factor, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=offs < n) * factor, mask=offs < n)


def test_strided_arrays_keep_their_strides_through_at_asarray(device):
    """The advice works: ``at.asarray`` of a view keeps its strides for a kernel taking them."""
    base = np.arange(32, dtype=np.float32)
    x = at.asarray(base[::2], device=device)
    out = at.asarray(np.full(16, np.nan, np.float32), device=device)
    strided_scale[(1,)](x, out, 16, x.stride(0), 2.0, BLOCK=16)
    np.testing.assert_array_equal(out.numpy(), 2 * base[::2])


PRINTED = '''
import sys
import numpy as np
import anytile as at
import anytile.language as tl


@at.jit
def helper(v):
    return v + undefined_name


@at.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs)), mask=offs < n)


x = np.random.default_rng(0).random(16).astype(np.float32)
how = sys.argv[1]
if how == "launch":
    kernel[(1,)](x, 16, BLOCK=16, device="interpreter")
elif how == "run":
    kernel.run(x, 16, BLOCK=16, grid=(1,), device="interpreter")
elif how == "warmup":
    kernel.warmup(x, 16, BLOCK=16, grid=(1,), device="interpreter")
else:
    try:
        kernel[(1,)](x, 16, BLOCK=16, device="interpreter")
    except at.CompilationError as err:      # where Triton's tests read the broken rule
        print(type(err.__cause__).__name__, err.__cause__)
    kernel[(1,)](x, "sixteen", BLOCK=32, device="interpreter")
'''


@pytest.mark.parametrize("how", ["launch", "run", "warmup", "argument"])
def test_an_error_is_printed_once_with_the_users_line(tmp_path, how):
    """What a user running ``python file.py`` sees: one traceback, the message once (not a
    copy above "The above exception was the direct cause of..."), the caret under their
    code, no compiler frames."""
    import subprocess
    import sys
    script = tmp_path / "user_script.py"
    script.write_text(PRINTED)
    done = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 1
    err = done.stderr
    assert err.count("Traceback (most recent call last)") == 1, err
    assert "direct cause" not in err and "During handling" not in err, err
    assert "frontend" not in err and "generator.py" not in err, err
    if how == "argument":
        assert done.stdout == "NameError name `undefined_name` is not defined\n"
        assert err.count("argument 'n' is a str") == 1, err
    else:
        assert err.count("undefined_name") == 2, err    # the source line and the message
        assert f"{script}:10:16 (in helper)\n    return v + undefined_name\n" \
               f"               ^\nname `undefined_name` is not defined" in err, err
