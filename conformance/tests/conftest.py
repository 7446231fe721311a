"""Fixtures for testing the suite itself: deliberately broken backends, registered only for
the test that asks for them."""
from __future__ import annotations

import copy
import os

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
def bare_device():
    yield from _registered(NoHalfBackend)


@pytest.fixture
def interpreter():
    return at.device("interpreter")
