"""``FunctionGenerator``: visits one ``@jit`` function's AST and builds its IR.

``visit`` is the one choke point for errors: any exception raised while visiting a node
(by the visitor, a builtin or the semantic layer) becomes a ``CompilationError`` carrying the
node's file:line:col and source line.  The innermost node wins, so errors inside a called
``@jit`` function point at that function's line."""
from __future__ import annotations

import ast
import builtins
import inspect
import operator
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..errors import CompilationError
from ..ir.builder import Builder
from ..ir.nodes import Function, Loc
from ..language import kinds
from ..language import objects as lc
from ..language import math as tl_math
from ..language import semantic
from ..language import standard
from ..language.objects import NotConstexprError, constexpr, is_builtin, tensor, unwrap
from ..language.source import KernelSource
from .control_flow import ControlFlowMixin
from .names import call_static, is_static_builtin, resolve_global, wrap_static

if TYPE_CHECKING:
    from .context import ModuleContext

# operator node -> (tensor method, reflected method, Python operator for compile-time values)
_BINARY: dict[type, tuple[str, str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("__add__", "__radd__", operator.add),
    ast.Sub: ("__sub__", "__rsub__", operator.sub),
    ast.Mult: ("__mul__", "__rmul__", operator.mul),
    ast.Div: ("__truediv__", "__rtruediv__", operator.truediv),
    ast.FloorDiv: ("__floordiv__", "__rfloordiv__", operator.floordiv),
    ast.Mod: ("__mod__", "__rmod__", operator.mod),
    ast.Pow: ("__pow__", "__rpow__", operator.pow),
    ast.BitAnd: ("__and__", "__rand__", operator.and_),
    ast.BitOr: ("__or__", "__ror__", operator.or_),
    ast.BitXor: ("__xor__", "__rxor__", operator.xor),
    ast.LShift: ("__lshift__", "__rlshift__", operator.lshift),
    ast.RShift: ("__rshift__", "__rrshift__", operator.rshift),
}
_COMPARE: dict[type, tuple[str, str, Callable[[Any, Any], Any]]] = {
    ast.Lt: ("__lt__", "__gt__", operator.lt),
    ast.LtE: ("__le__", "__ge__", operator.le),
    ast.Gt: ("__gt__", "__lt__", operator.gt),
    ast.GtE: ("__ge__", "__le__", operator.ge),
    ast.Eq: ("__eq__", "__eq__", operator.eq),
    ast.NotEq: ("__ne__", "__ne__", operator.ne),
}
_STATIC_COMPARE = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
                   ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}

_UNSUPPORTED = {
    "Lambda": "lambda expressions are not supported inside @jit functions; define a @jit "
              "function instead",
    "Try": "`try` statements are not supported inside @jit functions",
    "With": "`with` statements are not supported inside @jit functions",
    "ListComp": "list comprehensions are not supported inside @jit functions; use "
                "tl.static_range to repeat code",
    "GeneratorExp": "generator expressions are not supported inside @jit functions",
    "SetComp": "set comprehensions are not supported inside @jit functions",
    "DictComp": "dict comprehensions are not supported inside @jit functions",
    "Break": "`break` is not supported inside @jit functions (loops cannot be left early); "
             "use a `while` loop whose condition becomes false instead",
    "Continue": "`continue` is not supported inside @jit functions; put the rest of the "
                "loop body under an `if` instead",
    "Raise": "`raise` is not supported inside @jit functions; use tl.static_assert or "
             "tl.device_assert",
    "FunctionDef": "nested function definitions are not supported; define a @jit function "
                   "at module level",
    "ClassDef": "class definitions are not supported inside @jit functions",
    "Import": "`import` is not supported inside @jit functions; import at module level",
    "ImportFrom": "`import` is not supported inside @jit functions; import at module level",
    "Global": "`global` is not supported inside @jit functions",
    "Nonlocal": "`nonlocal` is not supported inside @jit functions",
    "Delete": "`del` is not supported inside @jit functions",
    "Dict": "dict literals are not supported inside @jit functions",
    "Set": "set literals are not supported inside @jit functions",
    "NamedExpr": "assignment expressions (`:=`) are not supported inside @jit functions",
    "Yield": "`yield` is not supported inside @jit functions",
    "Await": "`await` is not supported inside @jit functions",
}


