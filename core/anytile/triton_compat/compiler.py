"""Compiling as torch's inductor does: Triton's ``JITFunction`` attributes, ``ASTSource``,
``triton.compile``, ``CompiledKernel``, and ``triton.backends``' compiler side
(``BaseBackend``, ``make_backend``, ``backends``, ``triton_key``)."""
from __future__ import annotations

import abc
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .drivers import (DRIVERS, TRITON_BACKEND_NAMES, GPUTarget, arch_name, default_device,
                      family_device, family_of, host_kernel_view)
from .standin import TRITON_VERSION, not_provided

__all__ = ["KernelParam", "jit_class", "ASTSource", "CompiledKernel", "triton_compile",
           "BaseBackend", "FamilyBackend", "make_backend", "Backend", "backends_by_name",
           "triton_key"]


@dataclass(frozen=True)
class KernelParam:
    """One parameter as Triton's ``JITFunction.params`` lists it."""

    num: int
    name: str
    is_constexpr: bool
    is_const: bool
    do_not_specialize: bool
    do_not_specialize_on_alignment: bool


def jit_class() -> type:
    """Triton's ``JITFunction``: anytile's, with the attributes Triton's spells out
    (``params``, ``cache_key``) that torch's inductor reads."""
    import anytile as at

    class JITFunction(at.JITFunction):
        __doc__ = at.JITFunction.__doc__

        def __init__(self, fn: Callable, **options: Any) -> None:
            super().__init__(fn, **options)
            if self.repr is None:            # Triton's default: the function's name
                self.repr = lambda _: fn.__name__
            self.__globals__ = self.globals
            self.used_global_vals: dict = {}

        def __reduce__(self) -> tuple:
            # pickled to another process (torch's compile workers): rebuilt there from the
            # file that defines it
            return (_jit_from_file, (self.file, self.__module__, self.__name__, self.src))

        @property
        def params(self) -> list[KernelParam]:
            return [KernelParam(p.index, p.name, p.is_constexpr, p.is_const, not p.specialize,
                                not p.specialize) for p in self.launch_signature.params]

        @property
        def cache_key(self) -> str:
            """A hash of the source and of every ``@jit`` function it reaches."""
            return self.dependencies_key()

        def warmup(self, *args: Any, grid: Any = (1,), **kwargs: Any) -> Any:
            """Compile without running; on host devices the result's registers and shared
            memory read as Triton's occupancy formulas expect (``host_kernel_view``)."""
            compiled = super().warmup(*args, grid=grid, **kwargs)
            where = kwargs.get("device")
            dev = at.device(where) if where is not None else default_device()
            return host_kernel_view(compiled, dev)

    JITFunction.__module__ = "triton.runtime.jit"
    return JITFunction


def _jit_from_file(path: str, module_name: str, name: str, src: str) -> Any:
    """The ``@jit`` function ``name`` of the Python file at ``path``, as a pickled one is
    rebuilt: from its module when this process has it loaded (``__main__`` too), else by
    running the file as a new module; the attribute ``name``, or what it wraps (``.fn`` of an
    autotuner or heuristics), whose source must still be ``src``."""
    import anytile as at
    import hashlib
    module = next((m for m in (sys.modules.get(module_name), sys.modules.get("__main__"))
                   if m is not None and _same_file(getattr(m, "__file__", None), path)), None)
    if module is None:
        key = hashlib.sha256(f"{path}:{name}".encode()).hexdigest()[:16]
        spec = importlib.util.spec_from_file_location(f"anytile_triton_rebuilt_{key}", path)
        if spec is None or spec.loader is None or not os.path.isfile(path):
            raise at.AnytileError(f"cannot rebuild the kernel '{name}' in this process: its "
                                  f"file {path} is gone")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    found = getattr(module, name, None)
    while found is not None and not isinstance(found, at.JITFunction):
        found = getattr(found, "fn", None)
    if found is None or found.src != src:
        raise at.AnytileError(f"cannot rebuild the kernel '{name}' in this process: {path} "
                              f"no longer defines it as it was")
    return found


def _same_file(a: Optional[str], b: str) -> bool:
    return a is not None and os.path.abspath(a) == os.path.abspath(b)


