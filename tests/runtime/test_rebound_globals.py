"""What a kernel reads from its globals and closure at compile time is part of what its
compiled code depends on: rebinding such a name after a launch compiles anew with the new
value (a launch never runs code compiled for the old one), while rebinding it to an equal
value keeps the compiled code."""
import textwrap

import numpy as np
import pytest

import anytile as at
from anytile.runtime import dependencies

SOURCE = '''
import anytile as at, anytile.language as tl
import {name}_cfg as cfg

SCALE = tl.constexpr(2.0)
OFFSET = tl.constexpr(0.0)


class Knobs:
    SHIFT = 0.0


def plus(v):
    return v + 0.0


@at.jit
def add_offset(v):
    return v + OFFSET


@at.jit
def by_global(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * SCALE)


@at.jit
def by_callee(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, add_offset(tl.load(x_ptr + offs)))


@at.jit
def by_module_attribute(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * cfg.FACTOR)


@at.jit
def by_class_attribute(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + Knobs.SHIFT)


@at.jit
def by_plain_function(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + plus(1.0))


def make_by_closure():
    factor = tl.constexpr(2.0)

    @at.jit
    def by_closure(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * factor)

    def rebind(value):
        nonlocal factor
        factor = value
    return by_closure, rebind
'''


@pytest.fixture
def mod(tmp_path, monkeypatch, request):
    name = f"rebound_{abs(hash(request.node.nodeid)) % 10**8}"
    (tmp_path / f"{name}_cfg.py").write_text("import anytile.language as tl\n"
                                             "FACTOR = tl.constexpr(2.0)\n")
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(SOURCE.format(name=name)))
    monkeypatch.syspath_prepend(str(tmp_path))
    return __import__(name)


@pytest.fixture
def compiles():
    """The names of the kernels compiled (from source or the disk cache) during the test."""
    seen: list[str] = []
    at.knobs.compilation.listener = lambda info: seen.append(info.name)
    yield seen
    at.knobs.compilation.listener = None


def _launch(kernel, device, rng):
    x = rng.standard_normal(16).astype(np.float32)
    out = at.asarray(np.full(16, np.nan, np.float32), device=device)
    kernel[(1,)](at.asarray(x, device=device), out, BLOCK=16)
    return x, out.numpy()


def _twice(kernel, device, rng):
    """Two launches (the second takes the fast path where the device has one)."""
    _launch(kernel, device, rng)
    return _launch(kernel, device, rng)


def test_a_rebound_constexpr_global_is_compiled_in(mod, device, rng, compiles):
    x, out = _twice(mod.by_global, device, rng)
    np.testing.assert_array_equal(out, x * np.float32(2.0))
    mod.SCALE = mod.tl.constexpr(3.0)
    x, out = _twice(mod.by_global, device, rng)
    np.testing.assert_array_equal(out, x * np.float32(3.0))
    assert compiles.count("by_global") == 2
    mod.SCALE = mod.tl.constexpr(3.0)       # an equal value: the compiled code is kept
    x, out = _twice(mod.by_global, device, rng)
    np.testing.assert_array_equal(out, x * np.float32(3.0))
    assert compiles.count("by_global") == 2


def test_a_rebound_closure_variable_is_compiled_in(mod, device, rng):
    kernel, rebind = mod.make_by_closure()
    x, out = _twice(kernel, device, rng)
    np.testing.assert_array_equal(out, x * np.float32(2.0))
    rebind(mod.tl.constexpr(-1.5))
    x, out = _twice(kernel, device, rng)
    np.testing.assert_array_equal(out, x * np.float32(-1.5))


def test_a_global_read_by_a_called_function_is_compiled_in(mod, device, rng):
    x, out = _twice(mod.by_callee, device, rng)
    np.testing.assert_array_equal(out, x)
    mod.OFFSET = mod.tl.constexpr(4.0)
    x, out = _twice(mod.by_callee, device, rng)
    np.testing.assert_array_equal(out, x + np.float32(4.0))


def test_module_and_class_attributes_and_plain_functions_are_followed(mod, device, rng):
    x, out = _twice(mod.by_module_attribute, device, rng)
    np.testing.assert_array_equal(out, x * np.float32(2.0))
    mod.cfg.FACTOR = mod.tl.constexpr(0.5)
    x, out = _twice(mod.by_module_attribute, device, rng)
    np.testing.assert_array_equal(out, x * np.float32(0.5))

    x, out = _twice(mod.by_class_attribute, device, rng)
    np.testing.assert_array_equal(out, x)
    mod.Knobs.SHIFT = 8.0
    x, out = _twice(mod.by_class_attribute, device, rng)
    np.testing.assert_array_equal(out, x + np.float32(8.0))

    x, out = _twice(mod.by_plain_function, device, rng)
    np.testing.assert_array_equal(out, x + np.float32(1.0))
    mod.plus = lambda v: v + 2.0
    x, out = _twice(mod.by_plain_function, device, rng)
    np.testing.assert_array_equal(out, x + np.float32(3.0))


def test_the_scan_follows_only_what_can_change(mod):
    """Locals, parameters, builtins and library modules are not bindings; a plain value's
    key is the same in another process, a user's function is named only by its identity."""
    names = {name for _, name, _ in dependencies.scan(mod.by_global).bindings}
    assert names == {"SCALE"}
    assert dependencies.scan(mod.by_global).portable
    found = dependencies.scan(mod.by_plain_function)
    assert {name for _, name, _ in found.bindings} == {"plus"} and not found.portable
    assert {name for _, name, _ in dependencies.scan(mod.by_callee).bindings} == \
        {"add_offset", "OFFSET"}
