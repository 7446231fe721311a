"""``ModuleContext``: one compilation's module, and the specialisation of called ``@jit``
functions (one ``Function`` per distinct argument types and compile-time values)."""
from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import CompilationError
from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from ..ir.nodes import Block, Function, Loc, Module
from ..language import semantic
from ..language.objects import constexpr, dtype, tensor, unwrap
from ..language.source import KernelSource
from ..language.tensor_descriptor import DescriptorParam, descriptor_from_leaves, leaf_names
from .aggregates import is_aggregate, rebuild_tensors, structure_key, tensor_leaves
from .names import wrap_static

if TYPE_CHECKING:
    from .generator import FunctionGenerator


@dataclass
class Specialization:
    """A compiled device function: its module name, and ``returned``: what it returns (None,
    a tensor, a descriptor, a block pointer or a tuple of them) as built in its body, whose
    tensor leaves are, in order, the function's results."""

    name: str
    result_types: list[irt.Type]
    returned: Any


def _static_key(value: Any) -> Any:
    value = unwrap(value)
    if isinstance(value, tuple):
        return tuple(_static_key(v) for v in value)
    try:
        hash(value)
        return (type(value).__name__, value)
    except TypeError:
        return (type(value).__name__, repr(value))


def _returnable(value: Any, builder: Builder) -> Any:
    """``value`` as a function returns it: numbers become tensors (a caller receives
    run-time values), descriptors and block pointers keep their compile-time parts."""
    v = unwrap(value)
    if isinstance(v, tuple):
        return tuple(_returnable(item, builder) for item in v)
    if isinstance(v, (tensor, bool, int, float)):
        return semantic.to_tensor(v, builder)
    if is_aggregate(v):
        return v
    raise TypeError(f"@jit functions can return tensors, numbers, tensor descriptors, "
                    f"block pointers or tuples of them, not {type(v).__name__} {v!r}")