class ASTSource:
    """What one ``triton.compile`` compiles: the ``@jit`` function ``fn``, its ``signature``
    (parameter name -> ``"*fp32"``, ``"i32"``... or ``"constexpr"``), the constexpr values
    (keyed by name or by ``(index,)``) and the attributes (``{(index,): [["tt.divisibility",
    16]]}``)."""

    def __init__(self, fn: Any, signature: dict, constexprs: Optional[dict] = None,
                 attrs: Optional[dict] = None) -> None:
        import anytile as at
        if not isinstance(fn, at.JITFunction):
            raise TypeError(f"ASTSource takes a @triton.jit function, got {fn!r}")
        if any(not isinstance(k, str) for k in signature):
            raise TypeError("ASTSource: the signature's keys must be parameter names")
        self.fn, self.name, self.signature = fn, fn.__name__, dict(signature)
        self.constants: dict[tuple, Any] = {}
        for key, value in (constexprs or {}).items():
            self.constants[(fn.arg_names.index(key),) if isinstance(key, str) else key] = value
        self.attrs = dict(attrs or {})

    def hash(self) -> str:
        import hashlib
        key = (f"{self.fn.dependencies_key()}-{sorted(self.signature.items())}-"
               f"{sorted(self.constants.items(), key=repr)}-{sorted(self.attrs.items(), key=repr)}")
        return hashlib.sha256(key.encode()).hexdigest()

    def spec_text(self) -> tuple[dict[str, str], dict[str, Any]]:
        """``at.compile``'s signature strings (``":16"`` where ``tt.divisibility`` is 16) and
        constexpr values by name."""
        names = self.fn.arg_names
        constexprs = {names[k[0]]: v for k, v in self.constants.items() if len(k) == 1}
        divisible = {names[k[0]] for k, props in self.attrs.items()
                     if len(k) == 1 and ["tt.divisibility", 16] in [list(p) for p in props]}
        signature = {}
        for name, text in self.signature.items():
            if text == "constexpr":
                if name not in constexprs:
                    raise TypeError(f"ASTSource of '{self.name}': '{name}' is a constexpr "
                                    f"without a value")
                continue
            text = str(text)
            base = text.lstrip("*")
            text = text[:len(text) - len(base)] + _IR_SPELLING.get(base, base)
            signature[name] = f"{text}:16" if name in divisible else text
        return signature, constexprs


#: Triton's signature spellings that anytile's signature parser reads by their IR name
_IR_SPELLING = {"fp8e4b15": "f8e4b15"}


#: Triton options whose value is what anytile always does (any other value is not provided)
_FIXED_OPTIONS = {"sanitize_overflow": False, "launch_cooperative_grid": False,
                  "enable_reflect_ftz": False}


def _launch_options(options: dict) -> dict:
    """Triton's compile options as anytile's launch options."""
    out = {}
    for key, value in (options or {}).items():
        if key in _FIXED_OPTIONS:
            if bool(value) != _FIXED_OPTIONS[key]:
                raise NotImplementedError(not_provided(f"the compile option {key}={value!r}"))
        else:
            out[key] = value
    return out




class CompiledKernel:
    """What ``triton.compile(ASTSource(...))`` returns: a kernel compiled for one device.
    ``run(grid_x, grid_y, grid_z, stream, function, metadata, launch_metadata, enter_hook,
    exit_hook, *args)`` launches it with every argument of the kernel (its constexprs too, as
    Triton's launcher takes them); ``kernel[grid](*args)`` does the same.  ``metadata``
    (``shared``, ``num_warps``...), ``asm``, ``n_regs``, ``n_spills`` and ``hash`` are the
    compile's.  It pickles without its handles; ``_init_handles()`` makes them again."""

    def __init__(self, src: ASTSource, device: str, options: dict, compiled: Any) -> None:
        import hashlib
        self.src, self.name, self.device = src, compiled.name, device
        self.options = options
        self.asm, self.metadata = dict(compiled.asm), compiled.metadata
        self.n_regs, self.n_spills = compiled.n_regs, compiled.n_spills
        self.hash = hashlib.sha256(f"{src.hash()}-{device}-{sorted(options.items())}"
                                   .encode()).hexdigest()
        self._init_handles()

    def _init_handles(self) -> None:
        """``run`` and ``function`` (the kernel is loaded by its first launch)."""
        self.function = self.name
        self.run = self._run

    def _run(self, grid_x: int, grid_y: int, grid_z: int, stream: Any, function: Any,
             metadata: Any, launch_metadata: Any, enter_hook: Any, exit_hook: Any,
             *args: Any) -> None:
        # the launch hooks are anytile's knobs, which the launch itself calls; the launch
        # specialises on the arguments again (the compile's attributes may be coarser)
        options = self.options if default_device().name == self.device else \
            {**self.options, "device": self.device}
        self.src.fn[(grid_x, grid_y, grid_z)](*args, **options)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        grid = tuple(grid) + (1,) * (3 - len(grid))
        return lambda *args, stream=None: self._run(*grid, stream, self.function, None, None,
                                                     None, None, *args)

    def launch_metadata(self, grid: Any, stream: Any, *args: Any) -> None:
        """Triton's precomputed hook data: anytile's launch hooks get theirs from the launch."""
        return None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("run", "function")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._init_handles()


