"""Compiling for NVIDIA without a GPU: every test kernel and example to PTX for sm_80 and
sm_90, assembled by ``ptxas`` when it is installed; the backend's identity and errors."""
import importlib
import re
import sys
from pathlib import Path

import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import BackendError
from anytile.language.extra import libdevice
from anytile_nvidia.backend import NvidiaBackend
from anytile_nvidia.stages import find_ptxas, parse_ptxas_report

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))
from anytile_conformance.catalogue import kernels as catalogue  # noqa: E402
from tma_kit import carried_matmul as _matmul_pointer_increments  # noqa: E402

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed here")

_MATMUL = ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm")
KERNELS = {
    "add": (catalogue.vector_add_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16",
                                          "out_ptr": "*fp32:16", "n": "i32"}, {"BLOCK": 256}),
    "softmax": (catalogue.softmax_kernel, {"out_ptr": "*fp32:16", "in_ptr": "*fp32:16",
                                           "in_row_stride": "i32:16", "out_row_stride": "i32:16",
                                           "n_cols": "i32"}, {"BLOCK": 1024}),
    "persistent_softmax": (catalogue.persistent_softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32",
                                                                 "n_rows": "i32", "n_cols": "i32"},
                           {"BLOCK": 128}),
    "matmul_f16": (catalogue.matmul_kernel, {"a_ptr": "*fp16", "b_ptr": "*fp16", "bias_ptr": "*fp32",
                                             "c_ptr": "*fp16", **{k: "i32" for k in _MATMUL}},
                   {"ACTIVATION": "relu", "BM": 16, "BN": 32, "BK": 16, "GROUP_M": 2}),
    "layernorm": (catalogue.layer_norm_kernel, {**{k: "*fp32" for k in ("x_ptr", "y_ptr", "w_ptr", "b_ptr",
                                                                        "mean_ptr", "rstd_ptr")},
                                                "stride": "i32", "n": "i32", "eps": "fp32"},
                  {"BLOCK": 512}),
    "transpose": (catalogue.transpose_kernel, {"src": "*i16", "dst": "*i16", "m": "i32", "n": "i32"},
                  {"BM": 16, "BN": 32}),
    "histogram": (catalogue.histogram_kernel, {"x_ptr": "*i32", "hist_ptr": "*i32", "n": "i32",
                                               "bins": "i32"}, {"BLOCK": 256}),
}


def example_kernels():
    out = {}
    for path in sorted((ROOT / "examples").glob("*.py")):
        module = importlib.import_module(path.stem)
        for name in dir(module):
            obj = getattr(module, name)
            if hasattr(obj, "arg_names") and hasattr(obj, "constexpr_names"):
                out[f"{path.stem}.{name}"] = obj
    return out


def signature_for(fn):
    """Every parameter of an example kernel: ``*_ptr`` -> ``*fp32``, the rest ``i32``;
    constexprs get 32 (``eps`` is a float)."""
    sig, consts = {}, {}
    for name in fn.arg_names:
        if name in fn.constexpr_names:
            consts[name] = 32
        elif name.endswith("ptr"):
            sig[name] = "*fp32:16"
        elif name == "eps":
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    return sig, consts


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_test_kernels_compile_to_ptx(name, arch):
    fn, sig, consts = KERNELS[name]
    compiled = at.compile(fn, target=f"nvidia:{arch}", signature=sig, constexprs=consts)
    ptx = compiled.asm["ptx"]
    assert f".target {arch}" in ptx and f".entry {fn.__name__}" in ptx
    assert "laid-out ir" in compiled.asm and "#blocked" in compiled.asm["laid-out ir"]
    if find_ptxas() is not None:
        assert isinstance(compiled.asm["cubin"], bytes) and compiled.metadata["registers"] > 0
        assert compiled.metadata["spills"] == 0


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(example_kernels()))
def test_examples_compile_and_assemble(name, arch):
    fn = example_kernels()[name]
    sig, consts = signature_for(fn)
    compiled = at.compile(fn, target=f"nvidia:{arch}", signature=sig, constexprs=consts)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_aligned_vector_add_uses_16_byte_accesses():
    fn, sig, consts = KERNELS["add"]
    sig = {**sig, "n": "i32:16"}
    ptx = at.compile(fn, target="nvidia:sm_90", signature=sig, constexprs={"BLOCK": 1024}).asm["ptx"]
    assert ptx.count("ld.global.v4.b32") == 4 or ptx.count("ld.global.v4.f32") == 4
    assert "st.global.v4" in ptx


