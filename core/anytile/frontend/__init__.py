"""Python AST -> tile IR.

``compile_to_ir(fn, arg_types, constexprs, arg_attrs)`` compiles a ``@jit`` kernel, specialised
for its runtime argument types and compile-time values, to an ``ir.Module``.  Every failure
is reported as one ``CompilationError`` naming the user's file:line with a caret."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import user_facing
from ..ir.nodes import Module
from ..ir.types import Type
from ..language.source import KernelSource
from .context import ModuleContext

__all__ = ["compile_to_ir"]


@user_facing
def compile_to_ir(fn: KernelSource, arg_types: Mapping[str, Type], constexprs: Mapping[str, Any],
                  arg_attrs: Mapping[str, dict]) -> Module:
    """The IR module of kernel ``fn``: the kernel ``Function`` (one block argument per runtime
    parameter, in order; ``is_kernel=True``) and one ``Function`` per specialisation of each
    ``@jit`` function it calls (reached through ``call`` ops)."""
    return ModuleContext().compile_kernel(fn, arg_types, constexprs, arg_attrs)
