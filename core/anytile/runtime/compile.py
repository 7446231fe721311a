"""Compiling a kernel: frontend -> generic passes -> the backend's named stages.

``compile_kernel(request)`` is the one path every compile takes (a launch's ``plan_for`` and
``at.compile`` alike): it looks in the on-disk cache for backends that keep one, else
1. ``frontend.compile_to_ir``       Python AST -> tile IR, for the request's specialisation;
2. ``passes.run_default_pipeline``  inline, canonicalise, fold, CSE, DCE;
3. ``check_lowered_ops``            the backend lowers every op of the IR (else a
                                    ``CompilationError`` naming the op);
4. each ``Backend.stages`` stage    in order, its output kept in ``asm[stage.name]`` and its
                                    facts in the typed ``KernelMetadata``.
With ``ANYTILE_VERIFY=1`` the IR is verified after every pass and every stage producing IR."""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..backend import (Backend, CompiledKernel, CompileOptions, KernelMetadata, Target,
                       check_lowered_ops)
from ..errors import AnytileError, BackendError, CompilationError, user_facing
from ..ir.parser import parse_module
from ..ir.printer import print_module
from ..ir.types import PointerType
from ..ir.verifier import verify_if_enabled
from ..language.objects import dtype_of
from ..language.source import KernelSource
from . import cache
from .discovery import get_backend
from .hooks import call_compile_listener
from .specialize import Signature, Specialization

__all__ = ["CompileRequest", "compile_kernel", "compile"]


@dataclass(frozen=True)
class CompileRequest:
    """Everything one compile depends on: the kernel's source, the backend and target, the
    options and the specialisation (types, constexprs, attributes)."""

    source: KernelSource
    backend: Backend
    target: Target
    options: CompileOptions
    spec: Specialization

    @property
    def signature(self) -> list[tuple[str, Any]]:
        """The runtime parameters and their IR types, in order (constexprs removed)."""
        return list(self.spec.arg_types.items())   # parameters in order, then descriptor leaves


class KernelSpecialization:
    """What ``@jit(repr=fn)`` is given to name a compiled kernel (Triton's object of this
    role): ``signature`` maps every parameter to its type as Triton spells it (``"i32"``,
    ``"*fp32"``, ``"constexpr"``), ``constants`` the constexpr values."""

    def __init__(self, request: CompileRequest) -> None:
        self.name = request.source.__name__
        self.constants = dict(request.spec.constexprs)
        self.signature: dict[str, str] = {}
        for name in request.source.arg_names:
            if name in self.constants:
                self.signature[name] = "constexpr"
            elif name in request.spec.arg_types:
                t = request.spec.arg_types[name]
                if isinstance(t, PointerType):
                    self.signature[name] = "*" + _triton_scalar(dtype_of(t.pointee).name)
                else:
                    self.signature[name] = _triton_scalar(dtype_of(t).name)

    def __repr__(self) -> str:
        return f"KernelSpecialization({self.name}, {self.signature})"


def _triton_scalar(name: str) -> str:
    short = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
             "float8e4nv": "fp8e4nv", "float8e5": "fp8e5", "int1": "i1"}
    if name in short:
        return short[name]
    for long, brief in (("uint", "u"), ("int", "i")):
        if name.startswith(long):
            return brief + name[len(long):]
    return name


def _named(kernel: CompiledKernel, request: CompileRequest) -> CompiledKernel:
    """``kernel`` named by the source's ``repr`` function, if it has one."""
    name_fn = getattr(request.source, "repr", None)
    if name_fn is not None:
        name = name_fn(KernelSpecialization(request))
        if not isinstance(name, str):
            raise CompilationError(f"@jit(repr=...) of '{request.source.__name__}' returned "
                                   f"{type(name).__name__} {name!r}; it must return a str")
        kernel.name = name
    return kernel


def compile_kernel(request: CompileRequest) -> CompiledKernel:
    """Compile for ``request.target``: every stage's output is kept in ``asm``.  Backends
    declaring ``disk_cacheable`` go through the on-disk cache (``runtime/cache.py``).  The
    result's ``name`` is the kernel's (or its ``@jit(repr=...)``'s); the symbol the backends
    load is ``metadata.name``."""
    return _named(_compile_kernel(request), request)