@pytest.mark.parametrize("num_stages", [1, 3])
def test_loop_carried_pointer_tiles_keep_16_byte_accesses(num_stages):
    """The axis facts of ``ptrs`` survive ``ptrs += BK`` (a fixpoint over the loop) and the
    carried pointer tile is laid out for vector accesses (it ran at half speed before):
    16-byte loads without pipelining, 16-byte ``cp.async`` copies with it."""
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32:16",
           "sam": "i32:16", "sbk": "i32:16", "scm": "i32:16"}
    ptx = at.compile(_matmul_pointer_increments, target="nvidia:sm_90", signature=sig,
                     constexprs={"BM": 128, "BN": 128, "BK": 32}, num_warps=4,
                     num_stages=num_stages).asm["ptx"]
    assert "ld.global.b16" not in ptx
    if num_stages == 1:
        assert "ld.global.v4.b32" in ptx and "cp.async" not in ptx
    else:
        assert "cp.async.cg.shared.global" in ptx and "cp.async.ca" not in ptx


def test_unaligned_vector_add_falls_back_to_scalar_accesses():
    fn, sig, consts = KERNELS["add"]
    sig = {**sig, "x_ptr": "*fp32", "n": "i32:16"}
    ptx = at.compile(fn, target="nvidia:sm_90", signature=sig, constexprs={"BLOCK": 1024}).asm["ptx"]
    assert ptx.count("ld.global.v4") == 2  # y only; x (no alignment known) element by element


def test_softmax_reduces_with_warp_shuffles():
    fn, sig, consts = KERNELS["softmax"]
    ptx = at.compile(fn, target="nvidia:sm_90", signature=sig, constexprs=consts).asm["ptx"]
    assert ptx.count("shfl.sync.bfly") >= 10  # 5 rounds for max, 5 for sum
    assert "anytile_smem" in ptx


@at.jit
def _max_min_of_pairs(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.maximum(x, y) + tl.minimum(x, y) + tl.max(x, axis=0))


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "fp64"])
def test_float_max_and_min_are_bare_ptx_min_max(dtype):
    # PTX's min/max order -0.0 below +0.0 themselves: no compare-and-select of equal operands
    sig = {"x_ptr": f"*{dtype}:16", "y_ptr": f"*{dtype}:16", "out_ptr": f"*{dtype}:16"}
    ptx = at.compile(_max_min_of_pairs, target="nvidia:sm_90", signature=sig,
                     constexprs={"BLOCK": 256}).asm["ptx"]
    assert re.search(r"\bmax\.(f32|f16|f64|f16x2)\b", ptx) and re.search(r"\bmin\.", ptx)
    assert not re.search(r"setp\.(eq|neu)\.f(16|32|64)", ptx), "a tie select after min/max"


def test_backend_identity_and_no_gpu_here():
    backend = NvidiaBackend()
    assert backend.name == "nvidia" and backend.device_prefix == "cuda"
    assert {"sm_80", "sm_89", "sm_90"} <= set(backend.targets())
    avail = backend.availability()
    if not avail.usable:
        assert avail.reason and "Traceback" not in avail.reason
        assert backend.devices() == []


def test_unknown_arch_is_a_clear_error():
    fn, sig, consts = KERNELS["add"]
    with pytest.raises(BackendError, match="sm_90"):
        at.compile(fn, target="nvidia:sm_1", signature=sig, constexprs=consts)


def test_ptxas_report_is_parsed():
    meta = {}
    parse_ptxas_report("ptxas info    : Function properties for k\n    0 bytes stack frame, 8 bytes "
                       "spill stores, 4 bytes spill loads\nptxas info    : Used 40 registers, "
                       "used 1 barriers, 2048 bytes smem", meta)
    assert meta == {"registers": 40, "spills": 12, "static_shared": 2048, "stack_frame": 0}


@at.jit
def scan_and_atomics_kernel(x_ptr, out_ptr, counter_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.cumsum(x, axis=0))
    tl.atomic_max(counter_ptr + offs % 4, x)
    tl.atomic_add(counter_ptr, 1.5)


