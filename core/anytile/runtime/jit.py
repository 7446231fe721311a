"""``@anytile.jit``: the kernel object users decorate, index with a grid and call.

``kernel[grid](*args)`` calls the launcher generated for the kernel (``fast_launch.py``),
which launches a repeated call straight through the backend and hands any other to the
general path (``launch.py``: device, arrays, specialisation, ``compile.py``, the backend);
``kernel.run(*args, grid=...)`` and ``kernel.warmup(...)`` take the general path directly."""
from __future__ import annotations

import ast
import functools
from typing import Any, Callable, Optional

from ..errors import AnytileError, user_facing
from ..language.source import KernelSource
from .dependencies import scan
from .fast_launch import binding_probe, make_binder, make_fast_launcher, make_key_function
from .launch import launch
from .specialize import Signature


class JITFunction(KernelSource):
    """A Python function compiled by anytile: its ``KernelSource`` (what the frontend reads)
    plus what launching needs: the ``launch_signature`` (how arguments specialise it), its
    compiled plans per specialisation and the generated fast launcher.  ``debug``: the
    default of the launch option ``debug`` (``None``: ``ANYTILE_DEBUG``).
    ``launch_metadata``: Triton's ``fn(grid, kernel, args) -> dict`` (``args`` by name), called
    only while launch hooks are set; its dict (a ``"name"``, counters such as ``"flops16"``
    and ``"bytes"``) is what the hooks and profilers see as ``LaunchInfo.metadata``.
    ``repr``: Triton's ``fn(specialization) -> str``, the name its compiled kernels report
    (``specialization.signature`` maps parameters to types such as ``"i32"``, ``"*fp16"``)."""

    def __init__(self, fn: Callable, *, do_not_specialize: tuple = (),
                 debug: Optional[bool] = None, noinline: bool = False,
                 launch_metadata: Optional[Callable] = None,
                 repr: Optional[Callable] = None) -> None:  # noqa: A002 (Triton's name)
        super().__init__(fn)
        self.do_not_specialize = tuple(do_not_specialize)
        self.debug = debug
        self.noinline = noinline
        if launch_metadata is not None and not callable(launch_metadata):
            raise TypeError(f"@jit(launch_metadata=...) of '{fn.__name__}' must be a function "
                            f"(grid, kernel, args) -> dict, got {launch_metadata!r}")
        self.launch_metadata = launch_metadata
        if repr is not None and not callable(repr):
            raise TypeError(f"@jit(repr=...) of '{fn.__name__}' must be a function "
                            f"(specialization) -> str, got {repr!r}")
        self.repr = repr
        self.launch_signature = Signature(self, self.do_not_specialize)
        self._plans: dict = {}             # (device, ArgSpecs, options, deps) -> LaunchPlan
        self._fast_cache: dict = {}        # key -> (raw launcher, CompiledKernel, probe, current)
        self._probe: Optional[tuple] = None   # (probe, current): whether a name read was rebound
        self._binder = make_binder(self)
        self._fast = make_fast_launcher(self)
        self._key_of: Optional[Callable[..., Any]] = None   # the fast key, built on first warmup
        functools.update_wrapper(self, fn, updated=())

    def _unsafe_update_src(self, new_src: str) -> None:
        """Replace the kernel's source text (Triton's helper of this name, which its tests
        use to patch an operator into a kernel): the same parameters, a new body; what was
        compiled from the old text is dropped.  Errors in the new text point at the lines of
        the original ``def``."""
        tree = ast.parse(new_src)
        if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
            raise AnytileError(f"_unsafe_update_src of '{self.__name__}': the new source must "
                               f"be a def")
        self.src = new_src if new_src.endswith("\n") else new_src + "\n"
        self._tree = self._reads = self._deps = self._probe = None
        self._plans.clear()
        self._fast_cache.clear()

    def dependencies_key(self) -> str:
        """A hash of what this kernel's compiled code depends on besides its arguments: its
        source, that of every ``@jit`` function it reaches, and the globals and closure
        variables they read (``dependencies.scan``); rescanned only when one of those names
        is rebound (``dependencies_current``), so a rebound ``tl.constexpr`` global compiles
        anew.  A rescan drops the fast path's entries: they check the bindings of before."""
        cached = self._deps
        if cached is not None and self.dependencies_current():
            return cached[0]
        found = scan(self)
        self._deps = (found.key, found.bindings)
        self._probe = binding_probe(found.bindings)
        self._fast_cache.clear()
        return found.key

    # -- launching -----------------------------------------------------------------------------
    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        """``kernel[grid](*args, **kwargs)``: ``grid`` is 1-3 ints or ``callable(meta)``."""
        return functools.partial(self._fast, grid)

    @user_facing
    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Specialise, compile (cached) and launch; returns the ``CompiledKernel``."""
        return launch(self, args, kwargs, grid, warmup=False)

    @user_facing
    def warmup(self, *args: Any, grid: Any = (1,), **kwargs: Any) -> Any:
        """Compile for these arguments without running; returns the ``CompiledKernel``.
        Arguments a launch has already run with are answered from the launch fast path's
        cache (Triton's tutorial softmax calls ``warmup`` before every launch)."""
        if self._key_of is None:
            self._key_of = make_key_function(self)
        try:
            entry = self._fast_cache.get(self._key_of(*args, **kwargs))
        except TypeError:               # wrong arguments or an unhashable key: said below
            entry = None
        if entry is not None and (entry[2] is None or entry[2]() is entry[3]):
            return entry[1]
        return launch(self, args, kwargs, grid, warmup=True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"'{self.__name__}' is an anytile kernel: launch it with a grid, "
            f"{self.__name__}[grid](...), or call it from inside another @jit function")


def jit(fn: Optional[Callable] = None, **options: Any) -> Any:
    """Decorate a kernel or a device function: ``@jit`` or ``@jit(do_not_specialize=...)``."""
    if fn is None:
        return lambda f: JITFunction(f, **options)
    return JITFunction(fn, **options)