def _sanitize(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


class ModuleContext:
    """Builds one ``Module``: the kernel and every @jit function it calls."""

    def __init__(self) -> None:
        self.module = Module()
        self._trees: dict[int, ast.FunctionDef] = {}
        self._specializations: dict[Any, Specialization] = {}
        self._in_progress: set[Any] = set()

    def tree_of(self, fn: KernelSource) -> ast.FunctionDef:
        tree = self._trees.get(id(fn))
        if tree is None:
            node = ast.parse(fn.src).body[0]
            assert isinstance(node, ast.FunctionDef)
            tree = self._trees[id(fn)] = node
        return tree

    @staticmethod
    def def_loc(fn: KernelSource) -> Loc:
        return Loc(fn.file, fn.first_line, fn.col_offset, fn.__name__)

    # -- the kernel --------------------------------------------------------------------------
    def compile_kernel(self, fn: KernelSource, arg_types: Mapping[str, irt.Type],
                       constexprs: Mapping[str, Any], arg_attrs: Mapping[str, dict]) -> Module:
        from .generator import FunctionGenerator
        runtime_params = [n for n in fn.arg_names if n not in constexprs]
        described = {n: v for n, v in constexprs.items() if isinstance(v, DescriptorParam)}
        for name, param in described.items():        # their leaves follow the parameters
            runtime_params += leaf_names(name, param.rank)
        missing = [n for n in runtime_params if n not in arg_types]
        if missing:
            raise ValueError(f"compile_to_ir: no type given for parameter(s) {missing} of "
                             f"{fn.__name__}")
        body = Block.with_args([arg_types[n] for n in runtime_params], runtime_params)
        function = Function(fn.__name__, body,
                            arg_attrs=[dict(arg_attrs.get(n, {})) for n in runtime_params],
                            loc=self.def_loc(fn), is_kernel=True)
        self.module.add(function)
        scope: dict[str, Any] = {n: constexpr(v) for n, v in constexprs.items()
                                 if n not in described}
        scope.update({n: tensor(a) for n, a in zip(runtime_params, body.args)})
        for name, param in described.items():
            leaves = [scope.pop(n) for n in leaf_names(name, param.rank)]
            scope[name] = descriptor_from_leaves(leaves, param.block_shape, param.padding)
        FunctionGenerator(self, fn, function, scope, is_kernel=True).generate(self.tree_of(fn))
        return self.module

    # -- calls to @jit functions ----------------------------------------------------------------
    def call_jit(self, fn: KernelSource, args: list, kwargs: dict,
                 caller: "FunctionGenerator") -> Any:
        """Emit a ``call`` to ``fn`` specialised for these arguments; returns its result."""
        try:
            bound = fn.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{fn.__name__}(): {e}") from None
        bound.apply_defaults()
        dynamic: list[tuple[str, tensor]] = []
        static: dict[str, Any] = {}
        composites: dict[str, Any] = {}  # tuples / block pointers holding tensors
        for name, value in bound.arguments.items():
            v = unwrap(value)
            if name in fn.constexpr_names and not isinstance(v, tensor):
                static[name] = constexpr(v)
            elif isinstance(v, tensor):  # (a tl.constexpr annotation on a helper is a hint only)
                dynamic.append((name, v))
            elif is_aggregate(v) and tensor_leaves(v):
                composites[name] = v
                dynamic.extend((f"{name}_{i}", t) for i, t in enumerate(tensor_leaves(v)))
            elif isinstance(v, tuple) and any(isinstance(unwrap(i), tensor) for i in v):
                raise TypeError(f"`{name}` of {fn.__name__} was given a tuple mixing tensors "
                                "with compile-time objects; pass them separately")
            else:
                static[name] = wrap_static(v)
        key = (id(fn), tuple((n, t.type) for n, t in dynamic),
               tuple((n, _static_key(v)) for n, v in static.items()),
               tuple((n, structure_key(v)) for n, v in composites.items()))
        spec = self._specializations.get(key)
        if spec is None:
            if key in self._in_progress:
                raise RecursionError(f"recursive call of @jit function {fn.__name__} is not "
                                     "supported")
            self._in_progress.add(key)
            try:
                spec = self._specialize(fn, dynamic, static, composites)
            except CompilationError as err:
                self._blame_the_call(fn, dynamic, err)
                raise
            finally:
                self._in_progress.discard(key)
            self._specializations[key] = spec
        op = caller.builder.create(ops.CallOp, spec.name, [t.handle for _, t in dynamic],
                                   result_types=spec.result_types)
        if spec.returned is None:
            return None
        return rebuild_tensors(spec.returned, (tensor(r) for r in op.results))

    @staticmethod
    def _blame_the_call(fn: KernelSource, dynamic: list[tuple[str, tensor]],
                        err: CompilationError) -> None:
        """A callee that failed after this call gave run-time values to parameters it
        annotates ``tl.constexpr``: the call is the user's mistake, so say so at the call
        (the frontend's choke point adds the caller's line)."""
        wrong = [name for name, _ in dynamic if name in fn.constexpr_names]
        if wrong:
            where = f"{err.loc.file}:{err.loc.line}" if err.loc else "its body"
            raise TypeError(
                f"{fn.__name__}() needs compile-time values for {', '.join(f'`{n}`' for n in wrong)} "
                f"(annotated tl.constexpr), but this call passes run-time values; pass a "
                f"tl.constexpr parameter, a literal or a constexpr global instead.  "
                f"({fn.__name__} failed at {where}: {err.message})") from None

    def _specialize(self, fn: KernelSource, dynamic: list[tuple[str, tensor]],
                    static: dict[str, Any], composites: dict[str, Any]) -> Specialization:
        from .generator import FunctionGenerator
        name = self._mangle(fn, dynamic, static)
        body = Block.with_args([t.type for _, t in dynamic], [n for n, _ in dynamic])
        function = Function(name, body, loc=self.def_loc(fn))
        self.module.add(function)
        scope: dict[str, Any] = dict(static)
        args = {n: tensor(a) for (n, _), a in zip(dynamic, body.args)}
        scope.update(args)
        for param, template in composites.items():  # rebuilt around the function's arguments
            count = len(tensor_leaves(template))
            scope[param] = rebuild_tensors(template, (args[f"{param}_{i}"] for i in range(count)))
        generator = FunctionGenerator(self, fn, function, scope, is_kernel=False)
        tree = self.tree_of(fn)
        result = generator.generate(tree)
        with generator.builder.at_loc(generator.return_loc or self.def_loc(fn)):
            returned = None if unwrap(result) is None else \
                _returnable(result, generator.builder)
            values = tensor_leaves(returned)
            function.result_types = [v.type for v in values]
            generator.builder.create(ops.ReturnOp, [v.handle for v in values])
        return Specialization(name, function.result_types, returned)

    def _mangle(self, fn: KernelSource, dynamic: list[tuple[str, tensor]],
                static: dict[str, Any]) -> str:
        parts = [str(t.type) for _, t in dynamic]
        for n, v in static.items():
            v = unwrap(v)
            if isinstance(v, (bool, int, float, str, type(None), dtype)):
                parts.append(f"{n}{v}")
            elif hasattr(v, "__name__"):
                parts.append(f"{n}{v.__name__}")
        suffix = _sanitize("_".join(parts))
        if len(suffix) > 48:
            suffix = suffix[:32] + "_" + hashlib.sha1(suffix.encode()).hexdigest()[:8]
        base = f"{fn.__name__}__{suffix}" if suffix else f"{fn.__name__}__"
        name, n = base, 1
        while name in self.module.functions:
            name = f"{base}_{n}"
            n += 1
        return name
