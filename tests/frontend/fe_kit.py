"""Helpers for frontend tests: compile a @jit function to verified IR and look at its ops."""
from __future__ import annotations

from typing import Any, Optional

from anytile.frontend import compile_to_ir
from anytile.ir import Module, Op, walk
from anytile.ir.types import PointerType, ScalarType, Type
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import verify_module


def ptr(elem: ScalarType) -> PointerType:
    return PointerType(elem)


def compile_ir(fn: Any, constexprs: Optional[dict] = None, attrs: Optional[dict] = None,
               **arg_types: Type) -> Module:
    """``fn`` compiled for ``arg_types`` and ``constexprs``; the module is verified and its
    text form round-trips through the parser."""
    module = compile_to_ir(fn, arg_types, constexprs or {}, attrs or {})
    verify_module(module)
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    return module


def all_ops(module: Module) -> list[Op]:
    """Every op of every function of ``module``."""
    return [op for f in module.functions.values() for op in walk(f.body)]


def kernel_ops(module: Module) -> list[Op]:
    return list(walk(module.kernel.body))


def names(ops: list[Op]) -> list[str]:
    return [op.NAME for op in ops]


def of_kind(ops: list[Op], name: str, **attrs: Any) -> list[Op]:
    """The ops called ``name`` whose attributes equal ``attrs``."""
    return [op for op in ops if op.NAME == name
            and all(getattr(op, k) == v for k, v in attrs.items())]
