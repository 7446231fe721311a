"""The compile driver: frontend -> generic passes -> the backend's named stages.

Also ``at.compile`` (ahead of time, for a target that need not be present) and the parsing of
Triton-style signature strings (``"*fp32"``, ``"i32"``)."""
from __future__ import annotations

import copy
import time
from typing import Any, Mapping, Optional

from ..backend import Backend, CompiledKernel, CompileOptions, Target
from ..errors import AnytileError, BackendError, CompilationError
from ..ir.types import PointerType, ScalarType, Type, scalar_type
from . import cache
from .discovery import get_backend

__all__ = ["compile_kernel", "compile", "parse_signature_type"]

# Triton's spellings of scalar types, accepted beside anytile's own (f32, i32, ...)
_TRITON_NAMES = {"fp16": "f16", "fp32": "f32", "fp64": "f64", "bf16": "bf16", "i1": "i1",
                 "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u1": "i1", "u8": "u8",
                 "u16": "u16", "u32": "u32", "u64": "u64", "int1": "i1", "bool": "i1"}


def parse_signature_type(text: str) -> Type:
    """``"*fp32"`` -> ``ptr<f32>``; ``"i32"``/``"int32"``/``"f32"``/``"fp16"`` -> scalars."""
    t = text.strip()
    if t.startswith("*"):
        inner = parse_signature_type(t[1:])
        if not isinstance(inner, ScalarType):
            raise ValueError(f"'{text}': a pointer must point to a scalar type")
        return PointerType(inner)
    name = _TRITON_NAMES.get(t, t)
    for long, short in (("float", "f"), ("bfloat", "bf"), ("uint", "u"), ("int", "i")):
        if name.startswith(long) and name[len(long):].isdigit():
            name = short + name[len(long):]
            break
    try:
        return scalar_type(name)
    except KeyError:
        raise ValueError(f"unknown type '{text}' in signature (use e.g. *fp32, i32, fp16, bf16)") from None


def compile_kernel(fn: Any, backend: Backend, target: Target, options: CompileOptions,
                   arg_types: Mapping[str, Type], constexprs: Mapping[str, Any],
                   arg_attrs: Mapping[str, dict]) -> CompiledKernel:
    """Compile ``fn`` for ``target``: every stage's output is kept in ``asm``.  Backends
    declaring ``disk_cacheable`` go through the on-disk cache (``runtime/cache.py``)."""
    started = time.perf_counter()
    folder = cache.cache_dir() if getattr(backend, "disk_cacheable", False) else None
    key = None
    if folder is not None:
        try:
            key = cache.kernel_key(fn, backend, target, options, arg_types, constexprs, arg_attrs)
        except Exception:  # noqa: BLE001 -- an odd global's repr must not stop a compile
            key = None
        hit = cache.load_entry(folder, key) if key is not None else None
        if hit is not None:
            kernel = _from_cache(fn, target, options, arg_types, constexprs, *hit)
            if kernel is not None:
                kernel.metadata["cache_hit_s"] = time.perf_counter() - started
                return kernel
    kernel = _compile_stages(fn, backend, target, options, arg_types, constexprs, arg_attrs,
                             started)
    if key is not None:
        cache.store_entry(folder, key, kernel.asm, kernel.metadata)
    return kernel


def _from_cache(fn: Any, target: Target, options: CompileOptions,
                arg_types: Mapping[str, Type], constexprs: Mapping[str, Any],
                asm: dict[str, Any], metadata: dict[str, Any]) -> Optional[CompiledKernel]:
    """A ``CompiledKernel`` from a cache entry (``None`` if its IR does not parse)."""
    from ..ir.parser import parse_module
    try:
        module = parse_module(asm["ir"])
    except Exception:  # noqa: BLE001 -- a corrupt entry is a miss
        return None
    signature = [(name, arg_types[name]) for name in fn.arg_names if name in arg_types]
    last = list(asm)[-1]
    return CompiledKernel(name=fn.__name__, target=target, options=options,
                          signature=signature, constexprs=dict(constexprs), asm=asm,
                          metadata=metadata, module=module,
                          binary=module if last == "ir" else asm[last])


def _compile_stages(fn: Any, backend: Backend, target: Target, options: CompileOptions,
                    arg_types: Mapping[str, Type], constexprs: Mapping[str, Any],
                    arg_attrs: Mapping[str, dict], started: float) -> CompiledKernel:
    from ..frontend import compile_to_ir
    from ..ir.printer import print_module
    from ..passes import run_default_pipeline

    module = compile_to_ir(fn, arg_types, constexprs, arg_attrs)
    module = run_default_pipeline(module)
    asm: dict[str, Any] = {"ir": print_module(module)}
    metadata: dict[str, Any] = {"name": fn.__name__, "num_warps": options.num_warps,
                                "num_stages": options.num_stages, "target": str(target)}
    signature = [(name, arg_types[name]) for name in fn.arg_names if name in arg_types]
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
                f"'{fn.__name__}' for {target}: {type(exc).__name__}: {exc}") from exc
        asm[stage.name] = out if isinstance(out, (str, bytes)) else str(out)
        stage_times[stage.name] = time.perf_counter() - stage_started
    metadata["compile_time_s"] = time.perf_counter() - started
    metadata["stage_times_s"] = stage_times
    return CompiledKernel(name=fn.__name__, target=target, options=options,
                          signature=signature, constexprs=dict(constexprs), asm=asm,
                          metadata=metadata, module=module, binary=out)


def compile(kernel: Any, target: str, signature: Mapping[str, str],
            constexprs: Optional[Mapping[str, Any]] = None, **options: Any) -> CompiledKernel:
    """Ahead-of-time compilation for a target that need not be present here::

        at.compile(add_kernel, target="nvidia:sm_90",
                   signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 1024},
                   num_warps=4)

    ``signature`` gives every runtime parameter's type (``"*fp32"`` for a pointer, ``"i32"``,
    ``"fp16"``...; append ``":16"`` to declare it divisible by 16)."""
    from .jit import JITFunction

    if not isinstance(kernel, JITFunction):
        raise TypeError("at.compile takes a function decorated with @anytile.jit")
    tgt = Target.parse(target)
    backend = get_backend(tgt.backend)
    if tgt.arch not in backend.targets():
        raise BackendError(f"backend '{backend.name}' cannot compile for '{tgt.arch}'; "
                           f"its targets: {', '.join(backend.targets())}")
    constexprs = dict(constexprs or {})
    arg_types: dict[str, Type] = {}
    arg_attrs: dict[str, dict] = {}
    for name in kernel.arg_names:
        if name in constexprs:
            continue
        if name in kernel.constexpr_names:
            if name in kernel.defaults:
                constexprs[name] = kernel.defaults[name]
                continue
            raise CompilationError(f"constexpr parameter '{name}' of '{kernel.__name__}' needs a "
                                   f"value in constexprs=")
        if name not in signature:
            raise CompilationError(f"parameter '{name}' of '{kernel.__name__}' has no type in "
                                   f"signature= (give e.g. '*fp32' or 'i32')")
        text, _, divisibility = str(signature[name]).partition(":")
        arg_types[name] = parse_signature_type(text)
        if divisibility:
            arg_attrs[name] = {"divisibility": int(divisibility)}
    unknown = set(signature) - set(kernel.arg_names)
    unknown |= set(constexprs) - set(kernel.arg_names)
    if unknown:
        raise CompilationError(f"'{kernel.__name__}' has no parameter(s) {sorted(unknown)}")
    opts = backend.parse_options(**options)
    return compile_kernel(kernel, backend, tgt, opts, arg_types, constexprs, arg_attrs)
