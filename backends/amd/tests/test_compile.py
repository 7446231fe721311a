"""Compiling for AMD without a GPU: every kernel of the quick conformance suite for all five
architectures, assembled and linked by ``ld.lld`` into code objects that are read back (no
undefined symbols, metadata that parses, no spills); the instructions the lowering chooses;
``at.compile`` and ``anytile compile``; the compile without ``ld.lld``."""
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import CompileOptions, KernelMetadata, Target
from anytile.cli import main as cli_main
from anytile.errors import BackendError, CompilationError
from anytile.ir.parser import parse_module
from anytile_amd.archs import KNOWN_ARCHS
from anytile_amd.backend import AmdBackend
from anytile_amd.code_object import find_lld, read_metadata
from anytile_conformance.catalogue import kernels as catalogue

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
ARCHS = sorted(KNOWN_ARCHS)
needs_lld = pytest.mark.skipif(find_lld() is None, reason="ld.lld is not installed here")


@pytest.fixture(scope="module")
def suite_kernels():
    """The quick suite's kernel specialisations (``conformance_kernels.py``, its own process)."""
    done = subprocess.run([sys.executable, str(HERE / "conformance_kernels.py")],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _compile_entry(backend, arch, entry):
    """One recorded kernel through the AMD stages: (code object, metadata) or the error."""
    options = CompileOptions(num_warps=entry["num_warps"], num_stages=entry["num_stages"],
                             debug=entry["debug"])
    metadata = KernelMetadata(name=entry["name"])
    out = parse_module(entry["ir"])
    try:
        for stage in backend.stages(Target("amd", arch), options):
            out = stage.run(out, metadata)
    except Exception as exc:  # noqa: BLE001 -- collected: the report names every kernel
        return None, f"{entry['name']}: {type(exc).__name__}: {exc}"
    return out, metadata


@needs_lld
@pytest.mark.parametrize("arch", ARCHS)
def test_every_conformance_kernel_compiles_and_links(suite_kernels, arch):
    backend = AmdBackend()
    assert len(suite_kernels) > 200
    failures = []
    # two at a time: one kernel's ld.lld runs while the next is lowered
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda e: _compile_entry(backend, arch, e), suite_kernels))
    for entry, (code, metadata) in zip(suite_kernels, results):
        if code is None:
            failures.append(metadata)
            continue
        info = read_metadata(code)
        kernel = info.kernels[metadata["kernel_name"]]
        assert info.undefined_symbols == [] and info.target.endswith(arch)
        assert kernel.wave_size == KNOWN_ARCHS[arch].wave_size == metadata["wave_size"]
        assert kernel.max_workgroup_size == metadata["threads_per_block"]
        if metadata["spills"] or metadata["scratch_bytes"]:
            failures.append(f"{entry['name']}: {metadata['spills']} spills, "
                            f"{metadata['scratch_bytes']} scratch bytes")
    assert failures == []


_MATMUL = ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm")
KERNELS = {
    "add": (catalogue.vector_add_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16",
                                          "out_ptr": "*fp32:16", "n": "i32:16"}, {"BLOCK": 1024}),
    "softmax": (catalogue.softmax_kernel, {"out_ptr": "*fp32:16", "in_ptr": "*fp32:16",
                                           "in_row_stride": "i32:16", "out_row_stride": "i32:16",
                                           "n_cols": "i32"}, {"BLOCK": 1024}),
    "matmul_f16": (catalogue.matmul_kernel, {"a_ptr": "*fp16", "b_ptr": "*fp16", "bias_ptr": "*fp32",
                                             "c_ptr": "*fp16", **{k: "i32" for k in _MATMUL}},
                   {"ACTIVATION": "relu", "BM": 64, "BN": 64, "BK": 32, "GROUP_M": 2}),
}


def compiled(name, arch, **options):
    fn, sig, consts = KERNELS[name]
    return at.compile(fn, target=f"amd:{arch}", signature=sig, constexprs=consts, **options)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_stages_and_what_they_record(arch):
    k = compiled("softmax", arch)
    assert list(k.asm)[:4] == ["ir", "laid-out ir", "llir", "amdgcn"]
    assert 'target triple = "amdgcn-amd-amdhsa"' in k.asm["llir"]
    assert f'.amdgcn_target "amdgcn-amd-amdhsa--{arch}' in k.asm["amdgcn"]
    meta = k.metadata
    assert meta["wave_size"] == KNOWN_ARCHS[arch].wave_size
    assert meta["threads_per_block"] == 4 * meta["wave_size"]
    assert meta["sgprs"] > 0 and meta["vgprs"] > 0 and meta["registers"] == meta["vgprs"]
    assert meta["spills"] == 0 and meta["lds_bytes"] == 0 and meta["shared"] > 0
    if find_lld() is not None:
        assert k.asm["hsaco"][:4] == b"\x7fELF"
        assert read_metadata(k.asm["hsaco"]).undefined_symbols == []


@pytest.mark.parametrize("arch,moves", [("gfx90a", ("v_mov_b32_dpp", "ds_bpermute_b32")),
                                        ("gfx942", ("v_mov_b32_dpp", "ds_bpermute_b32")),
                                        ("gfx1100", ("v_mov_b32_dpp", "v_permlanex16_b32")),
                                        ("gfx1201", ("v_mov_b32_dpp", "v_permlanex16_b32"))])