def _compile_kernel(request: CompileRequest) -> CompiledKernel:
    started = time.perf_counter()
    folder = cache.cache_dir() if getattr(request.backend, "disk_cacheable", False) else None
    key = None
    if folder is not None:
        try:
            key = cache.kernel_key(request)
        except Exception:  # noqa: BLE001 -- an odd global's repr must not stop a compile
            key = None
        hit = cache.load_entry(folder, key) if key is not None else None
        if hit is not None:
            kernel = _from_cache(request, *hit)
            if kernel is not None:
                kernel.metadata.cache_hit_s = time.perf_counter() - started
                call_compile_listener(kernel.name, kernel, cache_hit=True)
                return kernel
    kernel = _compile_stages(request, started)
    if key is not None:
        cache.store_entry(folder, key, kernel.asm, kernel.metadata.to_json())
    call_compile_listener(kernel.name, kernel, cache_hit=False)
    return kernel


def _from_cache(request: CompileRequest, asm: dict[str, Any],
                metadata: dict[str, Any]) -> Optional[CompiledKernel]:
    """A ``CompiledKernel`` from a cache entry (``None`` if its IR does not parse)."""
    try:
        module = parse_module(asm["ir"])
    except Exception:  # noqa: BLE001 -- a corrupt entry is a miss
        return None
    last = list(asm)[-1]
    return CompiledKernel(name=request.source.__name__, target=request.target,
                          options=request.options, signature=request.signature,
                          constexprs=dict(request.spec.constexprs), asm=asm,
                          metadata=KernelMetadata.from_json(metadata), module=module,
                          binary=module if last == "ir" else asm[last])


def _compile_stages(request: CompileRequest, started: float) -> CompiledKernel:
    # the compiler proper is imported by the first compile, not by ``import anytile``
    from ..frontend import compile_to_ir
    from ..passes import run_default_pipeline

    source, backend, target, options, spec = (request.source, request.backend, request.target,
                                              request.options, request.spec)
    module = compile_to_ir(source, spec.arg_types, spec.constexprs, spec.arg_attrs)
    verify_if_enabled(module, after="the frontend")
    module = run_default_pipeline(module)
    check_lowered_ops(backend, module, source.__name__)   # the backend lowers every op in it
    asm: dict[str, Any] = {"ir": print_module(module)}
    metadata = KernelMetadata(name=source.__name__, target=str(target),
                              num_warps=options.num_warps, num_stages=options.num_stages)
    out: Any = copy.deepcopy(module)  # stages may rewrite their input; keep ``module`` pristine
    stage_times: dict[str, float] = {"ir": time.perf_counter() - started}
    for stage in backend.stages(target, options):
        stage_started = time.perf_counter()
        try:
            out = stage.run(out, metadata)
        except AnytileError:
            raise
        except Exception as exc:
            raise BackendError(
                f"backend '{backend.name}' failed in stage '{stage.name}' while compiling "
                f"'{source.__name__}' for {target}: {type(exc).__name__}: {exc}") from exc
        verify_if_enabled(out, after=f"stage '{stage.name}' of backend '{backend.name}'")
        asm[stage.name] = out if isinstance(out, (str, bytes)) else str(out)
        stage_times[stage.name] = time.perf_counter() - stage_started
    metadata.compile_time_s = time.perf_counter() - started
    metadata.stage_times_s = stage_times
    return CompiledKernel(name=source.__name__, target=target, options=options,
                          signature=request.signature, constexprs=dict(spec.constexprs), asm=asm,
                          metadata=metadata, module=module, binary=out)


@user_facing
def compile(kernel: Any, target: str, signature: Mapping[str, str],
            constexprs: Optional[Mapping[str, Any]] = None, **options: Any) -> CompiledKernel:
    """Ahead-of-time compilation for a target that need not be present here::

        at.compile(add_kernel, target="nvidia:sm_90",
                   signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 1024},
                   num_warps=4)

    ``signature`` gives every runtime parameter's type (``"*fp32"`` for a pointer, ``"i32"``,
    ``"fp16"``...; append ``":16"`` to declare it divisible by 16)."""
    if not isinstance(getattr(kernel, "launch_signature", None), Signature):
        raise TypeError("at.compile takes a function decorated with @anytile.jit")
    tgt = Target.parse(target)
    backend = get_backend(tgt.backend)
    if not backend.supports_target(tgt.arch):
        raise BackendError(f"backend '{backend.name}' cannot compile for '{tgt.arch}'; "
                           f"its targets: {', '.join(backend.targets())}")
    rules: Signature = kernel.launch_signature
    specs = rules.from_text(signature, dict(constexprs or {}))
    options = backend.parse_options(**{"debug": kernel.debug, **options})
    return compile_kernel(CompileRequest(kernel, backend, tgt, options,
                                         rules.compile_inputs(specs)))
