"""The host LLVM: one cached target machine, the O3 pipeline, assembly, object code, JIT.

LLVM is initialised once per process.  The target machine is made for the host CPU name and
features (``llvm.get_host_cpu_name()`` / ``get_host_cpu_features()``), so the code uses the
widest vector unit the machine has.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import llvmlite.binding as llvm

__all__ = ["HostInfo", "host_info", "host_target_machine", "optimize", "parse", "emit_asm_and_object",
           "JitLibrary"]


@dataclass(frozen=True)
class HostInfo:
    """The host CPU as the code generator sees it."""

    cpu_name: str
    features: str            # LLVM feature string ("+avx2,+fma,...")
    vector_bits: int         # widest SIMD register
    triple: str

    @property
    def feature_summary(self) -> str:
        wanted = ("avx512f", "avx512bw", "avx512fp16", "avx512bf16", "avx2", "fma", "f16c",
                  "sse4.2", "neon", "sve", "fp16")
        on = {f[1:] for f in self.features.split(",") if f.startswith("+")}
        return " ".join(f for f in wanted if f in on)


@functools.lru_cache(maxsize=None)
def host_info() -> HostInfo:
    _initialise()
    feats = llvm.get_host_cpu_features()
    on = {k for k, v in feats.items() if v}
    if "avx512f" in on:
        bits = 512
    elif "avx2" in on or "avx" in on:
        bits = 256
    else:
        bits = 128   # SSE2 / NEON / others
    return HostInfo(llvm.get_host_cpu_name(), feats.flatten(), bits, llvm.get_process_triple())


@functools.lru_cache(maxsize=None)
def _initialise() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.lru_cache(maxsize=None)
def host_target_machine() -> "llvm.TargetMachine":
    """The cached O3 target machine for this host (JIT code model)."""
    return _new_target_machine()


def _new_target_machine() -> "llvm.TargetMachine":
    info = host_info()
    target = llvm.Target.from_triple(info.triple)
    return target.create_target_machine(cpu=info.cpu_name, features=info.features, opt=3,
                                        jit=True)


def optimize(llvm_ir: str) -> "llvm.ModuleRef":
    """Parse, verify and run the O3 pipeline (loop and SLP vectorisers on) over ``llvm_ir``."""
    mod = llvm.parse_assembly(llvm_ir)
    mod.verify()
    pb, _ = _o3_pass_builder()
    pb.getModulePassManager().run(mod, pb)   # a pass manager runs once; make a new one
    return mod


@functools.lru_cache(maxsize=None)
def _o3_pass_builder() -> tuple:
    # made once: building a PassBuilder per compile is slow and crashes some llvmlite builds
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(host_target_machine(), pto)
    return pb, pto


def parse(llvm_ir: str) -> "llvm.ModuleRef":
    """Parse and verify LLVM IR text (already optimised: no passes run)."""
    mod = llvm.parse_assembly(llvm_ir)
    mod.verify()
    return mod


def emit_asm_and_object(mod: "llvm.ModuleRef") -> tuple[str, bytes]:
    tm = host_target_machine()
    return tm.emit_assembly(mod), tm.emit_object(mod)


class JitLibrary:
    """Machine code loaded into this process; keeps the execution engine alive."""

    def __init__(self, object_code: bytes) -> None:
        backing = llvm.parse_assembly("")
        backing.triple = host_info().triple
        # the engine takes ownership of its target machine, so it gets a fresh one
        self._engine = llvm.create_mcjit_compiler(backing, _new_target_machine())
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
        self._engine.finalize_object()

    def address_of(self, name: str) -> int:
        addr = self._engine.get_function_address(name)
        if not addr:
            raise KeyError(f"symbol {name!r} not found in the JIT-compiled kernel")
        return addr