def test_reductions_use_the_architectures_lane_moves(arch, moves):
    asm = compiled("softmax", arch).asm["amdgcn"]
    for move in moves:
        assert f"\t{move} " in asm
    assert "s_barrier" in asm


@pytest.mark.parametrize("arch,instruction", [("gfx90a", "v_mfma_f32_32x32x8f16"),
                                              ("gfx942", "v_mfma_f32_32x32x8_f16"),
                                              ("gfx950", "v_mfma_f32_32x32x8_f16"),
                                              ("gfx1100", "v_wmma_f32_16x16x16_f16"),
                                              ("gfx1201", "v_wmma_f32_16x16x16_f16")])
def test_fp16_matmul_runs_on_matrix_instructions(arch, instruction):
    k = compiled("matmul_f16", arch)
    assert f"\t{instruction} " in k.asm["amdgcn"]
    assert k.metadata["spills"] == 0


def test_aligned_vector_add_uses_16_byte_accesses():
    asm = compiled("add", "gfx942").asm["amdgcn"]
    assert "global_load_dwordx4" in asm and "global_store_dwordx4" in asm


@at.jit
def _float_atomics(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + offs % 4, tl.load(x_ptr + offs))


def test_float_atomic_add_is_native_at_agent_scope():
    k = at.compile(_float_atomics, target="amd:gfx942", signature={"x_ptr": "*fp32", "out_ptr": "*fp32"},
                   constexprs={"BLOCK": 256})
    assert 'syncscope("agent")' in k.asm["llir"] and "amdgpu.no.fine.grained.memory" in k.asm["llir"]
    assert "global_atomic_add_f32" in k.asm["amdgcn"] and "cmpswap" not in k.asm["amdgcn"]


def test_at_compile_for_gfx1100_without_a_gpu():
    k = at.compile(catalogue.vector_add_kernel, target="amd:gfx1100",
                   signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                   constexprs={"BLOCK": 256})
    assert k.target == Target("amd", "gfx1100")
    assert ".amdhsa_wavefront_size32 1" in k.asm["amdgcn"] and k.metadata["wave_size"] == 32


def test_cli_emits_amdgcn(capsys):
    code = cli_main(["compile", str(ROOT / "examples" / "vector_add.py") + ":add_kernel",
                     "--target", "amd:gfx942", "--signature",
                     "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32", "--constexpr", "BLOCK=1024",
                     "--emit", "amdgcn"])
    assert code == 0
    out = capsys.readouterr().out
    assert ".amdgcn_target" in out and "add_kernel" in out and "s_endpgm" in out


def test_without_ld_lld_the_compile_stops_at_amdgcn(monkeypatch):
    from anytile_amd import stages
    monkeypatch.setenv("ANYTILE_NO_CACHE", "1")
    monkeypatch.setattr(stages, "find_lld", lambda: None)
    k = compiled("add", "gfx942")
    assert list(k.asm)[-1] == "amdgcn" and "hsaco" not in k.asm
    assert "ld.lld was not found" in k.metadata["hsaco"]
    assert k.metadata["vgprs"] > 0                        # read from the relocatable object
    with pytest.raises(BackendError, match="no loadable code object.*ld.lld was not found"):
        AmdBackend().load(k, None)


def test_backend_identity_targets_and_errors():
    backend = AmdBackend()
    assert backend.name == "amd" and backend.device_prefix == "hip"
    assert set(ARCHS) == {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"} <= set(backend.targets())
    fn, sig, consts = KERNELS["add"]
    with pytest.raises(BackendError, match="cannot compile for 'sm_90'.*gfx942"):
        at.compile(fn, target="amd:sm_90", signature=sig, constexprs=consts)
    with pytest.raises(CompilationError, match=r"num_warps=32 gives 2048 threads.*gfx942"):
        compiled("add", "gfx942", num_warps=32)
    assert compiled("add", "gfx1100", num_warps=32).metadata["threads_per_block"] == 1024


@at.jit
def _scoped_atomics(out_ptr, SCOPE: tl.constexpr):
    tl.atomic_add(out_ptr, 1, scope=SCOPE)
    tl.atomic_cas(out_ptr + 1, 0, 1, scope=SCOPE)


@pytest.mark.parametrize("scope, llvm", [("cta", 'syncscope("workgroup")'),
                                         ("gpu", 'syncscope("agent")'), ("sys", None)])
def test_atomic_scopes_reach_the_code(scope, llvm):
    llir = at.compile(_scoped_atomics, target="amd:gfx942", signature={"out_ptr": "*i32"},
                      constexprs={"SCOPE": scope}).asm["llir"]
    atomics = [ln for ln in llir.splitlines() if "atomicrmw" in ln or "cmpxchg" in ln]
    assert len(atomics) == 2
    assert all((llvm in ln) if llvm else ("syncscope" not in ln) for ln in atomics)


@at.jit
def _bf16_atomics(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + offs % 4, tl.load(x_ptr + offs))


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_bf16_atomics_link_as_compare_and_swap(arch):
    k = at.compile(_bf16_atomics, target=f"amd:{arch}", signature={"x_ptr": "*bf16", "out_ptr": "*bf16"},
                   constexprs={"BLOCK": 256})
    assert "global_atomic_cmpswap" in k.asm["amdgcn"] and k.asm["hsaco"]
