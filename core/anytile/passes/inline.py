"""Inlining: every ``call`` is replaced by a copy of its callee's body, so the kernel is
self-contained; functions no kernel needs any more are removed from the module.

Callees are inlined bottom-up (a callee's own calls first, each function once), so nested
calls cost one copy per call site.  A call cycle (``f`` calls ``g`` calls ``f``) cannot be
inlined and raises ``CompilationError`` at the call that closes the cycle.  Inlined ops keep
their own locations (the callee's source lines).
"""
from __future__ import annotations

from ..errors import CompilationError
from ..ir import ops as O
from ..ir.nodes import Block, Function, Module, Op, Value
from .rewrite import Substitution

__all__ = ["inline_calls"]


class _Inliner:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.done: set[str] = set()
        self.stack: list[str] = []

    def function(self, fn: Function) -> bool:
        """Inline every call in ``fn`` (after inlining its callees); True if any."""
        if fn.name in self.done:
            return False
        self.stack.append(fn.name)
        subst = Substitution()
        changed = self.block(fn.body, subst)
        subst.apply_to_block(fn.body)
        self.stack.pop()
        self.done.add(fn.name)
        return changed

    def callee_of(self, call: O.CallOp) -> Function:
        callee = self.module.functions.get(call.callee)
        if callee is None:
            raise CompilationError(f"call of unknown function '{call.callee}'", call.loc)
        if call.callee in self.stack:
            cycle = " -> ".join(self.stack[self.stack.index(call.callee):] + [call.callee])
            raise CompilationError(
                f"recursive call {cycle}: anytile inlines every call into the kernel, so jit "
                f"functions cannot call themselves (rewrite the recursion as a loop)", call.loc)
        self.function(callee)
        return callee

    def block(self, block: Block, subst: Substitution) -> bool:
        changed = False
        out: list[Op] = []
        for op in block.ops:
            for region in op.regions:
                changed |= self.block(region, subst)
            if isinstance(op, O.CallOp):
                out.extend(self.expand(op, subst))
                changed = True
            else:
                out.append(op)
        block.ops = out
        return changed

    def expand(self, call: O.CallOp, subst: Substitution) -> list[Op]:
        """The callee's body ops for ``call``; its results are mapped to the returned values."""
        callee = self.callee_of(call)
        mapping: dict[Value, Value] = {}
        for param, arg in zip(callee.args, call.args):
            mapping[param] = subst.resolve(arg)
        *body, ret = callee.body.ops
        if ret.NAME != "return":
            raise CompilationError(f"function '{callee.name}' does not end with a return",
                                   callee.loc)
        copies = [op.clone_with(mapping) for op in body]
        copied = {id(r) for op in copies for r in op.results}
        for result, returned in zip(call.results, ret.values):
            value = mapping.get(returned, returned)
            if id(value) in copied and not value.name:
                value.name = result.name  # the caller's variable name reads better
            subst.replace(result, value)
        return copies


def inline_calls(module: Module) -> bool:
    """Inline all calls; keep only the kernel (or, without one, every function that is not
    called by another).  True if the module changed."""
    called = {op.callee for fn in module.functions.values() for op in fn.walk()
              if isinstance(op, O.CallOp)}
    inliner = _Inliner(module)
    changed = False
    for fn in list(module.functions.values()):
        changed |= inliner.function(fn)
    if module.kernel_name in module.functions:
        keep = {module.kernel_name}
    else:
        keep = set(module.functions) - called
    for name in list(module.functions):
        if name not in keep:
            del module.functions[name]
            changed = True
    return changed
