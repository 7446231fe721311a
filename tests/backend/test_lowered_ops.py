"""Core hands a backend only IR whose every op the backend declares it lowers
(``Backend.op_set``, ``Backend.lowered_ops``): a kernel using another op is refused before the
backend sees it, with a ``CompilationError`` naming the op as the user wrote it, the backend
and the kernel's file:line; a plugin written before op sets had versions keeps what it had."""
from __future__ import annotations

import os
import pathlib
import traceback

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import Backend, DeviceInfo, Stage, Target
from anytile.errors import BackendError, CompilationError
from anytile.interpreter import InterpreterBackend
from anytile.ir import OP_SETS
from anytile.runtime.discovery import register_backend, unregister_backend

THIS_FILE = pathlib.Path(__file__)
SOURCE = THIS_FILE.read_text().splitlines()


class FirstRelease(InterpreterBackend):
    """A plugin written for op set 1 that does not print: the interpreter, narrowed."""

    name = device_prefix = "firstrelease"
    op_set = 1
    capabilities = InterpreterBackend.capabilities - {"device_print"}
    #: the IR each compile handed over, by kernel name
    handed: dict = {}

    def devices(self):
        return [DeviceInfo(f"{self.device_prefix}:0", 0, "a plugin of op set 1")]

    def target_of(self, device):
        return Target(self.name, "reference")

    def stages(self, target, options):
        def record(module, metadata):
            FirstRelease.handed[module.kernel_name] = str(module)
            return module
        return [Stage("record", record)]


class PrintsAsBefore(FirstRelease):
    """A plugin of op set 1 (no ``op_set`` set at all) that declared ``device_print``, as
    plugins that printed did before op sets had versions."""

    name = device_prefix = "printsasbefore"
    capabilities = InterpreterBackend.capabilities
    op_set = Backend.op_set          # the default: no op set declared


class NoDots(FirstRelease):
    """Declares its ops itself: every op of the newest set but ``dot``."""

    name = device_prefix = "nodots"

    def lowered_ops(self):
        return OP_SETS[max(OP_SETS)].ops - {"dot"}


class BrokenDeclaration(FirstRelease):
    name = device_prefix = "brokendeclaration"
    op_set = 0


@pytest.fixture
def registered():
    classes = (FirstRelease, PrintsAsBefore, NoDots, BrokenDeclaration)
    for cls in classes:
        register_backend(cls)
    try:
        yield
    finally:
        for cls in classes:
            unregister_backend(cls.name)


