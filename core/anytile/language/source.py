"""``KernelSource``: what the compiler knows about a ``@jit`` function before running anything.

Its source text (dedented, starting at ``def``) and where it lives in the user's file, its
parameters (which are ``tl.constexpr``, their defaults), the names it reads from its globals and
closure, and whether the names its last dependency scan read still hold what they held (the
scan itself is the runtime's: ``anytile.runtime.dependencies``).  The frontend compiles from it;
``anytile.runtime.jit.JITFunction`` builds on it to launch.  It sits below the frontend so that
the frontend never imports the runtime."""
from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
import types
from typing import Any, Callable, Optional

from .objects import const, constexpr

__all__ = ["KernelSource", "is_constexpr_annotation", "is_const_annotation", "ABSENT"]

ABSENT = object()   # ``lookup`` of a name neither the closure nor the globals define


def is_const_annotation(annotation: Any) -> bool:
    """Whether a parameter annotation says ``tl.const`` (a pointer only read through)."""
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "const"
    return annotation is const


def is_constexpr_annotation(annotation: Any) -> bool:
    """Whether a parameter or global annotation says ``tl.constexpr`` (also as a string, under
    ``from __future__ import annotations``)."""
    if annotation is inspect.Parameter.empty or annotation is None:
        return False
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr"
    return annotation is constexpr or isinstance(annotation, constexpr)


class KernelSource:
    """The source of a Python function compiled by anytile.

    ``fn``               the Python function;
    ``src``              its dedented source, starting at ``def`` (decorators stripped);
    ``file``             the file it was defined in;
    ``first_line``       the 1-based line of ``def`` in that file (a node at line ``n`` of
                         ``src`` is at ``first_line + n - 1``);
    ``col_offset``       the indentation removed by dedenting (add to node columns);
    ``signature``        its ``inspect.Signature``; ``arg_names`` the parameters in order;
    ``constexpr_names``  the parameters annotated ``tl.constexpr``; ``defaults`` by name;
    ``globals``          the function's globals (names resolve in the closure, then there).
    """

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.file = inspect.getsourcefile(fn) or "<unknown>"
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            raise TypeError(f"@anytile.jit needs the source of '{fn.__name__}', and Python has "
                            f"none for it: define kernels in a .py file (not with exec() or "
                            f"at an interactive prompt)") from None
        self.col_offset = len(lines[0]) - len(lines[0].lstrip())
        src = textwrap.dedent("".join(lines))
        fdef = ast.parse(src).body[0]
        assert isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef))
        self.src = "\n".join(src.splitlines()[fdef.lineno - 1:]) + "\n"
        self.first_line = first + fdef.lineno - 1
        self.signature = inspect.signature(fn)
        params = self.signature.parameters
        self.arg_names = list(params)
        self.defaults = {k: p.default for k, p in params.items()
                         if p.default is not inspect.Parameter.empty}
        self.constexpr_names = [k for k, p in params.items() if is_constexpr_annotation(p.annotation)]
        self.const_names = [k for k, p in params.items() if is_const_annotation(p.annotation)]
        self.globals = fn.__globals__
        self._tree: Optional[ast.FunctionDef] = None
        self._reads: Optional[tuple] = None
        # (key, bindings) of the last dependency scan: ``JITFunction.dependencies_key`` sets it
        self._deps: Optional[tuple[str, tuple]] = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__module__}:{self.__qualname__})"

    @property
    def tree(self) -> ast.FunctionDef:
        """The parsed ``def`` (line numbers relative to ``src``)."""
        if self._tree is None:
            node = ast.parse(self.src).body[0]
            assert isinstance(node, ast.FunctionDef)
            self._tree = node
        return self._tree

    @property
    def source_hash(self) -> str:
        """A hash of this function's own source."""
        return hashlib.sha256(self.src.encode()).hexdigest()

    # -- the names it reads ------------------------------------------------------------------
    def closure_vars(self) -> dict[str, Any]:
        """The variables captured from enclosing functions (treated like globals)."""
        code = getattr(self.fn, "__code__", None)
        cells = getattr(self.fn, "__closure__", None) or ()
        out = {}
        for name, cell in zip(code.co_freevars if code else (), cells):
            try:
                out[name] = cell.cell_contents
            except ValueError:  # not assigned yet
                continue
        return out

    def lookup(self, name: str) -> Any:
        """What ``name`` means to this function outside its body: its closure, then its
        globals; ``ABSENT`` when neither defines it (builtins are not consulted)."""
        closure = self.closure_vars()
        if name in closure:
            return closure[name]
        return self.globals.get(name, ABSENT)

    def reads(self) -> tuple[tuple[str, Optional[str]], ...]:
        """Every ``name`` and ``name.attr`` the body mentions, as ``(name, attr or None)``."""
        if self._reads is None:
            found: dict[tuple[str, Optional[str]], None] = {}
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Name):
                    found[(node.id, None)] = None
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    found[(node.value.id, node.attr)] = None
            self._reads = tuple(found)
        return self._reads

    # -- whether the dependencies still hold (``anytile.runtime.dependencies`` finds them) ----
    def dependencies_current(self) -> bool:
        """Whether every name the last dependency scan read (``_deps``: closure cells, globals,
        ``module.name``) still holds the object it held then (cheap: one read per name)."""
        cached = self._deps
        if cached is None:
            return False
        for where, name, value in cached[1]:
            if type(where) is dict:
                now = where.get(name, ABSENT)
            elif type(where) is types.CellType:
                now = _cell_value(where)
            else:                                   # a module: ``module.helper``
                now = getattr(where, name, ABSENT)
            if now is not value:
                return False
        return True


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # emptied
        return ABSENT
