"""One specialisation rule (``runtime/specialize.py``): the generated fast path's key and the
general path's ``ArgSpec``s must agree on every argument list, and ``at.compile``'s strings
give the same ``ArgSpec``s as a launch with such arguments."""
import itertools
import random

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.ir.types import PointerType, f32, i1, i32, i64, u64
from anytile.runtime.arrays import Array
from anytile.runtime.fast_launch import make_key_function
from anytile.runtime.specialize import ArgKind, ArgSpec


@at.jit
def many(x_ptr, n, scale, flag, stride, opt, BLOCK: tl.constexpr, MODE: tl.constexpr = 0):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs * stride, tl.load(x_ptr + offs) * scale, mask=offs < n)


@at.jit(do_not_specialize=("n", "x_ptr"))
def many_nospec(x_ptr, n, scale, flag, stride, opt, BLOCK: tl.constexpr, MODE: tl.constexpr = 0):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs * stride, tl.load(x_ptr + offs) * scale, mask=offs < n)


def _arrays():
    dev = at.device("interpreter")
    base = at.asarray(np.arange(64, dtype=np.float32), device=dev)
    shifted = Array(base.buffer, (60,), base.element_type, dev, offset=4)    # not 16-aligned
    halves = at.asarray(np.arange(64, dtype=np.float16), device=dev)
    return [base, shifted, halves]


_INTS = [0, 1, 2, 15, 16, 17, 32, -16, 2**31 - 1, 2**31 - 16, 2**31, 2**31 + 16, -2**31,
         -2**31 - 16, 2**63 - 1, 2**63, 2**63 + 16, np.int32(1), np.int32(16), np.int64(7),
         np.uint8(1), np.int64(2**40), np.uint64(2**63 + 32)]
_SCALARS = _INTS + [1.5, 0.0, np.float32(2.0), np.float16(1.0), True, False, np.bool_(True), None]
_CONSTEXPRS = [1, 2, 16, 1.0, True, "s", (1, 2), tl.float32, None]


def _argument_lists(count, seed):
    rng = random.Random(seed)
    arrays = _arrays()
    for _ in range(count):
        yield [rng.choice(arrays), rng.choice(_SCALARS), rng.choice(_SCALARS),
               rng.choice(_SCALARS), rng.choice(_SCALARS), rng.choice(_SCALARS),
               rng.choice(_CONSTEXPRS), rng.choice(_CONSTEXPRS)]


@pytest.mark.parametrize("kernel", [many, many_nospec], ids=["specialised", "do_not_specialize"])
def test_fast_key_and_arg_specs_agree(kernel):
    key_of = make_key_function(kernel)
    spec_for_key, key_for_spec = {}, {}
    for args in _argument_lists(3000, seed=kernel.__name__):
        key = key_of(*args)
        specs = kernel.launch_signature.specialise(args)
        assert key is not None, f"no fast key for {args}"
        # equal fast keys must mean equal specialisations (else a hit runs the wrong code)...
        assert spec_for_key.setdefault(key, specs) == specs, (args, key)
        # ...and for these built-in argument types, equal specialisations equal keys (no
        # needless misses)
        assert key_for_spec.setdefault(specs, key) == key, (args, specs)
    assert len(spec_for_key) > 500


@pytest.mark.parametrize("kernel", [many, many_nospec], ids=["specialised", "do_not_specialize"])
def test_numpy_fast_keys_decide_the_specialisation_on_a_host_device(kernel):
    from anytile.runtime.launch import import_arrays
    key_of = make_key_function(kernel)
    dev = at.device("interpreter")          # sees NumPy arrays in place, as cpu does
    floats = np.arange(80, dtype=np.float32)
    read_only = floats[:64].view()
    read_only.flags.writeable = False
    arrays = [floats[:64], floats[1:65], floats[4:68], floats[8:72], read_only,
              np.arange(64, dtype=np.float16), np.arange(64, dtype=np.int64)[2:], floats[:1]]
    spec_for_key = {}
    for a in arrays:
        args = [a, 64, 1.5, True, 2, None, 16, 0]
        key = key_of(*args)
        values, copied = import_arrays(kernel, tuple(args), dev)
        assert not copied
        specs = kernel.launch_signature.specialise(values)
        assert spec_for_key.setdefault(key, specs) == specs, (a, key)
    assert len(spec_for_key) >= 5


def test_unknown_argument_types_go_to_the_general_path():
    key_of = make_key_function(many)
    args = [_arrays()[0], [1, 2], 1.0, True, 4, None, 16, 0]
    assert key_of(*args) is None
    with pytest.raises(TypeError, match="argument 'n' is a list"):
        many.launch_signature.specialise(args)


def test_the_rules():
    sig = many.launch_signature
    x, shifted, _ = _arrays()
    specs = sig.specialise([x, 1, 2.0, True, 32, None, 16, 0])
    assert specs == (ArgSpec.runtime(PointerType(f32), True), ArgSpec.constexpr(1),
                     ArgSpec.runtime(f32), ArgSpec.runtime(i1),
                     ArgSpec.runtime(i32, True), ArgSpec.constexpr(None),
                     ArgSpec.constexpr(16), ArgSpec.constexpr(0))
    assert sig.spec_of(sig.params[0], shifted).divisible_by_16 is False
    assert sig.spec_of(sig.params[1], 2**31).type == i64
    assert sig.spec_of(sig.params[1], 2**63).type == u64
    assert ArgSpec.constexpr(1) != ArgSpec.constexpr(1.0) != ArgSpec.constexpr(True)
    nospec = many_nospec.launch_signature
    assert nospec.spec_of(nospec.params[1], 1) == ArgSpec.runtime(i32, False)
    assert nospec.spec_of(nospec.params[0], x).divisible_by_16 is False
    with pytest.raises(at.AnytileError, match="does not fit in 64 bits"):
        sig.spec_of(sig.params[1], 2**64)


@pytest.mark.parametrize("args, text", [
    ([None, 7, 2.0, True, 32], {"n": "i32", "scale": "fp32", "flag": "i1", "stride": "i32:16"}),
    ([None, 2**40 + 3, 0.5, False, 3], {"n": "i64", "scale": "f32", "flag": "bool", "stride": "int32"}),
])
def test_compile_strings_give_the_launch_specs(args, text):
    sig = many.launch_signature
    x = _arrays()[0]
    launched = sig.specialise([x] + args[1:] + [None, 16, 0])
    parsed = sig.from_text({"x_ptr": "*fp32:16", **text}, {"opt": None, "BLOCK": 16})
    assert parsed == launched


def test_compile_strings_are_checked():
    sig = many.launch_signature
    with pytest.raises(at.CompilationError, match="has no parameter"):
        sig.from_text({"x_ptr": "*fp32", "nope": "i32"}, {"BLOCK": 16})
    with pytest.raises(at.CompilationError, match="'scale' .* has no type"):
        sig.from_text({"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 16})
    with pytest.raises(at.CompilationError, match="'BLOCK' .* needs a value"):
        sig.from_text({"x_ptr": "*fp32", "n": "i32", "scale": "f32", "flag": "i1",
                       "stride": "i32", "opt": "i32"}, {})
    with pytest.raises(ValueError, match="unknown type 'f33'"):
        sig.from_text({"x_ptr": "*f33"}, {})


def test_tritons_float8e4b15_spelling_is_read():
    from anytile.runtime.specialize import parse_signature_type
    assert str(parse_signature_type("*fp8e4b15")) == "ptr<f8e4b15>"
    assert str(parse_signature_type("float8e4b15")) == "f8e4b15"