def _error_message(e: BaseException) -> str:
    text = str(e)
    if isinstance(e, (TypeError, ValueError, NameError, AssertionError, AttributeError,
                      SyntaxError)) and text:
        return text
    return f"{type(e).__name__}: {text}" if text else f"internal compiler error ({type(e).__name__})"


def _bare(e: BaseException) -> BaseException:
    """``e`` without the compiler's frames or the errors it was raised over: the cause a
    ``CompilationError`` keeps (``err.__cause__``, where Triton's tests look for the rule
    that was broken), printed as one line above the error."""
    e.__cause__, e.__context__, e.__suppress_context__ = None, None, True
    return e.with_traceback(None)


class FunctionGenerator(ControlFlowMixin, ast.NodeVisitor):
    """Builds the body of ``function`` from ``fn``'s source, starting from ``scope``."""

    def __init__(self, ctx: "ModuleContext", fn: KernelSource, function: Function,
                 scope: dict[str, Any], is_kernel: bool) -> None:
        self.ctx = ctx
        self.fn = fn
        self.function = function
        self.is_kernel = is_kernel
        self.builder = Builder(function.body, function.loc)
        self.scope: dict[str, Any] = dict(scope)
        self.lines = fn.src.splitlines()
        self.returned = False
        self.return_value: Any = None
        self.return_loc: Optional[Loc] = None
        self.tail_return: Any = None  # what the tail region being visited returns
        self.tail_return_stmt: Optional[ast.Return] = None
        self.dynamic_depth = 0

    # -- entry -----------------------------------------------------------------------------
    def generate(self, tree: ast.FunctionDef) -> Any:
        """Visit the function body; returns what it returns (None, a tensor or a tuple)."""
        self.visit_block(tree.body, tail=True)
        return self.return_value

    # -- locations and the error choke point -------------------------------------------------
    def loc_of(self, node: ast.AST) -> Loc:
        if not hasattr(node, "lineno"):
            return self.builder.loc
        return Loc(self.fn.file, self.fn.first_line + node.lineno - 1,
                   self.fn.col_offset + node.col_offset, self.fn.__name__)

    def source_line(self, loc: Loc) -> Optional[str]:
        index = loc.line - self.fn.first_line
        if 0 <= index < len(self.lines):
            return " " * self.fn.col_offset + self.lines[index]
        return None

    def visit(self, node: ast.AST) -> Any:
        loc = self.loc_of(node)
        try:
            with self.builder.at_loc(loc):
                return super().visit(node)
        except CompilationError:
            raise
        except Exception as e:  # the choke point: every failure gets the user's line
            raise CompilationError(_error_message(e), loc, self.source_line(loc)) \
                from _bare(e)

    def generic_visit(self, node: ast.AST) -> Any:
        name = type(node).__name__
        raise SyntaxError(_UNSUPPORTED.get(name, f"`{name}` syntax is not supported inside "
                                                 "@jit functions"))

    # -- statements --------------------------------------------------------------------------
    def visit_block(self, stmts: list[ast.stmt], tail: bool = False) -> None:
        """Visit statements in order until a `return`.

        In ``tail`` position (nothing runs after these statements) an ``if`` whose body ends
        with ``return`` takes the rest of the statements as its ``else``, so early returns
        work under run-time conditions; the branches' return values merge in the ``if``."""
        for i, stmt in enumerate(stmts):
            if self.returned:
                return
            if tail and isinstance(stmt, ast.Return) and i == len(stmts) - 1:
                self.tail_return_stmt = stmt  # a return that ends the function: allowed
            if tail and isinstance(stmt, ast.If) and _returns_in(stmt):
                # the statements after the `if` run in each branch that does not return
                # first (nested `if`s that return are then in tail position too)
                rest = stmts[i + 1:]
                joined = ast.If(test=stmt.test, body=_then(stmt.body, rest),
                                orelse=_then(stmt.orelse, rest))
                ast.copy_location(joined, stmt)
                self.visit_if_node(joined, merge=False, tail=True)
                return
            self.visit(stmt)

    def visit_Expr(self, node: ast.Expr) -> None:
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        value = self.visit(node.value)
        annotation = unwrap(self.visit(node.annotation))
        if annotation is constexpr and isinstance(value, tensor):
            raise TypeError(f"`{ast.unparse(node.target)}` is annotated tl.constexpr but its "
                            "value is only known when the kernel runs")
        self.assign(node.target, value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise SyntaxError(f"augmented assignment to `{ast.unparse(node.target)}` is not "
                              "supported; tiles are values, not arrays")
        current = self.lookup(node.target.id)
        self.assign(node.target, self.binary(node.op, current, self.visit(node.value)))

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, tensor) and not value.handle.name:
                value.handle.name = target.id
            self.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = unwrap(value)
            if not isinstance(items, tuple):
                raise TypeError(f"cannot unpack {_describe(value)} into "
                                f"{len(target.elts)} names")
            if len(items) != len(target.elts):
                raise ValueError(f"cannot unpack {len(items)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, items):
                self.assign(t, v)
        else:
            raise SyntaxError(f"assignment to `{ast.unparse(target)}` is not supported; tiles "
                              "are values: compute a new one (e.g. with tl.where) instead")

    def visit_Return(self, node: ast.Return) -> None:
        if self.dynamic_depth and node is not self.tail_return_stmt:
            raise SyntaxError("`return` inside a loop, or inside an `if` with a run-time "
                              "condition that is followed by more code, is not supported; "
                              "assign the result to a variable and return it at the end")
        value = self.visit(node.value) if node.value is not None else None
        if self.is_kernel and unwrap(value) is not None:
            raise TypeError("a kernel cannot return a value; store results through a pointer")
        self.return_loc = self.builder.loc
        self.finish_return(value)

    def finish_return(self, value: Any) -> None:
        """Record ``value`` as what the current tail region (or the function) returns."""
        if self.dynamic_depth:
            self.tail_return = value
        else:
            self.return_value = value
            self.returned = True

    def visit_Assert(self, node: ast.Assert) -> None:
        cond = self.visit(node.test)
        msg = unwrap(self.visit(node.msg)) if node.msg is not None else ""
        if isinstance(cond, tensor):
            standard.device_assert(cond, msg, _builder=self.builder)
        elif not unwrap(cond):
            raise AssertionError(f"assertion failed{': ' + str(msg) if msg else ''}")

    # -- names and literals -----------------------------------------------------------------
    def lookup(self, name: str) -> Any:
        if name in self.scope:
            return self.scope[name]
        return resolve_global(name, self.fn)

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id)

    def visit_Constant(self, node: ast.Constant) -> Any:
        return wrap_static(node.value)

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        return self._sequence(node.elts)

    def visit_List(self, node: ast.List) -> tuple:
        return self._sequence(node.elts)

    def _sequence(self, elts: list[ast.expr]) -> tuple:
        out: list[Any] = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self._starred(e))
            else:
                out.append(self.visit(e))
        return tuple(out)

    def _starred(self, node: ast.Starred) -> tuple:
        value = unwrap(self.visit(node.value))
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"cannot unpack {_describe(value)} with `*`")
        return tuple(wrap_static(v) for v in value)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> constexpr:
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                value = self.visit(v.value)
                if isinstance(value, tensor):
                    raise TypeError("f-strings inside kernels can only format compile-time values")
                spec = unwrap(self.visit(v.format_spec)) if v.format_spec is not None else ""
                parts.append(format(unwrap(value), spec))
        return constexpr("".join(parts))

    # -- operators ---------------------------------------------------------------------------
    def binary(self, op: ast.operator, lhs: Any, rhs: Any) -> Any:
        entry = _BINARY.get(type(op))
        if entry is None:
            raise SyntaxError(f"the operator `{type(op).__name__}` is not supported inside "
                              "@jit functions (use tl.dot for matrix products)")
        return self._apply(entry, lhs, rhs)

    def _apply(self, entry: tuple, lhs: Any, rhs: Any) -> Any:
        method, reflected, static_op = entry
        if isinstance(lhs, tensor):
            return getattr(lhs, method)(rhs, _builder=self.builder)
        if isinstance(rhs, tensor):
            return getattr(rhs, reflected)(lhs, _builder=self.builder)
        return wrap_static(static_op(unwrap(lhs), unwrap(rhs)))

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binary(node.op, self.visit(node.left), self.visit(node.right))

    def visit_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise SyntaxError("chained comparisons (a < b < c) are not supported; write "
                              "(a < b) & (b < c)")
        lhs, rhs = self.visit(node.left), self.visit(node.comparators[0])
        op = type(node.ops[0])
        if op in _STATIC_COMPARE:
            if isinstance(lhs, tensor) and op in (ast.In, ast.NotIn) or isinstance(rhs, tensor):
                raise TypeError(f"`{ast.unparse(node)}` needs compile-time operands")
            return wrap_static(_STATIC_COMPARE[op](unwrap(lhs), unwrap(rhs)))
        return self._apply(_COMPARE[op], lhs, rhs)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.visit(node.operand)
        if isinstance(value, tensor):
            method = {ast.USub: "__neg__", ast.UAdd: "__pos__", ast.Invert: "__invert__",
                      ast.Not: "logical_not"}[type(node.op)]
            return getattr(value, method)(_builder=self.builder)
        v = unwrap(value)
        result = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
                  ast.Not: operator.not_}[type(node.op)](v)
        return wrap_static(result)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            if not isinstance(result, tensor) and bool(unwrap(result)) != is_and:
                return result  # short-circuit on a compile-time value, as Python does
            rhs = self.visit(value_node)
            if isinstance(result, tensor) or isinstance(rhs, tensor):
                combine = semantic.logical_and if is_and else semantic.logical_or
                result = combine(result, rhs, self.builder)
            else:
                result = rhs
        return result

    # -- attributes and subscripts -----------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> Any:
        value = self.visit(node.value)
        if isinstance(value, tensor) and node.attr == "T":
            return standard.trans(value, _builder=self.builder)
        if isinstance(value, tensor) and node.attr == "type":  # Triton's language-level type
            return wrap_static(lc.type_of(value))
        target = value if isinstance(value, tensor) else unwrap(value)
        if node.attr == "type" and not hasattr(target, "type"):
            found = kinds.type_of_value(target)  # constexpr_type or tuple_type, as in Triton
            if found is not None:
                return found
        if type(target) in (int, float, bool) and not hasattr(target, node.attr):
            # a Python number used as a tensor (``acc = 0`` then ``acc.to(tl.int64)``,
            # ``value.dtype``): Triton's numbers are tensors of their natural type
            target = semantic.to_tensor(target, self.builder)
        return wrap_static(getattr(target, node.attr))

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        value = self.visit(node.value)
        index = self.visit(node.slice)
        if isinstance(value, tensor):
            return value.__getitem__(index, _builder=self.builder)
        if isinstance(index, tensor):
            raise TypeError("a tuple can only be indexed with a compile-time integer")
        idx = unwrap(index)
        if isinstance(idx, tuple):
            idx = tuple(unwrap(i) for i in idx)
        return wrap_static(unwrap(value)[idx])

    def visit_Slice(self, node: ast.Slice) -> slice:
        parts = [None if n is None else unwrap(self.visit(n))
                 for n in (node.lower, node.upper, node.step)]
        return slice(*parts)

    # -- calls -------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> Any:
        fn = self.visit(node.func)
        args = self._sequence(node.args)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise SyntaxError("`**kwargs` in calls is not supported inside @jit functions")
            kwargs[kw.arg] = self.visit(kw.value)
        try:
            return self.call(fn, list(args), kwargs, node.func)
        except NotConstexprError as e:
            expr = self._argument_source(fn, node, e.param)
            raise TypeError(f"`{expr}` must be a tl.constexpr because {e.reason}") from None

    def _argument_source(self, fn: Any, node: ast.Call, param: str) -> str:
        """The user's expression passed for parameter ``param`` (for error messages)."""
        try:
            target = unwrap(fn)
            sig = target.signature if isinstance(target, KernelSource) else inspect.signature(target)
            bound = sig.bind_partial(*node.args, **{k.arg: k.value for k in node.keywords if k.arg})
        except (TypeError, ValueError):
            return param
        name, _, index = param.partition("[")
        arg = bound.arguments.get(name)
        if index and isinstance(arg, (ast.List, ast.Tuple)):  # one element of a literal list
            position = int(index.rstrip("]"))
            if position < len(arg.elts):
                arg = arg.elts[position]
        elif index and isinstance(arg, tuple) and int(index.rstrip("]")) < len(arg):
            arg = arg[int(index.rstrip("]"))]  # one of several positional (*shape) arguments
        if isinstance(arg, ast.AST):
            return ast.unparse(arg)
        if isinstance(arg, tuple) and arg:
            return ", ".join(ast.unparse(a) for a in arg if isinstance(a, ast.AST))
        return param

    def call(self, fn: Any, args: list, kwargs: dict, spelled: Optional[ast.expr] = None) -> Any:
        """Call ``fn`` (a @jit function, a builtin or a compile-time Python callable);
        ``spelled``: how the kernel names it (for messages)."""
        fn = unwrap(fn)
        if isinstance(fn, KernelSource):
            return self.ctx.call_jit(fn, args, kwargs, self)
        if is_builtin(fn):
            return self._call_builtin(fn, args, kwargs)
        if fn is builtins.range:
            fn = lc.range
        if fn is builtins.min or fn is builtins.max:
            return self._python_min_max(fn, args, kwargs)
        if fn is builtins.print:
            return self._python_print(args)
        if fn is builtins.isinstance and len(args) == 2 and not kwargs:
            return self._python_isinstance(args[0], unwrap(args[1]))
        if fn is builtins.abs and len(args) == 1 and isinstance(args[0], tensor):
            return self._call_builtin(tl_math.abs, args, kwargs)
        if isinstance(fn, type) and fn.__module__.startswith("anytile.language"):
            return wrap_static(fn(*args, **kwargs))
        if is_static_builtin(fn) or callable(fn):
            name = ast.unparse(spelled) if spelled is not None else \
                getattr(fn, "__name__", repr(fn))
            return call_static(fn, args, kwargs, name)
        raise TypeError(f"{_describe(fn)} is not callable")

    def call_function(self, fn: KernelSource, args: list) -> Any:
        """Call a @jit function from a builtin (the combine function of tl.reduce)."""
        return self.ctx.call_jit(fn, list(args), {}, self)

    def _call_builtin(self, fn: Any, args: list, kwargs: dict) -> Any:
        sig = inspect.signature(fn)
        extra: dict[str, Any] = {"_builder": self.builder}
        if "_generator" in sig.parameters:
            extra["_generator"] = self
        try:
            sig.bind(*args, **kwargs, **extra)
        except TypeError as e:
            raise TypeError(f"{_builtin_name(fn)}(): {e}") from None
        return wrap_static(fn(*args, **kwargs, **extra))

    def _python_min_max(self, fn: Any, args: list, kwargs: dict) -> Any:
        if kwargs or not args:
            raise TypeError(f"{fn.__name__}() inside kernels takes positional arguments only")
        items = list(unwrap(args[0])) if len(args) == 1 else args
        if not any(isinstance(a, tensor) for a in items):
            return wrap_static(fn(unwrap(a) for a in items))
        combine = semantic.minimum if fn is builtins.min else semantic.maximum
        result = items[0]
        for item in items[1:]:
            result = combine(result, item, self.builder)
        return result

    @staticmethod
    def _python_isinstance(value: Any, classes: Any) -> constexpr:
        wanted = classes if isinstance(classes, tuple) else (classes,)
        wanted = tuple(unwrap(c) for c in wanted)
        # compile-time values are constexprs (as in Triton) and also their Python type
        return constexpr(isinstance(value, wanted) or isinstance(unwrap(value), wanted))

    def _python_print(self, args: list) -> None:
        """``print`` of compile-time values prints while compiling; with run-time values it
        is ``tl.device_print`` (as in Triton), the other arguments making the prefix."""
        tensors = [a for a in args if isinstance(a, tensor)]
        if not tensors:
            print(*(unwrap(a) for a in args))
            return
        prefix = " ".join(str(unwrap(a)) for a in args if not isinstance(a, tensor))
        standard.device_print(prefix, *tensors, _builder=self.builder)


def _returns_in(stmt: ast.If) -> bool:
    """Whether a branch of ``stmt`` (or of an ``if`` nested in one, not in a loop) returns."""
    for branch in (stmt.body, stmt.orelse):
        for s in branch:
            if isinstance(s, ast.Return) or (isinstance(s, ast.If) and _returns_in(s)):
                return True
    return False


def _then(branch: list, rest: list) -> list:
    """``branch`` followed by ``rest``, unless ``branch`` ends by returning."""
    return branch if branch and isinstance(branch[-1], ast.Return) else branch + rest


def _builtin_name(fn: Any) -> str:
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        return f"{type(owner).__name__}.{fn.__name__}"
    return f"tl.{fn.__name__}"


def _describe(value: Any) -> str:
    value = unwrap(value)
    if isinstance(value, tensor):
        return f"a tensor of {value.dtype!r}"
    return f"{type(value).__name__} {value!r}"
