"""Fixtures for testing the suite itself: deliberately broken backends, registered only for
the test that asks for them."""
from __future__ import annotations

import copy
import os

import numpy as np
import pytest

import anytile as at
from anytile.backend import DeviceInfo, Target
from anytile.interpreter import InterpreterBackend
from anytile.ir import ops
from anytile.runtime.discovery import unregister_backend

# verify the IR after every pass and every IR-producing compile stage (ir.verifier)
os.environ.setdefault("ANYTILE_VERIFY", "1")


class XorIsOrBackend(InterpreterBackend):
    """The reference interpreter with one planted bug: ``xor`` computes ``or``."""

    name = "broken-xor"
    device_prefix = "broken-xor"

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("broken-xor:0", 0, "interpreter with xor computing or")]

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, "reference")

    def load(self, kernel, device):
        module = copy.deepcopy(kernel.module)
        for function in module.functions.values():
            for op in function.walk():
                if isinstance(op, ops.BinaryOp) and op.kind == "xor":
                    op.kind = "or"
        return super().load(module, device)


class NoHalfBackend(InterpreterBackend):
    """The reference interpreter declaring no optional capability at all."""

    name = "no-capabilities"
    device_prefix = "no-capabilities"
    capabilities = frozenset()

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("no-capabilities:0", 0, "interpreter declaring nothing")]

    def target_of(self, device: DeviceInfo) -> Target:
        return Target(self.name, "reference")


class SinIsCosBackend(XorIsOrBackend):
    """The reference interpreter with one planted bug: ``sin`` computes ``cos``."""

    name = "broken-sin"
    device_prefix = "broken-sin"

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("broken-sin:0", 0, "interpreter with sin computing cos")]

    def load(self, kernel, device):
        module = copy.deepcopy(kernel.module)
        for function in module.functions.values():
            for op in function.walk():
                if isinstance(op, ops.UnaryOp) and op.kind == "sin":
                    op.kind = "cos"
        return InterpreterBackend.load(self, module, device)


class CopiesEachArgumentBackend(XorIsOrBackend):
    """The reference interpreter with one planted bug: each NumPy argument is run on a copy
    of its own, and the copies are copied back in argument order (memory that two arguments
    share ends up as the last one's copy says)."""

    name = "copies-each-argument"
    device_prefix = "copies-each-argument"

    def __init__(self) -> None:
        super().__init__()
        self.copies: list = []

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("copies-each-argument:0", 0, "interpreter copying each argument")]

    def load(self, kernel, device):
        return InterpreterBackend.load(self, kernel, device)

    def import_array(self, obj, device):
        if not isinstance(obj, np.ndarray):
            return super().import_array(obj, device)
        private = obj.copy()
        self.copies.append((obj, private))
        return super().import_array(private, device)

    def launch(self, loaded, grid, args, device, stream=None):
        try:
            super().launch(loaded, grid, args, device, stream)
        finally:
            for host, private in self.copies:
                host[...] = private
            self.copies.clear()


def _registered(cls):
    record = at.register_backend(cls, cls.name)
    assert record.backend is not None, record.error
    try:
        yield at.device(f"{cls.name}:0")
    finally:
        unregister_backend(cls.name)


@pytest.fixture
def broken_device():
    yield from _registered(XorIsOrBackend)


@pytest.fixture
def sin_is_cos_device():
    yield from _registered(SinIsCosBackend)


@pytest.fixture
def copying_device():
    yield from _registered(CopiesEachArgumentBackend)


@pytest.fixture
def bare_device():
    yield from _registered(NoHalfBackend)


@pytest.fixture
def interpreter():
    return at.device("interpreter")
