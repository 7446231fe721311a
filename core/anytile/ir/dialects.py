"""Dialects: op classes a backend adds to the tile IR, apart from core's.

Core's ops (``anytile.ir.ops``) mean the same on every device.  A backend whose code generator
wants ops of its own -- a load that also says what its device's copy unit reads, a wait that
also fences -- declares them in a *dialect*: a name and the op classes whose ``NAME`` starts
with it (``acme.fence``), as Triton keeps its vendors' GPU dialects apart from its core ops::

    ACME = Dialect("acme", "the Acme GPU's own ops")

    @ACME.op
    @dataclass(eq=False)
    class FenceOp(Op):          # a docstring saying what it means, as every op has
        NAME = "acme.fence"
        TRAITS = frozenset({Trait.SIDE_EFFECT})

    ACME.load()             # before IR holding its ops is verified or parsed

A dialect op is an ordinary ``Op`` subclass: it declares its operands, attributes, regions and
traits as core's do, checks its own rules in ``verify``, and prints and parses in the IR text
form with no code of its own.  It may refine a core op (subclass it, adding fields): passes that
work on the core op then handle it too.  Until its dialect is loaded the parser does not know
its ops and the verifier rejects them, naming the dialect: IR of a backend that did not load
its dialect is never taken for core IR.
"""
from __future__ import annotations

import re
import threading
from typing import TypeVar

from .nodes import OP_REGISTRY, Op

__all__ = ["Dialect", "dialect_loaded", "dialect_of_name"]

OpT = TypeVar("OpT", bound=type[Op])

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_LOCK = threading.Lock()
#: every dialect ever declared, by name (loaded or not)
_DIALECTS: dict[str, "Dialect"] = {}


class Dialect:
    """A named set of op classes a backend contributes (see the module docstring)."""

    def __init__(self, name: str, description: str = "") -> None:
        if not _NAME.fullmatch(name):
            raise ValueError(f"dialect name {name!r} must be lowercase letters, digits and '_'")
        with _LOCK:
            if name in _DIALECTS:
                raise ValueError(f"a dialect named '{name}' exists already")
            _DIALECTS[name] = self
        self.name = name
        self.description = description
        self.ops: dict[str, type[Op]] = {}
        self.loaded = False

    def op(self, cls: OpT) -> OpT:
        """Class decorator: make ``cls`` (an ``Op`` subclass named ``<dialect>.<op>``) one of
        this dialect's ops."""
        if not (isinstance(cls, type) and issubclass(cls, Op)):
            raise TypeError(f"@{self.name}.op decorates Op classes, not {cls!r}")
        name = cls.__dict__.get("NAME", "")
        prefix, _, short = name.partition(".")
        if prefix != self.name or not _NAME.fullmatch(short):
            raise ValueError(f"op class {cls.__name__}: a '{self.name}' op is named "
                             f"'{self.name}.<name>', found NAME = {name!r}")
        cls.DIALECT = self.name
        with _LOCK:
            self.ops[name] = cls
            if self.loaded:
                OP_REGISTRY[name] = cls
        return cls

    def load(self) -> None:
        """Make this dialect's ops known to the parser and the verifier (idempotent)."""
        with _LOCK:
            for name, cls in self.ops.items():
                OP_REGISTRY[name] = cls
            self.loaded = True

    def unload(self) -> None:
        """Forget this dialect's ops again: its IR no longer parses or verifies."""
        with _LOCK:
            for name in self.ops:
                OP_REGISTRY.pop(name, None)
            self.loaded = False

    def __repr__(self) -> str:
        return f"Dialect({self.name!r}, {len(self.ops)} ops{'' if self.loaded else ', not loaded'})"


def dialect_loaded(name: str) -> bool:
    """Whether the dialect called ``name`` is loaded."""
    found = _DIALECTS.get(name)
    return found is not None and found.loaded


def dialect_of_name(op_name: str) -> str:
    """The dialect an op name belongs to (``"acme"`` for ``acme.fence``), ``""`` for core's
    ops."""
    prefix, dot, _ = op_name.partition(".")
    return prefix if dot else ""
