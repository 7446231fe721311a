"""core/anytile/codegen/gpu is vendor-neutral: no vendor names, no vendor instructions, no
architecture names, no vendor's copy unit -- in code, comments or docstrings.  What one vendor
has lives in its backend (hooks, tables, dot strategies, fragment loaders, its dialect)."""
import re
from pathlib import Path

import anytile.codegen.gpu

GPU = Path(anytile.codegen.gpu.__file__).parent

#: vendors, their ISAs and toolchains, architecture names, and instructions only one has
FORBIDDEN = re.compile(
    r"nvidia|\bamd\b|cuda|rocm|\bhip\b|hopper|ampere|ptx|nvvm|libdevice|__nv_|"
    r"\bsm_\d+|mma\.sync|\bmma\.|cp\.async|wgmma|warpgroup|ldmatrix|stmatrix|shfl|bar\.sync|"
    r"cvt\.rna|mfma|wmma|amdgcn|hsaco|gfx\d+|ds_bpermute|\bdpp\b|permlane|\blds\b",
    re.IGNORECASE)


def test_no_vendor_words_in_the_shared_gpu_code():
    files = sorted(GPU.rglob("*.py"))
    assert len(files) >= 15
    hits = [f"{path.relative_to(GPU)}:{n}: {line.strip()}"
            for path in files
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if FORBIDDEN.search(line)]
    assert hits == []


#: one vendor's copy unit: boxes copied by descriptor, its state and its proxy fence
COPY_UNIT = re.compile(r"box|(?<![a-z])tma|tma(?![a-z])|proxy_fence", re.IGNORECASE)


def test_no_copy_unit_in_the_shared_gpu_code():
    hits = [f"{path.relative_to(GPU)}:{n}: {line.strip()}"
            for path in sorted(GPU.rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if COPY_UNIT.search(line)]
    assert hits == []
    for word in ("box_exact", "BOX_STATE_BYTES", "pointer_boxes", "TMA", "tma_sim", "proxy_fence = True"):
        assert COPY_UNIT.search(word), word
    assert not COPY_UNIT.search("FragmentMap")


def test_the_check_catches_what_it_looks_for():
    for word in ("mma.sync.aligned", "cp.async.cg", "ldmatrix.x4", "sm_90", "gfx942", "NVIDIA",
                 "v_mfma_f32_32x32x8f16", "wgmma", "ptx", "AMD", "amdgcn", "wmma"):
        assert FORBIDDEN.search(word), word
    for word in ("matrix instruction", "shuffle_xor", "warp_size", "command", "shipping"):
        assert not FORBIDDEN.search(word), word
