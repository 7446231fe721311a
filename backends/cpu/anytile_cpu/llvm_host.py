"""LLVM for the CPU backend: code-generation targets, the O3 pipeline, assembly and object
code, and the in-process JIT.

LLVM is initialised once per process.  Every call into LLVM here holds ``_LLVM_LOCK``, and
``os.fork`` waits for it (and for llvmlite's own lock): a thread compiling a kernel at the
moment of a fork would otherwise leave the child a lock held forever and LLVM's state half
changed; the child can compile and launch.  The default target is the host: its CPU name and
features (``llvm.get_host_cpu_name()`` / ``get_host_cpu_features()``), so code uses the widest
vector unit the machine has.  On x86-64 hosts the generic levels ``x86-64``, ``x86-64-v2``,
``x86-64-v3`` (AVX2) and ``x86-64-v4`` (AVX-512) can be compiled for too, e.g. ahead of time
for other machines.
"""
from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

__all__ = ["CpuTarget", "host_info", "cpu_target", "generic_arches", "target_machine",
           "host_target_machine", "optimize", "parse", "to_text", "emit_asm_and_object",
           "JitLibrary"]

# the global LLVM context, the cached pass builders and the target machines are not safe
# to use from two threads at once
_LLVM_LOCK = threading.RLock()


def _llvmlite_lock():
    """llvmlite's lock around its C API (``ffi.lib._lock``; None where llvmlite has none):
    its objects' finalizers call LLVM under it alone, outside ``_LLVM_LOCK``."""
    lock = getattr(getattr(getattr(llvm, "ffi", None), "lib", None), "_lock", None)
    return lock if hasattr(lock, "__enter__") and hasattr(lock, "__exit__") else None


def _hold_llvm_for_fork() -> None:
    _LLVM_LOCK.acquire()
    inner = _llvmlite_lock()
    if inner is not None:
        inner.__enter__()


def _release_llvm_after_fork() -> None:
    inner = _llvmlite_lock()
    if inner is not None:
        inner.__exit__(None, None, None)
    _LLVM_LOCK.release()


# the forking thread takes the locks first: no thread is inside LLVM while the process forks
os.register_at_fork(before=_hold_llvm_for_fork, after_in_parent=_release_llvm_after_fork,
                    after_in_child=_release_llvm_after_fork)

GENERIC_X86_VECTOR_BITS = {"x86-64": 128, "x86-64-v2": 128, "x86-64-v3": 256, "x86-64-v4": 512}


@dataclass(frozen=True)
class CpuTarget:
    """A CPU as the code generator sees it."""

    cpu_name: str
    features: str            # LLVM feature string ("+avx2,+fma,..."); empty: the CPU's own
    vector_bits: int         # widest SIMD register
    triple: str

    @property
    def feature_summary(self) -> str:
        wanted = ("avx512f", "avx512bw", "avx512fp16", "avx512bf16", "avx2", "fma", "f16c",
                  "sse4.2", "neon", "sve", "fp16")
        on = {f[1:] for f in self.features.split(",") if f.startswith("+")}
        return " ".join(f for f in wanted if f in on)


@functools.lru_cache(maxsize=None)
def _initialise() -> None:
    with _LLVM_LOCK:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()


@functools.lru_cache(maxsize=None)
def host_info() -> CpuTarget:
    _initialise()
    with _LLVM_LOCK:
        feats = llvm.get_host_cpu_features()
        name, triple = llvm.get_host_cpu_name(), llvm.get_process_triple()
    on = {k for k, v in feats.items() if v}
    if "avx512f" in on:
        bits = 512
    elif "avx2" in on or "avx" in on:
        bits = 256
    else:
        bits = 128   # SSE2 / NEON / others
    return CpuTarget(name, feats.flatten(), bits, triple)


def generic_arches() -> list[str]:
    """Generic architecture levels this host's LLVM can compile for."""
    return list(GENERIC_X86_VECTOR_BITS) if host_info().triple.startswith("x86_64") else []


def cpu_target(arch: str) -> CpuTarget:
    """The code-generation target called ``arch`` (the host CPU name or a generic level)."""
    host = host_info()
    if arch == host.cpu_name:
        return host
    if arch in generic_arches():
        return CpuTarget(arch, "", GENERIC_X86_VECTOR_BITS[arch], host.triple)
    raise ValueError(f"unknown cpu architecture '{arch}'; known: "
                     f"{', '.join([host.cpu_name] + generic_arches())}")


@functools.lru_cache(maxsize=None)
def target_machine(target: CpuTarget) -> "llvm.TargetMachine":
    """The cached O3 target machine for ``target`` (JIT code model)."""
    return _new_target_machine(target)


def host_target_machine() -> "llvm.TargetMachine":
    return target_machine(host_info())


def _new_target_machine(target: CpuTarget) -> "llvm.TargetMachine":
    _initialise()
    with _LLVM_LOCK:
        return llvm.Target.from_triple(target.triple).create_target_machine(
            cpu=target.cpu_name, features=target.features, opt=3, jit=True)


def optimize(llvm_ir: str, target: CpuTarget | None = None) -> "llvm.ModuleRef":
    """Parse, verify and run the O3 pipeline (loop and SLP vectorisers on) over ``llvm_ir``."""
    with _LLVM_LOCK:
        mod = parse(llvm_ir)
        pb, _ = _o3_pass_builder(target or host_info())
        pb.getModulePassManager().run(mod, pb)   # a pass manager runs once; make a new one
        return mod


@functools.lru_cache(maxsize=None)
def _o3_pass_builder(target: CpuTarget) -> tuple:
    # made once per target: building a PassBuilder is slow (its tuning options stay alive)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(target_machine(target), pto)
    return pb, pto


def parse(llvm_ir: str) -> "llvm.ModuleRef":
    """Parse and verify LLVM IR text (into the global LLVM context, hence the lock)."""
    _initialise()
    with _LLVM_LOCK:
        mod = llvm.parse_assembly(llvm_ir)
        mod.verify()
        return mod


def to_text(mod: "llvm.ModuleRef") -> str:
    """``mod`` as LLVM IR text (under the lock: printing reads the shared LLVM context)."""
    with _LLVM_LOCK:
        return str(mod)


def emit_asm_and_object(mod: "llvm.ModuleRef",
                        target: CpuTarget | None = None) -> tuple[str, bytes]:
    with _LLVM_LOCK:
        tm = target_machine(target or host_info())
        return tm.emit_assembly(mod), tm.emit_object(mod)


class JitLibrary:
    """Machine code loaded into this process; keeps the execution engine alive."""

    def __init__(self, object_code: bytes) -> None:
        with _LLVM_LOCK:
            self._link(object_code)

    def _link(self, object_code: bytes) -> None:
        backing = llvm.parse_assembly("")
        backing.triple = host_info().triple
        # the engine takes ownership of its target machine, so it gets a fresh one
        self._engine = llvm.create_mcjit_compiler(backing, _new_target_machine(host_info()))
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
        self._engine.finalize_object()

    def address_of(self, name: str) -> int:
        with _LLVM_LOCK:
            addr = self._engine.get_function_address(name)
        if not addr:
            raise KeyError(f"symbol {name!r} not found in the JIT-compiled kernel")
        return addr
