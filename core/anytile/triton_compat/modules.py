"""The module tree the import hook serves: each ``triton.*`` name and the function that builds
it on first import."""
from __future__ import annotations

import importlib
import types
from typing import Any, Callable, Optional

from .compiler import (ASTSource, Backend, BaseBackend, CompiledKernel, backends_by_name,
                       jit_class, make_backend, triton_compile, triton_key)
from .drivers import DriverBase, DriverConfig, GPUDriver, GPUTarget
from .knobs import knobs_module
from .reinterpret import TYPE_CANONICAL, TensorWrapper, reinterpret
from .standin import TRITON_VERSION, StandInModule, once
from .tools import cublas_module, experimental_descriptor

__all__ = ["served_modules"]


def served_modules() -> dict[str, Callable[[], types.ModuleType]]:
    """Module name -> a function building it (called on first import)."""
    import anytile as at
    import anytile.language as tl
    from anytile import errors, proton, testing
    from anytile.runtime import autotune

    compile_errors = StandInModule("triton.compiler.errors", {
        "CompilationError": at.CompilationError, "CompileTimeAssertionFailure":
        at.CompilationError})
    runtime_errors = StandInModule("triton.runtime.errors", {
        "OutOfResources": at.CompilationError, "InterpreterError": at.LaunchError,
        "PTXASError": at.CompilationError})
    jit_function = once(jit_class)

    def jit(fn: Optional[Callable] = None, **options: Any) -> Any:
        """``@triton.jit``: an anytile kernel, with Triton's ``JITFunction`` attributes."""
        if fn is None:
            return lambda f: jit_function()(f, **options)
        return jit_function()(fn, **options)

    def language() -> types.ModuleType:
        return tl

    def extra(*parts: str) -> Callable[[], types.ModuleType]:
        def build() -> types.ModuleType:
            return importlib.import_module(".".join(("anytile.language", "extra") + parts))
        return build

    driver = once(DriverConfig)
    backend_compiler = once(lambda: StandInModule("triton.backends.compiler", {
        "GPUTarget": GPUTarget, "BaseBackend": BaseBackend}))
    backend_driver = once(lambda: StandInModule("triton.backends.driver", {
        "DriverBase": DriverBase, "GPUDriver": GPUDriver}))
    compiler_compiler = once(lambda: StandInModule("triton.compiler.compiler", {
        "ASTSource": ASTSource, "CompiledKernel": CompiledKernel, "compile": triton_compile,
        "make_backend": make_backend, "triton_key": triton_key, "GPUTarget": GPUTarget}))
    runtime = lambda: StandInModule("triton.runtime", {   # noqa: E731
        "driver": driver(), "errors": runtime_errors, "Autotuner": autotune.Autotuner,
        "Heuristics": autotune.Heuristics, "Config": at.Config, "JITFunction": jit_function(),
        "KernelInterface": autotune.KernelInterface, "OutOfResources": at.CompilationError,
        "autotune": at.autotune, "heuristics": at.heuristics, "jit": jit})
    testing_mod = lambda: StandInModule("triton.testing", {   # noqa: E731
        "do_bench": testing.do_bench, "do_bench_cudagraph": _do_bench_cudagraph,
        "assert_close": testing.assert_close, "perf_report": testing.perf_report,
        "Benchmark": testing.Benchmark, "Mark": testing.Mark})
    compiler = lambda: StandInModule("triton.compiler", {   # noqa: E731
        "compile": triton_compile, "ASTSource": ASTSource, "CompiledKernel": CompiledKernel,
        "make_backend": make_backend, "errors": compile_errors,
        "compiler": compiler_compiler(), "CompilationError": at.CompilationError})

    knobs = once(knobs_module)

    def triton() -> types.ModuleType:
        return StandInModule("triton", {
            "__version__": f"{TRITON_VERSION}+anytile.{at.__version__}",
            "jit": jit, "autotune": at.autotune, "heuristics": at.heuristics,
            "Config": at.Config, "cdiv": at.cdiv, "next_power_of_2": at.next_power_of_2,
            "knobs": knobs(), "TritonError": errors.AnytileError,
            "set_allocator": at.set_allocator, "compile": triton_compile,
            "CompilationError": at.CompilationError, "OutOfResources": at.CompilationError,
            "JITFunction": jit_function(), "KernelInterface": autotune.KernelInterface,
            "reinterpret": reinterpret, "TensorWrapper": TensorWrapper, "language": tl})

    return {
        "triton": triton, "triton.knobs": knobs, "triton.language": language,
        "triton.language.core": language,
        "triton.language.math": lambda: tl.math, "triton.language.random": lambda: tl.random,
        "triton.language.extra": extra(), "triton.language.extra.cuda": extra("cuda"),
        "triton.language.extra.libdevice": extra("libdevice"),
        "triton.language.extra.cuda.libdevice": extra("libdevice"),
        "triton.language.extra.hip": extra("hip"),
        "triton.language.extra.hip.libdevice": extra("libdevice"),
        "triton.testing": testing_mod, "triton.runtime": runtime,
        "triton.runtime.driver": driver,
        "triton.runtime.errors": lambda: runtime_errors,
        "triton.runtime.autotuner": lambda: StandInModule("triton.runtime.autotuner", {
            "Autotuner": autotune.Autotuner, "Heuristics": autotune.Heuristics,
            "Config": at.Config, "autotune": at.autotune, "heuristics": at.heuristics,
            "OutOfResources": at.CompilationError, "PTXASError": at.CompilationError}),
        "triton.runtime.jit": lambda: StandInModule("triton.runtime.jit", {
            "JITFunction": jit_function(), "jit": jit,
            "KernelInterface": autotune.KernelInterface, "TensorWrapper": TensorWrapper,
            "reinterpret": reinterpret, "type_canonicalisation_dict": TYPE_CANONICAL}),
        "triton.runtime.cache": lambda: StandInModule("triton.runtime.cache", {
            "triton_key": triton_key, "knobs": knobs()}),
        "triton.backends": lambda: StandInModule("triton.backends", {
            "backends": backends_by_name(), "Backend": Backend, "BaseBackend": BaseBackend,
            "DriverBase": DriverBase, "compiler": backend_compiler(),
            "driver": backend_driver()}),
        "triton.backends.compiler": backend_compiler, "triton.backends.driver": backend_driver,
        "triton.compiler": compiler, "triton.compiler.errors": lambda: compile_errors,
        "triton.compiler.compiler": compiler_compiler,
        "triton.tools": lambda: StandInModule("triton.tools", {}),
        "triton.profiler": lambda: StandInModule("triton.profiler", {
            name: getattr(proton, name) for name in proton.__all__}),
        "triton.profiler.viewer": lambda: StandInModule("triton.profiler.viewer", {
            "parse": proton.parse, "print_tree": proton.print_tree}),
        "triton._C": lambda: StandInModule("triton._C", {}),
        "triton._C.libtriton": cublas_module,
        "triton.tools.experimental_descriptor": experimental_descriptor,
        "triton.tools.tensor_descriptor": lambda: StandInModule("triton.tools.tensor_descriptor", {
            "TensorDescriptor": at.TensorDescriptor}),
    }


def _do_bench_cudagraph(fn: Callable[[], Any], rep: int = 20, grad_to_none: Any = None,
                        quantiles: Any = None, return_mode: str = "mean") -> Any:
    """Triton's CUDA-graph timer, here timed as ``do_bench`` does (no graph capture)."""
    from anytile import testing
    return testing.do_bench(fn, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                            return_mode=return_mode)