@needs_ptxas
def test_scan_and_float_atomics_assemble():
    compiled = at.compile(scan_and_atomics_kernel, target="nvidia:sm_80",
                          signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "counter_ptr": "*fp32"},
                          constexprs={"BLOCK": 128})
    ptx = compiled.asm["ptx"]
    assert "atom.global" in ptx or "atom." in ptx


@at.jit
def tensor_core_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("sig", ["*fp16", "*bf16"])
def test_16_bit_dots_use_tensor_cores(arch, sig):
    compiled = at.compile(tensor_core_dot_kernel, target=f"nvidia:{arch}",
                          signature={"a_ptr": sig, "b_ptr": sig, "c_ptr": "*fp32"},
                          constexprs={"M": 64, "N": 32, "K": 32}, num_warps=4)
    ptx = compiled.asm["ptx"]
    assert ptx.count("mma.sync.aligned.m16n8k16") == 8  # 64x32x32 / 16x8x16 = 32, 8 per warp
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" in ptx


def test_rows_of_an_odd_stride_are_not_vector_accessed():
    """``src + rm[:, None] * 37 + rn[None, :]``: each row starts at an odd address, so no
    2-byte i8 access (it raised CUDA_ERROR_MISALIGNED_ADDRESS: the divisibility of ``rm``'s
    first element had been taken for every row's)."""
    from anytile_conformance.catalogue.memory import tile2d_kernel
    sig = {"src": "*i8:16", "dst": "*i8:16", "m": "i32:16", "n": "i32:16", "stride_sm": "i32",
           "stride_dm": "i32:16"}
    ptx = at.compile(tile2d_kernel, target="nvidia:sm_90", signature=sig,
                     constexprs={"BM": 16, "BN": 16, "stride_sn": 1}).asm["ptx"]
    assert re.search(r"ld\.global\.v\d", ptx) is None