@at.jit
def doubles_and_prints(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.device_print("x", x)  # the-print
    tl.store(out_ptr + offs, x * 2)


@at.jit
def doubles(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)


@at.jit
def squares(a_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    tl.store(out_ptr + r[:, None] * N + r[None, :], tl.dot(a, a))  # the-dot


def _line(marker: str) -> int:
    lines = [i + 1 for i, text in enumerate(SOURCE) if text.rstrip().endswith(marker)]
    assert len(lines) == 1
    return lines[0]


def _arrays(rng, device, n=16):
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    return x, at.asarray(x, device=device), at.asarray(out, device=device)


def _check_points_at_the_user(err: CompilationError, marker: str) -> None:
    line = _line(marker)
    text = str(err)
    assert err.loc.file == str(THIS_FILE) and err.loc.line == line
    assert f"{THIS_FILE}:{line}:" in text and marker in text and "^" in text
    assert "core/anytile" not in text and "Traceback" not in text
    # raised through the user-facing choke point: at most one frame of anytile's shown
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if f"{os.sep}anytile{os.sep}" in f.filename]
    assert len(frames) <= 1, frames


def test_a_backend_of_op_set_1_is_not_handed_print(registered, rng, capfd):
    FirstRelease.handed.clear()
    x, xs, out = _arrays(rng, "firstrelease:0")
    with pytest.raises(CompilationError) as info:
        doubles_and_prints[(1,)](xs, out, BLOCK=16)
    err = info.value
    assert err.message.startswith("tl.device_print is not supported on backend "
                                  "'firstrelease': kernel 'doubles_and_prints' needs the IR "
                                  "op 'print'")
    assert "op set 1" in err.message and "'print' arrived in op set 2" in err.message
    _check_points_at_the_user(err, "# the-print")
    assert FirstRelease.handed == {}             # refused before the backend saw it
    assert np.isnan(out.numpy()).all()           # nothing ran
    assert "x" not in capfd.readouterr().out


def test_the_same_backend_runs_what_it_declares(registered, rng):
    FirstRelease.handed.clear()
    x, xs, out = _arrays(rng, "firstrelease:0")
    doubles[(1,)](xs, out, BLOCK=16)
    np.testing.assert_array_equal(out.numpy(), x * 2)
    assert list(FirstRelease.handed) == ["doubles"]


def test_ahead_of_time_compiles_are_refused_alike(registered):
    with pytest.raises(CompilationError, match="tl.device_print is not supported on backend "
                                               "'firstrelease'") as info:
        at.compile(doubles_and_prints, target="firstrelease:reference",
                   signature={"x_ptr": "*fp32", "out_ptr": "*fp32"}, constexprs={"BLOCK": 16})
    _check_points_at_the_user(info.value, "# the-print")


def test_lowered_ops_may_leave_out_an_op_of_version_1(registered, rng):
    a = rng.standard_normal((16, 16)).astype(np.float32)
    out = at.asarray(np.full((16, 16), np.nan, np.float32), device="nodots:0")
    with pytest.raises(CompilationError) as info:
        squares[(1,)](at.asarray(a, device="nodots:0"), out, N=16)
    err = info.value
    assert err.message.startswith("tl.dot is not supported on backend 'nodots': kernel "
                                  "'squares' needs the IR op 'dot'")
    assert "its lowered_ops() leave it out" in err.message
    _check_points_at_the_user(err, "# the-dot")
    assert np.isnan(out.numpy()).all()


def test_a_plugin_that_declared_device_print_keeps_printing(registered, rng, capfd):
    x, xs, out = _arrays(rng, "printsasbefore:0", n=4)
    doubles_and_prints[(1,)](xs, out, BLOCK=4)
    np.testing.assert_array_equal(out.numpy(), x * 2)
    lines = capfd.readouterr().out.splitlines()
    assert [line.split(" x ")[0] for line in lines] == [
        f"pid (0, 0, 0) idx ({i})" for i in range(4)]


def test_a_declaration_that_cannot_be_read_names_the_backend(registered, rng):
    x, xs, out = _arrays(rng, "brokendeclaration:0")
    with pytest.raises(BackendError, match="backend 'brokendeclaration' does not say which "
                                           "IR ops it lowers: ValueError: op set version 0"):
        doubles[(1,)](xs, out, BLOCK=16)
    assert np.isnan(out.numpy()).all()


def _shipped_backends() -> list:
    """Every backend class of this repository: the installed plugins and the example."""
    import importlib.metadata
    import sys
    example = THIS_FILE.parents[2] / "docs" / "examples" / "minimal_backend"
    sys.path.insert(0, str(example))
    try:
        from anytile_minimal.backend import MinimalBackend
    finally:
        sys.path.remove(str(example))
    found = [ep.load() for ep in importlib.metadata.entry_points(group="anytile.backends")
             if ep.value.split(".")[0] in ("anytile", "anytile_cpu", "anytile_nvidia",
                                           "anytile_amd", "anytile_opencl")]
    return found + [MinimalBackend]


def test_every_backend_here_declares_its_ops_truthfully():
    """Each declares an op set outright, prints exactly when it says ``device_print``, and the
    example lowers exactly the ops its evaluator has."""
    classes = _shipped_backends()
    assert {c.name for c in classes} >= {"interpreter", "cpu", "nvidia", "amd", "opencl",
                                         "gpusim", "amdsim64", "amdsim32", "minimal"}
    latest = OP_SETS[max(OP_SETS)].ops
    for cls in classes:
        assert any("op_set" in vars(k) for k in cls.__mro__ if k is not Backend), cls.name
        ops = cls.lowered_ops(cls.__new__(cls))      # no driver needed to read a declaration
        assert ops <= latest, cls.name
        assert ("print" in ops) == ("device_print" in cls.capabilities), cls.name
    from anytile_minimal.evaluate import SUPPORTED
    minimal = next(c for c in classes if c.name == "minimal")
    assert minimal.lowered_ops(minimal.__new__(minimal)) == {c.NAME for c in SUPPORTED}


@at.jit
def doubles_with_promises(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.assume(pid >= 0)
    tl.assume(n > 0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if n > 4:
        tl.assume(n >= 5)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_promises_are_removed_for_a_backend_that_does_not_lower_them(registered, rng):
    """``tl.assume`` is an ``assume`` op (op set 3): a backend of an earlier op set is handed
    the kernel without it, nested ones included, and computes the same."""
    x = rng.standard_normal(16).astype(np.float32)
    out = np.zeros_like(x)
    doubles_with_promises[(2,)](x, out, 13, BLOCK=8, device="firstrelease")
    assert "assume" not in FirstRelease.handed["doubles_with_promises"]
    np.testing.assert_array_equal(out[:13], x[:13] * 2)
    ir_text = at.compile(doubles_with_promises, target="interpreter:reference",
                         signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                         constexprs={"BLOCK": 8}).asm["ir"]
    assert ir_text.count("assume (") == 3        # the interpreter lowers every op