def triton_compile(src: Any, target: Optional["GPUTarget"] = None,
                   options: Optional[dict] = None) -> CompiledKernel:
    """``triton.compile(ASTSource(fn, signature, constexprs, attrs), target, options)``:
    compile for the device of ``target``'s family (the active driver's when omitted).
    Triton's IR (a path or text) is not accepted: anytile compiles Python kernels."""
    import anytile as at
    from ..runtime.launch import plan_for
    if not isinstance(src, ASTSource):
        if isinstance(src, (str, os.PathLike)):
            raise NotImplementedError(not_provided(f"triton.compile of Triton IR ({src!s})"))
        raise TypeError(f"triton.compile takes a triton.compiler.ASTSource, got {src!r}")
    family = target.backend if target is not None else family_of(default_device())
    if family not in DRIVERS:
        raise at.AnytileError(f"triton.compile: no anytile device family for target {target}")
    launch = _launch_options(options or {})
    signature, constexprs = src.spec_text()
    try:
        dev = family_device(family)
    except at.AnytileError:
        chosen = os.environ.get("ANYTILE_DEVICE", "")
        if target is None or not chosen:
            raise
        # a process that cannot use the chosen device (torch's compile workers, forked after
        # CUDA was initialised) compiles for the target ahead of time; its parent launches
        return _compile_ahead(src, target, chosen, signature, constexprs, launch)
    specs = src.fn.launch_signature.from_text(signature, constexprs)
    compiled = plan_for(src.fn, dev, specs, launch, warmup=True).compiled
    return CompiledKernel(src, dev.name, launch, compiled)


def _compile_ahead(src: ASTSource, target: "GPUTarget", chosen: str, signature: dict,
                   constexprs: dict, launch: dict) -> CompiledKernel:
    """``triton.compile`` for ``target`` with ``at.compile`` (no device needed), by the
    backend of the chosen device (``ANYTILE_DEVICE``), as a kernel of that device."""
    import anytile as at
    from ..runtime.discovery import list_backends
    prefix = chosen.partition(":")[0]
    backend = next((r.backend for r in list_backends()
                    if r.backend is not None and r.backend.device_prefix == prefix), None)
    if backend is None or (backend.triton_backend or "cpu") != target.backend:
        raise at.BackendError(f"triton.compile for {target}: the chosen device {chosen} is "
                              f"not usable in this process and its backend does not compile "
                              f"for that target")
    compiled = at.compile(src.fn, target=f"{backend.name}:{arch_name(target)}",
                          signature=signature, constexprs=constexprs, **launch)
    return CompiledKernel(src, chosen, launch, compiled)


class BaseBackend(abc.ABC):
    """Triton's base class of a compiler backend (``triton.backends.compiler``), with the
    part of its interface that does not read Triton's IR: anytile's backends compile Python
    kernels through their own stages (``anytile.backend``)."""

    def __init__(self, target: GPUTarget) -> None:
        self.target = target

    @staticmethod
    @abc.abstractmethod
    def supports_target(target: GPUTarget) -> bool:
        """Whether this backend compiles for ``target``."""

    @abc.abstractmethod
    def hash(self) -> str:
        """What identifies the code this backend generates (part of cache keys)."""

    @abc.abstractmethod
    def parse_options(self, options: dict) -> Any:
        """Compile options (a dict) -> the backend's options object."""


class FamilyBackend(BaseBackend):
    """``make_backend(target)``: anytile's backend of the family's device."""

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend in DRIVERS

    def device(self) -> Any:
        return family_device(self.target.backend)

    def hash(self) -> str:
        import anytile as at
        dev = self.device()
        return f"anytile-{at.__version__}-{dev.backend.target_of(dev.info)}"

    def parse_options(self, options: dict) -> Any:
        """anytile's ``CompileOptions`` (``num_warps``, ``num_stages``, ``debug``...)."""
        return self.device().backend.parse_options(**_launch_options(options))


def make_backend(target: GPUTarget) -> BaseBackend:
    """The compiler backend for ``target`` (``triton.compiler.compiler.make_backend``)."""
    if not FamilyBackend.supports_target(target):
        raise NotImplementedError(not_provided(f"a compiler backend for target {target}"))
    return FamilyBackend(target)


@dataclass(frozen=True)
class Backend:
    """One entry of ``triton.backends.backends``: the compiler and driver classes."""

    compiler: type
    driver: type


def backends_by_name() -> dict[str, Backend]:
    """``triton.backends.backends``: Triton's name for each family anytile has a backend
    installed for (``nvidia``, ``amd``), and ``cpu`` (host devices; the interpreter is
    always there)."""
    from ..runtime.discovery import discover
    families = {"cpu"}
    for record in discover().values():
        if record.backend is not None:
            families.add(record.backend.triton_backend or "cpu")
    return {TRITON_BACKEND_NAMES[f]: Backend(FamilyBackend, DRIVERS[f])
            for f in ("cuda", "hip", "cpu") if f in families}


def triton_key() -> str:
    """What identifies this compiler build (Triton's version and anytile's sources)."""
    import anytile as at
    from ..runtime.cache import _source_fingerprint
    return f"{TRITON_VERSION}-anytile-{at.__version__}-" \
           f"{_source_fingerprint(os.path.dirname(os.path.abspath(at.__file__)))}"