@at.jit
def _two_k_loops(a_ptr, b_ptr, d_ptr, e_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :]),
                     tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :]), acc)
    for k in range(0, K, BK):
        acc = tl.dot(tl.load(d_ptr + rm[:, None] * K + (k + rk)[None, :]),
                     tl.load(e_ptr + (k + rk)[:, None] * BN + rn[None, :]), acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_pipelines_share_the_shared_memory_budget():
    """Pipelined loops fit sm_90's 227 KiB together; a kernel that cannot fit is a clear
    compile error."""
    from anytile.errors import CompilationError
    from anytile_nvidia.target import shared_memory_limit
    sig = {n: "*fp16:16" for n in ("a_ptr", "b_ptr", "d_ptr", "e_ptr")}
    sig.update({"c_ptr": "*fp32:16", "K": "i32:16"})
    k = at.compile(_two_k_loops, target="nvidia:sm_90", signature=sig,
                   constexprs={"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=4)
    assert k.metadata["pipelined_dot_operands"] == 4
    assert k.metadata["shared"] <= shared_memory_limit("sm_90")
    with pytest.raises(CompilationError, match="bytes of shared memory"):
        at.compile(catalogue.matmul_kernel, target="nvidia:sm_80", signature={
            "a_ptr": "*fp16", "b_ptr": "*fp16", "bias_ptr": "*fp32", "c_ptr": "*fp16",
            **{n: "i32" for n in _MATMUL}},
            constexprs={"ACTIVATION": "none", "BM": 256, "BN": 256, "BK": 256, "GROUP_M": 1})


def test_loops_one_after_the_other_share_their_buffers_bytes():
    """The second K loop's buffers take the first's bytes (the first has drained): the kernel
    takes one loop's shared memory, at the stages asked for, where it once took both loops'
    (and the second got fewer stages); the copy unit's ring is one for both loops.  Before
    the second loop's copies, the hand-over: the threads' accesses fenced for the async proxy,
    then a barrier.  Attention's causal forward (two K/V loops) at 128x128 tiles then fits."""
    from anytile.codegen.gpu.shared_ops import SharedBufferType
    sig = {n: "*fp16:16" for n in ("a_ptr", "b_ptr", "d_ptr", "e_ptr")}
    sig.update({"c_ptr": "*fp32:16", "K": "i32:16"})
    k = at.compile(_two_k_loops, target="nvidia:sm_90", signature=sig,
                   constexprs={"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=3)
    allocs = [SharedBufferType.parse(t) for t in
              re.findall(r"= shared_alloc : (shared<[^>]*>)", k.asm["laid-out ir"])]
    assert len(allocs) == 4 and allocs[:2] == allocs[2:]
    assert allocs[0].stages == 4              # 3 stages and one slot the MMAs read in flight
    one_loop = allocs[0].nbytes + allocs[1].nbytes
    assert k.metadata["pipelined_shared"] == one_loop
    assert one_loop <= k.metadata["shared"] < one_loop + 4096
    desc = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
            "d_desc": "tensordesc<fp16[128, 64]>", "e_desc": "tensordesc<fp16[64, 128]>",
            "c_ptr": "*fp32:16", "K": "i32:16"}
    boxed = at.compile(_two_descriptor_k_loops, target="nvidia:sm_90", signature=desc,
                       constexprs={"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=3)
    assert boxed.metadata["pipelined_shared"] == one_loop
    # each loop's steady state fences the MMA's slots; the hand-over fences once more
    ptx = boxed.asm["ptx"]
    assert "cp.async.bulk.tensor" in ptx and ptx.count("fence.proxy.async") == 3
    assert k.asm["ptx"].count("fence.proxy.async") == 2


@at.jit
def _two_descriptor_k_loops(a_desc, b_desc, d_desc, e_desc, c_ptr, K, BM: tl.constexpr,
                            BN: tl.constexpr, BK: tl.constexpr):
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([0, k]), b_desc.load([k, 0]), acc)
    for k in range(0, K, BK):
        acc = tl.dot(d_desc.load([0, k]), e_desc.load([k, 0]), acc)
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], acc)


@at.jit
def _store_each_step(x_ptr, w_ptr, STEPS, B: tl.constexpr):
    r = tl.arange(0, B)
    w = tl.load(w_ptr + r[:, None] * B + r[None, :])
    for k in range(0, STEPS):
        x = tl.load(x_ptr + k * B * B + r[:, None] * B + r[None, :])
        tl.store(x_ptr + (k + 1) * B * B + r[:, None] * B + r[None, :], tl.dot(x, w).to(tl.float16))


def test_loops_that_store_keep_their_loads_in_order():
    """A loop whose iteration reads what the previous one stored is not pipelined."""
    k = at.compile(_store_each_step, target="nvidia:sm_90", signature={
        "x_ptr": "*fp16:16", "w_ptr": "*fp16:16", "STEPS": "i32"}, constexprs={"B": 16})
    assert k.metadata["pipelined_dot_operands"] == 0 and "cp.async" not in k.asm["ptx"]


@at.jit
def _even_row_starts(x_ptr, out_ptr):
    r = tl.arange(0, 16)
    c = tl.arange(0, 8)
    x = tl.load(x_ptr + (r + r)[:, None] + c[None, :])   # row i starts at element 2i
    tl.store(out_ptr + r[:, None] * 8 + c[None, :], x)


def test_sum_of_runs_keeps_only_what_every_run_start_has():
    ptx = at.compile(_even_row_starts, target="nvidia:sm_90",
                     signature={"x_ptr": "*fp16:16", "out_ptr": "*fp16:16"}, num_warps=1).asm["ptx"]
    assert re.search(r"ld\.global\.v\d\.b32", ptx) is None


@pytest.mark.parametrize("num_warps,BM,BK", [(4, 64, 16), (4, 128, 32), (8, 128, 64), (8, 128, 128)])
def test_wgmma_is_the_default_on_sm_90_and_stays_in_flight(num_warps, BM, BK):
    """On sm_90 the pipelined dot runs on the warpgroup MMA (checked against NumPy on an H100
    and H200 by test_device.py): swizzled operand slots, one more slot than stages, each
    iteration waiting only for the previous one's MMAs and the loop's exit for the last;
    ``wgmma=False`` keeps mma.sync, and so does sm_80."""
    from anytile_nvidia.warpgroup import warpgroup_row
    assert sorted(warpgroup_row(m, num_warps) for m in range(BM)) == list(range(BM))
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32:16",
           "sam": "i32:16", "sbk": "i32:16", "scm": "i32:16"}
    consts = {"BM": BM, "BN": 128, "BK": BK}

    def build(arch, **options):
        return at.compile(_matmul_pointer_increments, target=f"nvidia:{arch}", signature=sig,
                          constexprs=consts, num_warps=num_warps, num_stages=3, **options)
    on, off, ampere = build("sm_90"), build("sm_90", wgmma=False), build("sm_80")
    ptx = on.asm["ptx"]
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") == \
        BM // (16 * num_warps) * BK // 16
    assert ".target sm_90a" in ptx and "fence.proxy.async" in ptx
    assert ".extern .shared .align 1024" in ptx
    loop, exit_ = ptx.index("wgmma.wait_group.sync.aligned 1;"), ptx.index("wgmma.wait_group.sync.aligned 0;")
    assert ptx.index("wgmma.commit_group") < loop < exit_
    width = min(128, 2 * BK)
    assert f"swizzle {width} warps {num_warps} in-flight 1" in on.asm["laid-out ir"]
    # 3 stages + 1 slot in flight; 128 x 128 x 128 fits only 2 + 1 in sm_90's 227 KiB
    slots = 3 if BK == 128 else 4
    assert f"shared<{slots}x{BM}x{BK}xf16" in on.asm["laid-out ir"]
    for other in (off, ampere):
        assert "wgmma" not in other.asm["ptx"] and "mma.sync" in other.asm["ptx"]
    # the warp index is lane 0's (GpuTarget.warp_uniform): ptxas then keeps the MMA
    # descriptors built from it in uniform registers, not moved over before each MMA
    warp = re.search(r"mov\.u32\s+(%r\d+), %tid\.x;.*?shr\.u32\s+(%r\d+), \1, 5;", ptx, re.S)
    assert warp and re.search(rf"shfl\.sync\.idx\.b32\s+%r\d+, {warp.group(2)}, 0, 31, -1;", ptx)
    if find_ptxas():
        assert on.asm.get("cubin")


@at.jit
def _computed_a_accumulates(x_ptr, v_ptr, o_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                            BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rk = tl.arange(0, BK)
    rn = tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :])
        p = tl.exp(x.to(tl.float32)).to(tl.float16)          # A computed in the body
        v = tl.load(v_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(p, v, acc)
    tl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_a_dot_with_a_computed_operand_keeps_no_slot_in_flight():
    """A dot reading A from registers (attention's ``p @ v``) waits for its own MMAs, so its
    loaded operand's ring holds ``num_stages`` slots, not one more for reads in flight."""
    sig = {"x_ptr": "*fp16:16", "v_ptr": "*fp16:16", "o_ptr": "*fp32:16", "K": "i32:16"}
    c = at.compile(_computed_a_accumulates, target="nvidia:sm_90", signature=sig,
                   constexprs={"BM": 64, "BN": 64, "BK": 64}, num_warps=4, num_stages=3)
    text = c.asm["laid-out ir"]
    assert "shared<3x64x64xf16" in text and "shared<4x64x64xf16" not in text
    assert "wgmma.wait_group.sync.aligned 1;" not in c.asm["ptx"]


@at.jit
def _staged_tiles_overlapping_loops(q1_ptr, q2_ptr, x_ptr, c_ptr, d_ptr, K):
    r64 = tl.arange(0, 64)
    r128 = tl.arange(0, 128)
    r256 = tl.arange(0, 256)
    q1 = tl.load(q1_ptr + r64[:, None] * 256 + r256[None, :])      # staged, loops 1 and 2
    acc = tl.zeros((64, 64), dtype=tl.float32)
    for s in range(0, K):
        acc = tl.dot(q1, tl.load(x_ptr + s * 16384 + r256[:, None] * 64 + r64[None, :]), acc)
    q2 = tl.load(q2_ptr + r64[:, None] * 128 + r128[None, :])      # staged, loops 2 and 3
    for s in range(0, K):
        acc = tl.dot(q1, tl.load(x_ptr + s * 16384 + r256[:, None] * 64 + r64[None, :]), acc)
        acc = tl.dot(q2, tl.load(x_ptr + s * 8192 + r128[:, None] * 64 + r64[None, :]), acc)
    acc3 = tl.zeros((64, 256), dtype=tl.float32)
    for s in range(0, K):
        acc3 = tl.dot(q2, tl.load(x_ptr + s * 32768 + r128[:, None] * 256 + r256[None, :]), acc3)
    tl.store(c_ptr + r64[:, None] * 64 + r64[None, :], acc)
    tl.store(d_ptr + r64[:, None] * 256 + r256[None, :], acc3)


@pytest.mark.parametrize("num_stages", [3, 8])
def test_a_loop_is_budgeted_from_where_the_live_buffers_end(num_stages):
    """The third loop's ring goes above q2, which sits above the hole q1 left: its budget
    counts the bytes up to q2's end, not q2's size alone, so the kernel still fits."""
    sig = {"q1_ptr": "*fp16:16", "q2_ptr": "*fp16:16", "x_ptr": "*fp16:16", "c_ptr": "*fp32:16",
           "d_ptr": "*fp32:16", "K": "i32"}
    c = at.compile(_staged_tiles_overlapping_loops, target="nvidia:sm_90", signature=sig,
                   num_warps=4, num_stages=num_stages)
    assert c.metadata["shared"] <= 232448
    assert len(re.findall(r"= shared_alloc : shared<", c.asm["laid-out ir"])) == 6


@at.jit
def prints(x_ptr, n):
    x = tl.load(x_ptr + tl.arange(0, 128))
    tl.device_print("x", x)
    tl.device_print("n", n, hex=True)
    tl.device_print("h", x.to(tl.float16))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_device_print_calls_vprintf(arch):
    compiled = at.compile(prints, target=f"nvidia:{arch}", signature={"x_ptr": "*fp32", "n": "i32"})
    ptx = compiled.asm["ptx"]
    assert ".extern .func  (.param .b32 func_retval0) vprintf" in ptx or "vprintf" in ptx
    assert ptx.count("call.uni") + ptx.count("call ") >= 3
    if find_ptxas() is not None:
        assert compiled.asm["cubin"][:4] == b"\x7fELF"


@at.jit
def spin_lock_kernel(lock_ptr, data_ptr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    while tl.atomic_cas(lock_ptr, 0, 1, sem=SEM, scope=SCOPE) == 1:
        pass
    tl.store(data_ptr, tl.load(data_ptr) + 1)
    tl.debug_barrier()
    tl.atomic_xchg(lock_ptr, 0, sem=SEM, scope=SCOPE)


@needs_ptxas
@pytest.mark.parametrize("sem, scope, cas, around", [
    ("acq_rel", "gpu", "atom.acq_rel.gpu.global.cas", ["fence.acq_rel.gpu", "atom", "fence.acq_rel.gpu"]),
    ("release", "cta", "atom.release.cta.global.cas", ["fence.acq_rel.cta", "atom"]),
    ("acquire", "sys", "atom.acquire.sys.global.cas", ["atom", "fence.acq_rel.sys"]),
    ("relaxed", "gpu", "atom.relaxed.gpu.global.cas", ["atom"]),
])
def test_atomic_orderings_and_scopes_reach_the_ptx(sem, scope, cas, around):
    """A lock's acquire and release at the scope asked for: cmpxchg carries its ordering;
    NVPTX gives atomicrmw none, so the exchange that releases the lock sits between fences
    (a release's before it, an acquire's after)."""
    ptx = at.compile(spin_lock_kernel, target="nvidia:sm_90",
                     signature={"lock_ptr": "*i32", "data_ptr": "*i32"},
                     constexprs={"SEM": sem, "SCOPE": scope}).asm["ptx"]
    assert cas in ptx
    seen = [ln.strip().rstrip(";") if ln.strip().startswith("fence") else "atom"
            for ln in ptx.splitlines() if ln.strip().startswith(("fence", "atom.global.exch"))]
    assert seen == around


@at.jit
def mul_add(data, out):
    offs = tl.arange(0, 128)
    x = tl.load(data + offs)
    tl.store(out + offs, tl.math.exp2(x * 1.5 + 1.0))


@pytest.mark.parametrize("fusion", [True, False, None])
def test_fp_fusion_contracts_the_kernels_multiply_add(fusion):
    """Triton's ``enable_fp_fusion`` (on unless said): ``x * 1.5 + 1.0`` becomes one
    ``fma.rn.f32``; off, a multiply and an add each rounded (as Triton's own test checks).
    f32 ``exp2`` is the flushing ``ex2.approx.ftz.f32`` either way, with no libdevice
    denormal fix-up around it."""
    options = {} if fusion is None else {"enable_fp_fusion": fusion}
    ptx = at.compile(mul_add, target="nvidia:sm_90", signature={"data": "*fp32:16", "out": "*fp32:16"},
                     **options).asm["ptx"]
    fused = re.search(r"(mad|fma)\.r[nzmp]\.(ftz\.)?f32", ptx) is not None
    assert fused == (fusion is not False)
    assert ("mul.rn.f32" in ptx) == (fusion is False)
    assert ptx.count("ex2.approx.ftz.f32") == 1 and "ex2.approx.f32" not in ptx


def test_fp_fusion_default_follows_the_environment(monkeypatch):
    monkeypatch.delenv("ANYTILE_DEFAULT_FP_FUSION", raising=False)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")       # Triton's own knob, as its test sets it
    assert NvidiaBackend().parse_options().enable_fp_fusion is False
    monkeypatch.setenv("ANYTILE_DEFAULT_FP_FUSION", "1")      # ours first
    assert NvidiaBackend().parse_options().enable_fp_fusion is True
    monkeypatch.setenv("ANYTILE_DEFAULT_FP_FUSION", "0")
    assert NvidiaBackend().parse_options().enable_fp_fusion is False
    monkeypatch.setenv("ANYTILE_DEFAULT_FP_FUSION", "1")
    assert NvidiaBackend().parse_options().enable_fp_fusion is True
    import numpy as np
    assert NvidiaBackend().parse_options(enable_fp_fusion=np.False_).enable_fp_fusion is False
    assert NvidiaBackend().parse_options(enable_fp_fusion=np.int64(1)).enable_fp_fusion is True
    with pytest.raises(at.errors.LaunchValueError, match="enable_fp_fusion=1.0"):
        NvidiaBackend().parse_options(enable_fp_fusion=1.0)
    with pytest.raises(at.errors.LaunchValueError, match="enable_fp_fusion='yes'"):
        NvidiaBackend().parse_options(enable_fp_fusion="yes")


@at.jit
def gamma_then_mul_add(x_ptr, y_ptr):
    offs = tl.arange(0, 128)
    y = libdevice.tgamma(tl.load(x_ptr + offs))
    tl.store(y_ptr + offs, y * 2.0 + 1.0)


@at.jit
def library_formulas(x_ptr, k_ptr, y_ptr, z_ptr, w_ptr):
    offs = tl.arange(0, 128)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, libdevice.acos(x * 0.5))           # 1 + f, written constant-first
    tl.store(z_ptr + offs, libdevice.log1p(x * 0.25))
    tl.store(w_ptr + offs, libdevice.ldexp(x, tl.load(k_ptr + offs)) + tl.math.exp2(x))


def _binary_and_unary_flags(module):
    from anytile.ir import ops as ir_ops
    from anytile.ir.nodes import walk
    return [(type(op).__name__, op.kind, op.strict) for op in walk(module.kernel.body)
            if isinstance(op, (ir_ops.BinaryOp, ir_ops.UnaryOp))]


def test_the_math_librarys_formulas_are_never_fused():
    """``tgamma`` is a float64 formula whose roundings are its own (``strict`` ops, made
    inside ``Builder.strict_arithmetic``): fusion changes only the kernel's own
    ``* 2.0 + 1.0``; the flag prints and parses back."""
    sig = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16"}
    fused, unfused = (at.compile(gamma_then_mul_add, target="nvidia:sm_90", signature=sig,
                                 enable_fp_fusion=f).asm["ptx"] for f in (True, False))
    for pattern in (r"fma\.rn\.f64", r"mul\.rn\.f64", r"add\.rn\.f64", r"sub\.rn\.f64"):
        assert len(re.findall(pattern, fused)) == len(re.findall(pattern, unfused)), pattern
    assert "mul.f64" not in fused and "add.f64" not in fused
    assert fused.count("fma.rn.f32") == 1 and "fma.rn.f32" not in unfused
    module = at.compile(gamma_then_mul_add, target="nvidia:sm_90", signature=sig).module
    assert all(strict for name, kind, strict in _binary_and_unary_flags(module)
               if name == "BinaryOp" and kind in ("add", "sub", "mul") and strict is not None) is False
    from anytile.ir.parser import parse_module
    text = str(module)
    assert 'binary {kind = "mul", strict = True}' in text
    assert str(parse_module(text)) == text


def test_library_arithmetic_stays_strict_through_the_passes():
    """The canonicaliser's constant-to-the-right rewrite keeps ``strict`` (``acos`` forms
    ``1 + f``), ``log1p``'s correction is strict, and ``ldexp``'s powers of two keep
    libdevice's non-flushing ``exp2`` while the kernel's own ``tl.math.exp2`` flushes."""
    sig = {"x_ptr": "*fp32:16", "k_ptr": "*i32:16", "y_ptr": "*fp32:16", "z_ptr": "*fp32:16",
           "w_ptr": "*fp32:16"}
    compiled = at.compile(library_formulas, target="nvidia:sm_90", signature=sig)
    flags = _binary_and_unary_flags(compiled.module)
    user = [f for f in flags if not f[2]]
    # the kernel's own: x * 0.5, x * 0.25, the final add and tl.math.exp2 (and integer ops)
    assert ("UnaryOp", "exp2", False) in user
    assert sum(1 for name, kind, _ in user if name == "BinaryOp" and kind == "mul") == 2
    assert sum(1 for name, kind, strict in flags if name == "UnaryOp" and kind == "exp2" and strict) >= 1
    ptx = compiled.asm["ptx"]
    assert ptx.count("ex2.approx.ftz.f32") == 1       # tl.math.exp2 alone
    assert "ex2.approx.f32" in ptx                     # ldexp's 2^k, subnormal ones kept
    unfused = at.compile(library_formulas, target="nvidia:sm_90", signature=sig,
                         enable_fp_fusion=False).asm["ptx"]
    # the kernel's x * 0.5 and x * 0.25 feed the libraries' strict adds (acos's 1 + f,
    # log1p's x + 1): nothing fuses across, so fusion adds no fma here
    assert ptx.count("fma.rn.f32") == unfused.count("fma.rn.f32")


@at.jit
def _add_transposed(a_ptr, b_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    r, c = tl.arange(0, R), tl.arange(0, C)
    a = tl.load(a_ptr + r[:, None] * C + c[None, :])
    bt = tl.load(b_ptr + c[None, :] * R + r[:, None])
    tl.store(out_ptr + r[:, None] * C + c[None, :], a + bt)


def test_an_exchange_larger_than_shared_memory_takes_rounds():
    """Putting a 256x256 float tile into another layout through shared memory would take
    266 KiB, more than sm_90 gives a program (227 KiB): it goes a half at a time (the result
    is checked on every device by ``tests/language``'s 128x128 case, which the simulated AMD
    devices exchange in halves)."""
    sig = {"a_ptr": "*fp32:16", "b_ptr": "*fp32:16", "out_ptr": "*fp32:16"}
    compiled = at.compile(_add_transposed, target="nvidia:sm_90", signature=sig,
                          constexprs={"R": 256, "C": 256})
    assert compiled.metadata.shared == 128 * 260 * 4


def test_a_tile_used_as_is_and_transposed_is_copied_once_and_read_both_ways():
    """``x`` feeds one dot as it is and another through ``tl.trans`` (attention's backward
    reads q and do so): the pipeline copies it into one slot and the second dot reads that
    slot's transposed view in place, K-major where the first reads it N-major -- no transpose
    in registers, no staging in the scratch space.  ``a`` and ``g``, read by the dots of two
    loops, are each copied once into a buffer of their own before the first."""
    from test_simulated import BOTH_WAYS_SIG, both_ways_kernel
    k = at.compile(both_ways_kernel, target="nvidia:sm_90", signature=BOTH_WAYS_SIG,
                   constexprs={"BM": 64, "BK": 64, "BN": 32}, num_warps=4, num_stages=3)
    laid = k.asm["laid-out ir"]
    assert k.metadata["pipelined_dot_operands"] == 2          # x, in each loop
    assert k.metadata["staged_dot_operands"] == 2             # a and g
    assert laid.count("shared_load {transposed = True}") == 2
    assert not re.search(r"permute .*xf16", laid)
    ptx = k.asm["ptx"]
    # x N-major for a @ x (trans-b 1), K-major for g @ x^T (trans-b 0), each loop
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n32k16\.f32\.f16\.f16 .*, 1, 1, 0, 1;", ptx)) == 8
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.f16\.f16 .*, 1, 1, 0, 0;", ptx)) == 4
