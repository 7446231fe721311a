"""``@anytile.jit``: the kernel object users decorate, index with a grid and call."""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import textwrap
from typing import Any, Callable, Optional

from ..errors import AnytileError


class JITFunction:
    """A Python function compiled by anytile.

    Attributes the frontend relies on:
      ``fn``            the Python function;
      ``src``           its dedented source, starting at ``def`` (decorators stripped);
      ``file``          the file it was defined in;
      ``first_line``    the 1-based line of ``def`` in that file (so a node at line ``n`` of
                        ``src`` is at ``first_line + n - 1``);
      ``col_offset``    the indentation removed by dedenting (add to node columns);
      ``arg_names``     parameter names in order;
      ``constexpr_names`` the parameters annotated ``tl.constexpr``;
      ``defaults``      parameter defaults by name;
      ``globals``       the function's globals (names resolve there, then in builtins);
      ``__name__``      the function's name.
    """

    def __init__(self, fn: Callable, *, do_not_specialize: tuple = (),
                 debug: Optional[bool] = None, noinline: bool = False) -> None:
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
        raw = "".join(lines)
        self.col_offset = len(lines[0]) - len(lines[0].lstrip())
        src = textwrap.dedent(raw)
        # strip decorators: the source handed to the frontend starts at ``def``
        tree = ast.parse(src)
        fdef = tree.body[0]
        assert isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef))
        def_line = fdef.lineno
        self.src = "\n".join(src.splitlines()[def_line - 1:]) + "\n"
        self.first_line = first + def_line - 1
        sig = inspect.signature(fn)
        self.signature = sig
        self.arg_names = list(sig.parameters)
        self.defaults = {k: p.default for k, p in sig.parameters.items()
                         if p.default is not inspect.Parameter.empty}
        self.constexpr_names = [k for k, p in sig.parameters.items() if _is_constexpr_annotation(p.annotation, fn)]
        self.do_not_specialize = tuple(do_not_specialize)
        self.debug = debug
        self.noinline = noinline
        self.globals = fn.__globals__
        self._launcher_cache: dict = {}
        self._constexpr_positions = frozenset(
            i for i, n in enumerate(self.arg_names) if n in self.constexpr_names)
        self._runtime_positions = [i for i in range(len(self.arg_names))
                                   if i not in self._constexpr_positions]
        self._deps: Optional[tuple] = None
        self._dep_bindings: tuple = ()     # (globals, name, object) of each called jit function
        self._fast_cache: dict = {}        # fast key -> (raw launcher, CompiledKernel)
        self._fast_deps: Optional[str] = None
        from .launch import make_binder, make_fast_launcher
        self._binder = make_binder(self)
        self._fast = make_fast_launcher(self)
        functools.update_wrapper(self, fn, updated=())

    @property
    def cache_key(self) -> str:
        """A hash of this function's source (dependencies are added by the compiler)."""
        return hashlib.sha256(self.src.encode()).hexdigest()

    def __repr__(self) -> str:
        return f"JITFunction({self.__module__}:{self.__qualname__})"

    # -- launching -----------------------------------------------------------------------------
    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        """``kernel[grid](*args, **kwargs)``: ``grid`` is 1-3 ints or ``callable(meta)``."""
        return functools.partial(self._fast, grid)

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Specialise, compile (cached) and launch; returns the ``CompiledKernel``."""
        from .launch import launch
        try:
            return launch(self, args, kwargs, grid, warmup=False)
        except AnytileError as exc:  # the user's error: show their line, not our internals
            raise exc.with_traceback(None) from None

    def warmup(self, *args: Any, grid: Any = (1,), **kwargs: Any) -> Any:
        """Compile for these arguments without running; returns the ``CompiledKernel``."""
        from .launch import launch
        try:
            return launch(self, args, kwargs, grid, warmup=True)
        except AnytileError as exc:
            raise exc.with_traceback(None) from None

    def dependencies_key(self) -> str:
        """A hash of this function's source and of every jit function it can reach through
        its globals; recomputed only when one of those globals is rebound."""
        cached = self._deps
        if cached is not None and self._deps_current():
            return cached[0]
        seen: dict[int, str] = {}
        bindings: list = []
        _collect_sources(self, seen, bindings)
        key = hashlib.sha256("".join(seen[k] for k in sorted(seen)).encode()).hexdigest()
        self._deps = (key, bindings)
        self._dep_bindings = tuple(bindings)
        return key

    def _deps_current(self) -> bool:
        """Whether every called jit function is still bound to the same name."""
        return all(g.get(n) is o for g, n, o in self._dep_bindings)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"'{self.__name__}' is an anytile kernel: launch it with a grid, "
            f"{self.__name__}[grid](...), or call it from inside another @jit function")


def _collect_sources(fn: "JITFunction", seen: dict[int, str], bindings: list) -> None:
    if id(fn) in seen:
        return
    seen[id(fn)] = fn.cache_key
    for node in ast.walk(ast.parse(fn.src)):
        if isinstance(node, ast.Name):
            name, target = node.id, fn.globals.get(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = node.value.id
            target = getattr(fn.globals.get(name), node.attr, None)
        else:
            continue
        if isinstance(target, JITFunction):
            bindings.append((fn.globals, name, fn.globals.get(name)))
            _collect_sources(target, seen, bindings)


def _is_constexpr_annotation(annotation: Any, fn: Callable) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, str):  # from __future__ import annotations
        return annotation.split(".")[-1] == "constexpr"
    from ..language.core import constexpr
    return annotation is constexpr or isinstance(annotation, constexpr)


def jit(fn: Optional[Callable] = None, **options: Any) -> Any:
    """Decorate a kernel or a device function: ``@jit`` or ``@jit(do_not_specialize=...)``."""
    if fn is None:
        return lambda f: JITFunction(f, **options)
    return JITFunction(fn, **options)
